// The template interpreter (see interpreter.h).
#include "jinja/interpreter.h"

#include <fmt/format.h>

#include "jinja/access.h"
#include "jinja/operators.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

// Statements and expressions may nest this deep while rendering, macro
// calls included, so the native stack stays small and bounded.
constexpr int kMaxEvalDepth = 600;

// Decrements a depth counter when a rule returns.
class DepthExit {
 public:
  explicit DepthExit(int* depth) : depth_(depth) {}
  ~DepthExit() { --*depth_; }

 private:
  int* depth_;
};

// Leaves a runtime call level when a call returns.
class CallExit {
 public:
  explicit CallExit(Runtime& rt) : rt_(rt) {}
  ~CallExit() { rt_.LeaveCall(); }

 private:
  Runtime& rt_;
};

template <typename T>
Expected<T> At(SourcePos pos, Expected<T> result) {
  if (!result.ok()) return ErrorAt(pos, result.status());
  return result;
}

}  // namespace

Interpreter::~Interpreter() {
  std::vector<ScopePtr> alive;
  for (const auto& weak : captured_scopes_) {
    if (auto scope = weak.lock()) alive.push_back(std::move(scope));
  }
  for (const auto& scope : alive) scope->Clear();
}

Expected<std::string> Interpreter::Render(const Template& tmpl, std::shared_ptr<Scope> globals) {
  std::string output;
  out_ = &output;
  auto scope = std::make_shared<Scope>(std::move(globals));
  auto flow = ExecBody(tmpl.body, scope);
  out_ = nullptr;
  if (!flow.ok()) return flow.status();
  KILN_RETURN_IF_ERROR(rt_.status());
  return output;
}

Status Interpreter::Enter() {
  ++depth_;
  if (depth_ > kMaxEvalDepth) {
    return ResourceExhausted("template evaluation nested more than {} levels deep", kMaxEvalDepth);
  }
  return rt_.Charge();
}

Status Interpreter::Write(std::string_view text) {
  out_->append(text);
  KILN_RETURN_IF_ERROR(rt_.CheckStringSize(out_->size()));
  return rt_.Charge(static_cast<int64_t>(text.size()));
}

Expected<std::string> Interpreter::Capture(const Body& body, const ScopePtr& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  auto flow = ExecBody(body, scope);
  out_ = saved;
  if (!flow.ok()) return flow.status();
  return buffer;
}

// ---- statements ----

Expected<Interpreter::Flow> Interpreter::ExecBody(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& stmt : body) {
    KILN_ASSIGN_OR_RETURN(Flow flow, ExecStmt(*stmt, scope));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Expected<Interpreter::Flow> Interpreter::ExecStmt(const Stmt& stmt, const ScopePtr& scope) {
  DepthExit exit(&depth_);
  KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, Enter()));
  switch (stmt.kind) {
    case StmtKind::kText:
      KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, Write(static_cast<const TextStmt&>(stmt).text)));
      return Flow::kNormal;
    case StmtKind::kPrint: {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*static_cast<const PrintStmt&>(stmt).expr, scope));
      std::string text;
      KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, AppendStr(rt_, v, &text)));
      KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, Write(text)));
      return Flow::kNormal;
    }
    case StmtKind::kIf: return ExecIf(static_cast<const IfStmt&>(stmt), scope);
    case StmtKind::kFor: return ExecFor(static_cast<const ForStmt&>(stmt), scope);
    case StmtKind::kSet: {
      const auto& set = static_cast<const SetStmt&>(stmt);
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*set.value, scope));
      KILN_RETURN_IF_ERROR(Assign(set.target, v, *scope));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock:
      KILN_RETURN_IF_ERROR(ExecSetBlock(static_cast<const SetBlockStmt&>(stmt), scope));
      return Flow::kNormal;
    case StmtKind::kMacro: {
      const MacroDef& def = static_cast<const MacroStmt&>(stmt).def;
      scope->Set(def.name, MakeMacro(def, scope));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock:
      KILN_RETURN_IF_ERROR(ExecCallBlock(static_cast<const CallBlockStmt&>(stmt), scope));
      return Flow::kNormal;
    case StmtKind::kFilterBlock:
      KILN_RETURN_IF_ERROR(ExecFilterBlock(static_cast<const FilterBlockStmt&>(stmt), scope));
      return Flow::kNormal;
    case StmtKind::kWith: return ExecWith(static_cast<const WithStmt&>(stmt), scope);
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

Expected<Interpreter::Flow> Interpreter::ExecIf(const IfStmt& stmt, const ScopePtr& scope) {
  for (const auto& [test, body] : stmt.branches) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*test, scope));
    if (Truthy(v)) return ExecBody(body, scope);
  }
  return ExecBody(stmt.else_body, scope);
}

Expected<Interpreter::Flow> Interpreter::ExecFor(const ForStmt& stmt, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.iterable, scope));
  return RunLoop(stmt, iterable, scope, 0);
}

Expected<Interpreter::Flow> Interpreter::RunLoop(const ForStmt& stmt, const Value& iterable,
                                                 const ScopePtr& scope, int depth0) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, At(stmt.iterable->pos, IterItems(rt_, iterable)));
  if (stmt.filter) {
    // `for x in xs if cond`: the condition sees the loop variables but not
    // `loop`, and loop.length counts what passes.
    std::vector<Value> kept;
    for (Value& item : items) {
      KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, rt_.CountIteration()));
      auto probe = std::make_shared<Scope>(scope);
      KILN_RETURN_IF_ERROR(Assign(stmt.target, item, *probe));
      KILN_ASSIGN_OR_RETURN(Value keep, Eval(*stmt.filter, probe));
      if (Truthy(keep)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return ExecBody(stmt.else_body, std::make_shared<Scope>(scope));

  auto state = std::make_shared<LoopState>();
  auto list = std::make_shared<ListData>();
  list->items = std::move(items);
  state->items = std::move(list);
  state->depth0 = depth0;
  if (stmt.recursive) state->recurse = MakeLoopCall(stmt, scope, depth0);
  Value loop = Value::FromLoop(state);
  const std::vector<Value>& values = state->items->items;
  for (size_t i = 0; i < values.size(); ++i) {
    KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, rt_.CountIteration()));
    state->index0 = i;
    auto frame = std::make_shared<Scope>(scope);
    frame->Set("loop", loop);
    KILN_RETURN_IF_ERROR(Assign(stmt.target, values[i], *frame));
    KILN_ASSIGN_OR_RETURN(Flow flow, ExecBody(stmt.body, frame));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Interpreter::Assign(const AssignTarget& target, const Value& value, Scope& scope) {
  switch (target.kind) {
    case AssignTarget::Kind::kName: scope.Set(target.name, value); return Status::Ok();
    case AssignTarget::Kind::kNamespaceAttr: {
      const Value* ns = scope.Lookup(target.name);
      if (!ns || !ns->is_namespace()) {
        return ErrorAt(target.pos, InvalidArgument("cannot assign attribute on non-namespace object"));
      }
      ns->as_namespace()->Set(target.attr, value);
      return Status::Ok();
    }
    case AssignTarget::Kind::kTuple: {
      KILN_ASSIGN_OR_RETURN(std::vector<Value> items, At(target.pos, IterItems(rt_, value)));
      size_t want = target.items.size();
      if (items.size() > want) {
        return ErrorAt(target.pos, InvalidArgument("too many values to unpack (expected {})", want));
      }
      if (items.size() < want) {
        return ErrorAt(target.pos, InvalidArgument("not enough values to unpack (expected {}, got {})", want,
                                                   items.size()));
      }
      for (size_t i = 0; i < want; ++i) KILN_RETURN_IF_ERROR(Assign(target.items[i], items[i], scope));
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Expected<Value> Interpreter::ApplyFilters(const std::vector<std::unique_ptr<FilterExpr>>& filters,
                                          Value value, const ScopePtr& scope) {
  for (const auto& filter : filters) {
    KILN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(filter->args, scope));
    KILN_ASSIGN_OR_RETURN(value, At(filter->pos, filter->fn(rt_, value, args)));
  }
  return value;
}

Status Interpreter::ExecSetBlock(const SetBlockStmt& stmt, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, std::make_shared<Scope>(scope)));
  KILN_ASSIGN_OR_RETURN(Value value, ApplyFilters(stmt.filters, Value::String(std::move(text)), scope));
  return Assign(stmt.target, value, *scope);
}

Status Interpreter::ExecFilterBlock(const FilterBlockStmt& stmt, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, std::make_shared<Scope>(scope)));
  KILN_ASSIGN_OR_RETURN(Value value, ApplyFilters(stmt.filters, Value::String(std::move(text)), scope));
  std::string out;
  KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, AppendStr(rt_, value, &out)));
  return ErrorAt(stmt.pos, Write(out));
}

Status Interpreter::ExecCallBlock(const CallBlockStmt& stmt, const ScopePtr& scope) {
  const CallExpr& call = *stmt.call;
  KILN_ASSIGN_OR_RETURN(Value callee, Eval(*call.callee, scope));
  KILN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call.args, scope));
  args.keyword.emplace_back("caller", MakeMacro(stmt.caller, scope));
  KILN_ASSIGN_OR_RETURN(Value result, At(call.pos, Call(callee, args)));
  std::string out;
  KILN_RETURN_IF_ERROR(ErrorAt(stmt.pos, AppendStr(rt_, result, &out)));
  return ErrorAt(stmt.pos, Write(out));
}

Expected<Interpreter::Flow> Interpreter::ExecWith(const WithStmt& stmt, const ScopePtr& scope) {
  auto frame = std::make_shared<Scope>(scope);
  for (const auto& [target, expr] : stmt.assignments) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    KILN_RETURN_IF_ERROR(Assign(target, v, *frame));
  }
  return ExecBody(stmt.body, frame);
}

// ---- macros and calls ----

Value Interpreter::MakeMacro(const MacroDef& def, const ScopePtr& closure) {
  captured_scopes_.push_back(closure);
  auto fn = std::make_shared<Function>();
  fn->name = def.name;
  fn->call = [this, &def, closure](Runtime&, const CallArgs& args) { return CallMacro(def, closure, args); };
  return Value::FromFunction(std::move(fn));
}

Expected<Value> Interpreter::CallMacro(const MacroDef& def, const ScopePtr& closure, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(rt_.EnterCall());
  CallExit exit(rt_);
  auto frame = std::make_shared<Scope>(closure);
  size_t count = def.params.size();
  std::vector<std::optional<Value>> values(count);
  std::vector<std::pair<std::string, Value>> kwargs = args.keyword;
  for (size_t i = 0; i < count && i < args.positional.size(); ++i) values[i] = args.positional[i];
  bool found_caller = false;
  for (size_t i = args.positional.size(); i < count; ++i) {
    const std::string& name = def.params[i].name;
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == name) {
        values[i] = std::move(it->second);
        kwargs.erase(it);
        break;
      }
    }
    found_caller = found_caller || name == "caller";
  }
  if (args.positional.size() >= count) {
    for (const MacroParam& p : def.params) found_caller = found_caller || p.name == "caller";
  }
  if (def.uses_caller && !found_caller) {
    Value caller = Value::Undefined("No caller defined");
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == "caller") {
        caller = std::move(it->second);
        kwargs.erase(it);
        break;
      }
    }
    frame->Set("caller", std::move(caller));
  }
  if (def.uses_kwargs) {
    DictData dict;
    for (auto& [key, value] : kwargs) KILN_RETURN_IF_ERROR(dict.Set(Value::String(key), std::move(value)));
    KILN_ASSIGN_OR_RETURN(Value kw, MakeDict(std::move(dict)));
    frame->Set("kwargs", std::move(kw));
  } else if (!kwargs.empty()) {
    for (const auto& kw : kwargs) {
      if (kw.first == "caller") {
        return InvalidArgument("macro '{}' was invoked with two values for the special 'caller' argument",
                               def.name);
      }
    }
    return InvalidArgument("macro '{}' takes no keyword argument '{}'", def.name, kwargs.front().first);
  }
  if (def.uses_varargs) {
    std::vector<Value> extra;
    for (size_t i = count; i < args.positional.size(); ++i) extra.push_back(args.positional[i]);
    KILN_ASSIGN_OR_RETURN(Value varargs, MakeSequence(std::move(extra), SequenceKind::kTuple));
    frame->Set("varargs", std::move(varargs));
  } else if (args.positional.size() > count) {
    return InvalidArgument("macro '{}' takes not more than {} argument(s)", def.name, count);
  }
  for (size_t i = 0; i < count; ++i) {
    const MacroParam& param = def.params[i];
    if (values[i]) {
      frame->Set(param.name, std::move(*values[i]));
    } else if (param.default_value) {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*param.default_value, frame));
      frame->Set(param.name, std::move(v));
    } else {
      frame->Set(param.name, Value::Undefined(fmt::format("parameter '{}' was not provided", param.name)));
    }
  }
  KILN_ASSIGN_OR_RETURN(std::string text, Capture(def.body, frame));
  return Value::String(std::move(text));
}

Value Interpreter::MakeLoopCall(const ForStmt& stmt, const ScopePtr& scope, int depth0) {
  auto fn = std::make_shared<Function>();
  fn->name = "loop";
  fn->call = [this, &stmt, scope, depth0](Runtime&, const CallArgs& args) -> Expected<Value> {
    if (args.positional.size() != 1 || !args.keyword.empty()) {
      return InvalidArgument("loop() takes exactly one argument, the items to recurse into");
    }
    KILN_RETURN_IF_ERROR(rt_.EnterCall());
    CallExit exit(rt_);
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    auto flow = RunLoop(stmt, args.positional[0], scope, depth0 + 1);
    out_ = saved;
    if (!flow.ok()) return flow.status();
    return Value::String(std::move(buffer));
  };
  return Value::FromFunction(std::move(fn));
}

Expected<Value> Interpreter::Call(const Value& callee, const CallArgs& args) {
  switch (callee.kind()) {
    case Value::Kind::kUndefined: return UndefinedError(callee);
    case Value::Kind::kFunction: return callee.as_function().call(rt_, args);
    case Value::Kind::kLoop:
      if (callee.as_loop()->recurse.is_function()) {
        return callee.as_loop()->recurse.as_function().call(rt_, args);
      }
      return InvalidArgument("the loop must be recursive to be called");
    default: return InvalidArgument("'{}' object is not callable", TypeName(callee));
  }
}

// ---- expressions ----

Expected<Value> Interpreter::Eval(const Expr& expr, const ScopePtr& scope) {
  DepthExit exit(&depth_);
  KILN_RETURN_IF_ERROR(ErrorAt(expr.pos, Enter()));
  switch (expr.kind) {
    case ExprKind::kLiteral: return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName: return EvalName(static_cast<const NameExpr&>(expr), scope);
    case ExprKind::kList:
    case ExprKind::kTuple: return EvalSequence(static_cast<const SequenceExpr&>(expr), scope);
    case ExprKind::kDict: return EvalDict(static_cast<const DictExpr&>(expr), scope);
    case ExprKind::kGetAttr: {
      const auto& e = static_cast<const GetAttrExpr&>(expr);
      KILN_ASSIGN_OR_RETURN(Value object, Eval(*e.object, scope));
      return At(e.pos, GetAttr(rt_, object, e.name));
    }
    case ExprKind::kGetItem: return EvalGetItem(static_cast<const GetItemExpr&>(expr), scope);
    case ExprKind::kSlice:
      // Only meaningful as a subscript; inside a tuple subscript Python
      // makes a slice object, which nothing here can index with.
      return Value::Undefined("a slice is not a value");
    case ExprKind::kCall: return EvalCall(static_cast<const CallExpr&>(expr), scope);
    case ExprKind::kFilter: return EvalFilter(static_cast<const FilterExpr&>(expr), scope);
    case ExprKind::kTest: return EvalTest(static_cast<const TestExpr&>(expr), scope);
    case ExprKind::kNot: {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*static_cast<const UnaryExpr&>(expr).operand, scope));
      return Value::Bool(!Truthy(v));
    }
    case ExprKind::kNegate: {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*static_cast<const UnaryExpr&>(expr).operand, scope));
      return At(expr.pos, Negate(v));
    }
    case ExprKind::kPlus: {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*static_cast<const UnaryExpr&>(expr).operand, scope));
      return At(expr.pos, UnaryPlus(v));
    }
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr: return EvalBinary(static_cast<const BinaryExpr&>(expr), scope);
    case ExprKind::kCompare: return EvalCompare(static_cast<const CompareExpr&>(expr), scope);
    case ExprKind::kConcat: return EvalConcat(static_cast<const ConcatExpr&>(expr), scope);
    case ExprKind::kConditional: return EvalConditional(static_cast<const ConditionalExpr&>(expr), scope);
  }
  return Internal("unknown expression kind");
}

Expected<Value> Interpreter::EvalName(const NameExpr& expr, const ScopePtr& scope) {
  if (const Value* v = scope->Lookup(expr.name)) return *v;
  return Value::Undefined(fmt::format("'{}' is undefined", expr.name));
}

Expected<Value> Interpreter::EvalSequence(const SequenceExpr& expr, const ScopePtr& scope) {
  std::vector<Value> items;
  items.reserve(expr.items.size());
  for (const ExprPtr& item : expr.items) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
    items.push_back(std::move(v));
  }
  return At(expr.pos, MakeSequence(std::move(items), expr.kind == ExprKind::kTuple ? SequenceKind::kTuple
                                                                                   : SequenceKind::kList));
}

Expected<Value> Interpreter::EvalDict(const DictExpr& expr, const ScopePtr& scope) {
  DictData dict;
  for (const auto& [key_expr, value_expr] : expr.entries) {
    KILN_ASSIGN_OR_RETURN(Value key, Eval(*key_expr, scope));
    KILN_ASSIGN_OR_RETURN(Value value, Eval(*value_expr, scope));
    KILN_RETURN_IF_ERROR(ErrorAt(key_expr->pos, dict.Set(std::move(key), std::move(value))));
  }
  return At(expr.pos, MakeDict(std::move(dict)));
}

Expected<Value> Interpreter::EvalGetItem(const GetItemExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value object, Eval(*expr.object, scope));
  if (expr.key->kind == ExprKind::kSlice) {
    const auto& slice = static_cast<const SliceExpr&>(*expr.key);
    Value bounds[3] = {Value::None(), Value::None(), Value::None()};
    const ExprPtr* parts[3] = {&slice.start, &slice.stop, &slice.step};
    for (int i = 0; i < 3; ++i) {
      if (*parts[i]) {
        KILN_ASSIGN_OR_RETURN(bounds[i], Eval(**parts[i], scope));
      }
    }
    return At(expr.pos, GetSlice(rt_, object, bounds[0], bounds[1], bounds[2]));
  }
  KILN_ASSIGN_OR_RETURN(Value key, Eval(*expr.key, scope));
  return At(expr.pos, GetItem(rt_, object, key));
}

Expected<CallArgs> Interpreter::EvalArgs(const CallArgsExpr& args, const ScopePtr& scope) {
  CallArgs out;
  for (const ExprPtr& arg : args.positional) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*arg, scope));
    out.positional.push_back(std::move(v));
  }
  if (args.star_args) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*args.star_args, scope));
    KILN_ASSIGN_OR_RETURN(std::vector<Value> items, At(args.star_args->pos, IterItems(rt_, v)));
    for (Value& item : items) out.positional.push_back(std::move(item));
  }
  for (const auto& [name, arg] : args.keyword) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*arg, scope));
    out.keyword.emplace_back(name, std::move(v));
  }
  if (args.star_kwargs) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*args.star_kwargs, scope));
    if (!v.is_dict()) {
      return ErrorAt(args.star_kwargs->pos,
                     InvalidArgument("argument after ** must be a mapping, not {}", TypeName(v)));
    }
    for (const auto& [key, value] : v.as_dict().entries()) {
      if (!key.is_string()) {
        return ErrorAt(args.star_kwargs->pos, InvalidArgument("keywords must be strings"));
      }
      out.keyword.emplace_back(key.as_string(), value);
    }
  }
  return out;
}

Expected<Value> Interpreter::EvalCall(const CallExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value callee, Eval(*expr.callee, scope));
  KILN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr.args, scope));
  return At(expr.pos, Call(callee, args));
}

Expected<Value> Interpreter::EvalFilter(const FilterExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value input, Eval(*expr.input, scope));
  KILN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr.args, scope));
  return At(expr.pos, expr.fn(rt_, input, args));
}

Expected<Value> Interpreter::EvalTest(const TestExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value input, Eval(*expr.input, scope));
  KILN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr.args, scope));
  KILN_ASSIGN_OR_RETURN(bool passed, At(expr.pos, expr.fn(rt_, input, args)));
  return Value::Bool(passed);
}

Expected<Value> Interpreter::EvalBinary(const BinaryExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value left, Eval(*expr.left, scope));
  if (expr.kind == ExprKind::kAnd) {
    if (!Truthy(left)) return left;
    return Eval(*expr.right, scope);
  }
  if (expr.kind == ExprKind::kOr) {
    if (Truthy(left)) return left;
    return Eval(*expr.right, scope);
  }
  KILN_ASSIGN_OR_RETURN(Value right, Eval(*expr.right, scope));
  return At(expr.pos, ApplyBinary(rt_, expr.op, left, right));
}

Expected<Value> Interpreter::EvalCompare(const CompareExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value left, Eval(*expr.first, scope));
  for (const auto& [op, operand] : expr.rest) {
    KILN_ASSIGN_OR_RETURN(Value right, Eval(*operand, scope));
    KILN_ASSIGN_OR_RETURN(bool holds, At(operand->pos, Compare(rt_, op, left, right)));
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Expected<Value> Interpreter::EvalConcat(const ConcatExpr& expr, const ScopePtr& scope) {
  std::string out;
  for (const ExprPtr& part : expr.parts) {
    KILN_ASSIGN_OR_RETURN(Value v, Eval(*part, scope));
    KILN_RETURN_IF_ERROR(ErrorAt(part->pos, AppendStr(rt_, v, &out)));
  }
  return Value::String(std::move(out));
}

Expected<Value> Interpreter::EvalConditional(const ConditionalExpr& expr, const ScopePtr& scope) {
  KILN_ASSIGN_OR_RETURN(Value condition, Eval(*expr.condition, scope));
  if (Truthy(condition)) return Eval(*expr.then_value, scope);
  if (expr.else_value) return Eval(*expr.else_value, scope);
  return Value::Undefined(
      fmt::format("the inline if-expression on line {} evaluated to false and no else section was defined.",
                  expr.pos.line));
}

}  // namespace kiln::jinja
