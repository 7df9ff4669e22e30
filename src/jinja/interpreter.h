// Renders a parsed template: runs its statements and evaluates its
// expressions with jinja2's semantics (scoping, loops, macros, undefined
// values), inside the limits of a Runtime.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/runtime.h"
#include "jinja/scope.h"

namespace kiln::jinja {

class Interpreter {
 public:
  // REQUIRES: `rt` outlives the interpreter.
  explicit Interpreter(Runtime& rt) : rt_(rt) {}
  // Clears the scopes macros closed over, breaking the cycles between a
  // scope and the macros defined in it.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `tmpl` with `globals` (functions and context variables) as the
  // outermost scope. Errors carry the template line and column.
  Expected<std::string> Render(const Template& tmpl, std::shared_ptr<Scope> globals);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using ScopePtr = std::shared_ptr<Scope>;

  // Statements.
  Expected<Flow> ExecBody(const Body& body, const ScopePtr& scope);
  Expected<Flow> ExecStmt(const Stmt& stmt, const ScopePtr& scope);
  Expected<Flow> ExecIf(const IfStmt& stmt, const ScopePtr& scope);
  Expected<Flow> ExecFor(const ForStmt& stmt, const ScopePtr& scope);
  Expected<Flow> RunLoop(const ForStmt& stmt, const Value& iterable, const ScopePtr& scope, int depth0);
  Status ExecSetBlock(const SetBlockStmt& stmt, const ScopePtr& scope);
  Status ExecFilterBlock(const FilterBlockStmt& stmt, const ScopePtr& scope);
  Status ExecCallBlock(const CallBlockStmt& stmt, const ScopePtr& scope);
  Expected<Flow> ExecWith(const WithStmt& stmt, const ScopePtr& scope);
  Status Assign(const AssignTarget& target, const Value& value, Scope& scope);

  // Runs `body` in `scope` with its output captured instead of written.
  Expected<std::string> Capture(const Body& body, const ScopePtr& scope);
  // Applies block filters ({% filter %}, {% set x | f %}) to `value`.
  Expected<Value> ApplyFilters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value value,
                               const ScopePtr& scope);
  // Appends to the current output, within the limits.
  Status Write(std::string_view text);

  // Macros and calls.
  Value MakeMacro(const MacroDef& def, const ScopePtr& closure);
  Expected<Value> CallMacro(const MacroDef& def, const ScopePtr& closure, const CallArgs& args);
  Value MakeLoopCall(const ForStmt& stmt, const ScopePtr& scope, int depth0);
  Expected<Value> Call(const Value& callee, const CallArgs& args);

  // Expressions.
  Expected<Value> Eval(const Expr& expr, const ScopePtr& scope);
  Expected<Value> EvalName(const NameExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalSequence(const SequenceExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalDict(const DictExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalGetItem(const GetItemExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalCall(const CallExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalFilter(const FilterExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalTest(const TestExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalBinary(const BinaryExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalCompare(const CompareExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalConcat(const ConcatExpr& expr, const ScopePtr& scope);
  Expected<Value> EvalConditional(const ConditionalExpr& expr, const ScopePtr& scope);
  Expected<CallArgs> EvalArgs(const CallArgsExpr& args, const ScopePtr& scope);

  // Counts one level of evaluation nesting; fails when too deep.
  Status Enter();

  Runtime& rt_;
  std::string* out_ = nullptr;
  int depth_ = 0;
  std::vector<std::weak_ptr<Scope>> captured_scopes_;
};

}  // namespace kiln::jinja
