// The template parser (see parser.h): a recursive-descent reading of
// jinja2's grammar, one method per rule.
#include "jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "jinja/filters.h"
#include "jinja/predicates.h"

namespace kiln::jinja {
namespace {

// Tags jinja2 knows but chat templates have no use for.
bool IsUnsupportedTag(std::string_view name) {
  for (std::string_view tag : {"block", "extends", "include", "import", "from", "autoescape"}) {
    if (name == tag) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Expected<std::unique_ptr<Template>> Run() {
    auto tmpl = std::make_unique<Template>();
    KILN_ASSIGN_OR_RETURN(tmpl->body, Subparse({}));
    return tmpl;
  }

 private:
  // Tuple parsing modes (jinja2's parse_tuple arguments).
  enum class TupleItems { kPrimary, kNoCondition, kFull };

  // Restores the nesting depth when a rule returns.
  class DepthScope {
   public:
    explicit DepthScope(int* depth) : depth_(depth), saved_(*depth) {}
    ~DepthScope() { *depth_ = saved_; }

   private:
    int* depth_;
    int saved_;
  };

  // An open block and the end tags that close it, for error messages.
  struct OpenBlock {
    std::string tag;
    SourcePos pos;
    std::vector<std::string_view> end_tags;
  };

  // ---- token helpers ----

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const { return Cur().kind == TokenKind::kOperator && Cur().text == op; }
  bool IsName(std::string_view name) const { return Cur().kind == TokenKind::kName && Cur().text == name; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }

  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kData: return "template data / text";
      case TokenKind::kVariableBegin: return "begin of print statement";
      case TokenKind::kVariableEnd: return "end of print statement";
      case TokenKind::kBlockBegin: return "begin of statement block";
      case TokenKind::kBlockEnd: return "end of statement block";
      case TokenKind::kName: return t.text;
      case TokenKind::kString: return "string";
      case TokenKind::kInteger: return "integer";
      case TokenKind::kFloat: return "float";
      case TokenKind::kOperator: return t.text;
      case TokenKind::kEof: return "end of template";
    }
    return "token";
  }

  Status Fail(SourcePos pos, const std::string& message) const {
    return ErrorAt(pos, InvalidArgument("{}", message));
  }
  Status Fail(const std::string& message) const { return Fail(Cur().pos, message); }

  Status Unexpected(std::string_view expected) const {
    if (Cur().kind == TokenKind::kEof) return EndOfTemplate(expected);
    return Fail(fmt::format("expected {}, got '{}'", expected, Describe(Cur())));
  }

  Status EndOfTemplate(std::string_view expected) const {
    std::string message = fmt::format("unexpected end of template, expected {}", expected);
    if (!open_blocks_.empty()) {
      const OpenBlock& block = open_blocks_.back();
      message += fmt::format(" (the '{}' block at {}:{} is not closed)", block.tag, block.pos.line,
                             block.pos.column);
    }
    return Fail(message);
  }

  Status ExpectOp(std::string_view op) {
    if (!SkipOp(op)) return Unexpected(fmt::format("'{}'", op));
    return Status::Ok();
  }
  Status Expect(TokenKind kind, std::string_view what) {
    if (Cur().kind != kind) return Unexpected(what);
    Advance();
    return Status::Ok();
  }
  Expected<std::string> ExpectName() {
    if (Cur().kind != TokenKind::kName) return Unexpected("a name");
    std::string name = Cur().text;
    Advance();
    return name;
  }

  // Counts one level of nesting; fails past kMaxNesting.
  Status Descend() {
    if (++depth_ > kMaxNesting) {
      return Fail(fmt::format("template nested more than {} levels deep", kMaxNesting));
    }
    return Status::Ok();
  }

  // ---- statements ----

  // Parses statements and text until a block tag whose name is one of
  // `end_tags` (left as the current token) or the end of the template.
  Expected<Body> Subparse(std::vector<std::string_view> end_tags) {
    Body body;
    while (Cur().kind != TokenKind::kEof) {
      const Token& token = Cur();
      if (token.kind == TokenKind::kData) {
        body.push_back(std::make_unique<TextStmt>(token.pos, token.text));
        Advance();
      } else if (token.kind == TokenKind::kVariableBegin) {
        SourcePos pos = token.pos;
        Advance();
        KILN_ASSIGN_OR_RETURN(ExprPtr expr, ParseTuple(TupleItems::kFull, {}, false));
        KILN_RETURN_IF_ERROR(Expect(TokenKind::kVariableEnd, "end of print statement"));
        body.push_back(std::make_unique<PrintStmt>(pos, std::move(expr)));
      } else if (token.kind == TokenKind::kBlockBegin) {
        Advance();
        if (Cur().kind == TokenKind::kName) {
          for (std::string_view end : end_tags) {
            if (Cur().text == end) return body;
          }
        }
        KILN_RETURN_IF_ERROR(ParseStatement(&body));
        KILN_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
      } else {
        return Fail(fmt::format("unexpected '{}'", Describe(token)));
      }
    }
    return body;
  }

  // jinja2's parse_statements: the rest of the opening tag, then the body
  // up to one of `end_tags`. With `drop_end`, the end tag's name is consumed.
  Expected<Body> ParseBody(const std::string& tag, SourcePos tag_pos, std::vector<std::string_view> end_tags,
                           bool drop_end) {
    SkipOp(":");
    KILN_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
    open_blocks_.push_back({tag, tag_pos, end_tags});
    KILN_ASSIGN_OR_RETURN(Body body, Subparse(end_tags));
    if (Cur().kind == TokenKind::kEof) {
      std::string expected;
      for (size_t i = 0; i < end_tags.size(); ++i) {
        expected += fmt::format("{}'{}'", i == 0 ? "" : " or ", end_tags[i]);
      }
      return EndOfTemplate(expected);
    }
    open_blocks_.pop_back();
    if (drop_end) Advance();
    return body;
  }

  Status ParseStatement(Body* out) {
    DepthScope scope(&depth_);
    KILN_RETURN_IF_ERROR(Descend());
    const Token& token = Cur();
    if (token.kind != TokenKind::kName) return Fail("tag name expected");
    SourcePos pos = token.pos;
    std::string tag = token.text;
    if (tag == "if") return ParseIf(out);
    if (tag == "for") return ParseFor(out);
    if (tag == "set") return ParseSet(out);
    if (tag == "macro") return ParseMacro(out);
    if (tag == "call") return ParseCallBlock(out);
    if (tag == "filter") return ParseFilterBlock(out);
    if (tag == "with") return ParseWith(out);
    if (tag == "print") return ParsePrint(out);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Fail(fmt::format("'{}' outside of a loop", tag));
      Advance();
      out->push_back(
          std::make_unique<LoopControlStmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, pos));
      return Status::Ok();
    }
    if (IsUnsupportedTag(tag)) {
      return Fail(fmt::format("the '{}' tag is not supported in chat templates", tag));
    }
    std::string message = fmt::format("unknown tag '{}'", tag);
    if (!open_blocks_.empty()) {
      const OpenBlock& block = open_blocks_.back();
      std::string expected;
      for (size_t i = 0; i < block.end_tags.size(); ++i) {
        expected += fmt::format("{}'{}'", i == 0 ? "" : " or ", block.end_tags[i]);
      }
      message += fmt::format("; the '{}' block at {}:{} expects {}", block.tag, block.pos.line,
                             block.pos.column, expected);
    }
    return Fail(message);
  }

  Status ParseIf(Body* out) {
    auto stmt = std::make_unique<IfStmt>(Cur().pos);
    Advance();
    while (true) {
      KILN_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(TupleItems::kNoCondition, {}, false));
      KILN_ASSIGN_OR_RETURN(Body body, ParseBody("if", stmt->pos, {"elif", "else", "endif"}, false));
      stmt->branches.emplace_back(std::move(test), std::move(body));
      std::string end = Cur().text;
      Advance();
      if (end == "elif") continue;
      if (end == "else") {
        KILN_ASSIGN_OR_RETURN(stmt->else_body, ParseBody("if", stmt->pos, {"endif"}, true));
      }
      break;
    }
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseFor(Body* out) {
    auto stmt = std::make_unique<ForStmt>(Cur().pos);
    Advance();
    KILN_ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(/*with_namespace=*/false, {"in"}));
    if (!SkipName("in")) return Unexpected("'in'");
    KILN_ASSIGN_OR_RETURN(stmt->iterable, ParseTuple(TupleItems::kNoCondition, {"recursive"}, false));
    if (SkipName("if")) {
      KILN_ASSIGN_OR_RETURN(stmt->filter, ParseExpression(true));
    }
    stmt->recursive = SkipName("recursive");
    ++loop_depth_;
    auto body = ParseBody("for", stmt->pos, {"endfor", "else"}, false);
    --loop_depth_;
    if (!body.ok()) return body.status();
    stmt->body = std::move(*body);
    std::string end = Cur().text;
    Advance();
    if (end == "else") {
      KILN_ASSIGN_OR_RETURN(stmt->else_body, ParseBody("for", stmt->pos, {"endfor"}, true));
    }
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseSet(Body* out) {
    SourcePos pos = Cur().pos;
    Advance();
    KILN_ASSIGN_OR_RETURN(AssignTarget target, ParseAssignTarget(/*with_namespace=*/true, {}));
    if (SkipOp("=")) {
      auto stmt = std::make_unique<SetStmt>(pos);
      stmt->target = std::move(target);
      KILN_ASSIGN_OR_RETURN(stmt->value, ParseTuple(TupleItems::kFull, {}, false));
      out->push_back(std::move(stmt));
      return Status::Ok();
    }
    auto stmt = std::make_unique<SetBlockStmt>(pos);
    stmt->target = std::move(target);
    if (IsOp("|")) {
      KILN_ASSIGN_OR_RETURN(stmt->filters, ParseFilterChain(false));
    }
    KILN_ASSIGN_OR_RETURN(stmt->body, ParseBody("set", pos, {"endset"}, true));
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Expected<std::vector<MacroParam>> ParseSignature() {
    std::vector<MacroParam> params;
    KILN_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!params.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      MacroParam param;
      KILN_ASSIGN_OR_RETURN(param.name, ExpectName());
      if (SkipOp("=")) {
        KILN_ASSIGN_OR_RETURN(param.default_value, ParseExpression(true));
      } else if (!params.empty() && params.back().default_value) {
        return Fail("non-default argument follows default argument");
      }
      params.push_back(std::move(param));
    }
    Advance();
    return params;
  }

  // Parses a macro's (or call block's) body into `def`, noting the special
  // names it mentions.
  Status ParseMacroBody(MacroDef* def, const std::string& tag, SourcePos pos, std::string_view end_tag) {
    int saved_loops = loop_depth_;
    loop_depth_ = 0;  // a macro body cannot break its caller's loop
    macros_.push_back(def);
    auto body = ParseBody(tag, pos, {end_tag}, true);
    macros_.pop_back();
    loop_depth_ = saved_loops;
    if (!body.ok()) return body.status();
    def->body = std::move(*body);
    return Status::Ok();
  }

  Status ParseMacro(Body* out) {
    auto stmt = std::make_unique<MacroStmt>(Cur().pos);
    Advance();
    KILN_ASSIGN_OR_RETURN(stmt->def.name, ExpectName());
    KILN_ASSIGN_OR_RETURN(stmt->def.params, ParseSignature());
    KILN_RETURN_IF_ERROR(ParseMacroBody(&stmt->def, "macro", stmt->pos, "endmacro"));
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseCallBlock(Body* out) {
    auto stmt = std::make_unique<CallBlockStmt>(Cur().pos);
    Advance();
    stmt->caller.name = "caller";
    if (IsOp("(")) {
      KILN_ASSIGN_OR_RETURN(stmt->caller.params, ParseSignature());
    }
    SourcePos call_pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr call, ParseExpression(true));
    if (call->kind != ExprKind::kCall) return Fail(call_pos, "expected call");
    stmt->call.reset(static_cast<CallExpr*>(call.release()));
    KILN_RETURN_IF_ERROR(ParseMacroBody(&stmt->caller, "call", stmt->pos, "endcall"));
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseFilterBlock(Body* out) {
    auto stmt = std::make_unique<FilterBlockStmt>(Cur().pos);
    Advance();
    KILN_ASSIGN_OR_RETURN(stmt->filters, ParseFilterChain(true));
    KILN_ASSIGN_OR_RETURN(stmt->body, ParseBody("filter", stmt->pos, {"endfilter"}, true));
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseWith(Body* out) {
    auto stmt = std::make_unique<WithStmt>(Cur().pos);
    Advance();
    while (Cur().kind != TokenKind::kBlockEnd) {
      if (!stmt->assignments.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      KILN_ASSIGN_OR_RETURN(AssignTarget target, ParseAssignTarget(false, {}));
      KILN_RETURN_IF_ERROR(ExpectOp("="));
      KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      stmt->assignments.emplace_back(std::move(target), std::move(value));
    }
    KILN_ASSIGN_OR_RETURN(stmt->body, ParseBody("with", stmt->pos, {"endwith"}, true));
    out->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParsePrint(Body* out) {
    Advance();
    bool first = true;
    while (Cur().kind != TokenKind::kBlockEnd) {
      if (!first) KILN_RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      SourcePos pos = Cur().pos;
      KILN_ASSIGN_OR_RETURN(ExprPtr expr, ParseExpression(true));
      out->push_back(std::make_unique<PrintStmt>(pos, std::move(expr)));
    }
    return Status::Ok();
  }

  // jinja2's parse_assign_target: `ns.attr` (for set), or names and tuples
  // of names.
  Expected<AssignTarget> ParseAssignTarget(bool with_namespace, std::vector<std::string_view> extra_end) {
    if (with_namespace && Cur().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator &&
        Peek().text == ".") {
      AssignTarget target;
      target.kind = AssignTarget::Kind::kNamespaceAttr;
      target.pos = Cur().pos;
      target.name = Cur().text;
      Advance();
      Advance();
      KILN_ASSIGN_OR_RETURN(target.attr, ExpectName());
      return target;
    }
    KILN_ASSIGN_OR_RETURN(ExprPtr expr, ParseTuple(TupleItems::kPrimary, std::move(extra_end), false));
    return ToTarget(*expr);
  }

  Expected<AssignTarget> ToTarget(const Expr& expr) {
    AssignTarget target;
    target.pos = expr.pos;
    if (expr.kind == ExprKind::kName) {
      target.name = static_cast<const NameExpr&>(expr).name;
      return target;
    }
    if (expr.kind == ExprKind::kTuple) {
      target.kind = AssignTarget::Kind::kTuple;
      for (const ExprPtr& item : static_cast<const SequenceExpr&>(expr).items) {
        KILN_ASSIGN_OR_RETURN(AssignTarget inner, ToTarget(*item));
        target.items.push_back(std::move(inner));
      }
      return target;
    }
    return Fail(expr.pos, "can't assign to this expression");
  }

  // ---- expressions ----

  Expected<ExprPtr> ParseExpression(bool with_condition) {
    return with_condition ? ParseCondition() : ParseOr();
  }

  bool IsTupleEnd(const std::vector<std::string_view>& extra_end) const {
    const Token& t = Cur();
    if (t.kind == TokenKind::kVariableEnd || t.kind == TokenKind::kBlockEnd || (IsOp(")"))) return true;
    if (t.kind == TokenKind::kName) {
      for (std::string_view name : extra_end) {
        if (t.text == name) return true;
      }
    }
    return false;
  }

  // jinja2's parse_tuple: one expression, or several separated by commas
  // (a tuple).
  Expected<ExprPtr> ParseTuple(TupleItems items, std::vector<std::string_view> extra_end,
                               bool explicit_parens) {
    SourcePos pos = Cur().pos;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra_end)) break;
      Expected<ExprPtr> item = items == TupleItems::kPrimary ? ParsePrimary()
                               : items == TupleItems::kFull  ? ParseExpression(true)
                                                             : ParseExpression(false);
      if (!item.ok()) return item.status();
      args.push_back(std::move(*item));
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) return Fail(fmt::format("expected an expression, got '{}'", Describe(Cur())));
    }
    auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, pos);
    tuple->items = std::move(args);
    return ExprPtr(std::move(tuple));
  }

  Expected<ExprPtr> ParseCondition() {
    DepthScope scope(&depth_);
    KILN_RETURN_IF_ERROR(Descend());
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (SkipName("if")) {
      KILN_RETURN_IF_ERROR(Descend());
      auto cond = std::make_unique<ConditionalExpr>(pos);
      cond->then_value = std::move(expr);
      KILN_ASSIGN_OR_RETURN(cond->condition, ParseOr());
      if (SkipName("else")) {
        KILN_ASSIGN_OR_RETURN(cond->else_value, ParseCondition());
      }
      expr = std::move(cond);
      pos = Cur().pos;
    }
    return expr;
  }

  Expected<ExprPtr> ParseOr() {
    DepthScope scope(&depth_);
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (SkipName("or")) {
      KILN_RETURN_IF_ERROR(Descend());
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left =
          std::make_unique<BinaryExpr>(ExprKind::kOr, pos, BinaryOp::kAdd, std::move(left), std::move(right));
      pos = Cur().pos;
    }
    return left;
  }

  Expected<ExprPtr> ParseAnd() {
    DepthScope scope(&depth_);
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (SkipName("and")) {
      KILN_RETURN_IF_ERROR(Descend());
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = std::make_unique<BinaryExpr>(ExprKind::kAnd, pos, BinaryOp::kAdd, std::move(left),
                                          std::move(right));
      pos = Cur().pos;
    }
    return left;
  }

  Expected<ExprPtr> ParseNot() {
    if (IsName("not")) {
      SourcePos pos = Cur().pos;
      Advance();
      DepthScope scope(&depth_);
      KILN_RETURN_IF_ERROR(Descend());
      KILN_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      return ExprPtr(std::make_unique<UnaryExpr>(ExprKind::kNot, pos, std::move(operand)));
    }
    return ParseCompare();
  }

  Expected<ExprPtr> ParseCompare() {
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    std::unique_ptr<CompareExpr> compare;
    while (true) {
      std::optional<CompareOp> op;
      if (Cur().kind == TokenKind::kOperator) {
        const std::string& t = Cur().text;
        if (t == "==") {
          op = CompareOp::kEq;
        } else if (t == "!=") {
          op = CompareOp::kNe;
        } else if (t == "<") {
          op = CompareOp::kLt;
        } else if (t == "<=") {
          op = CompareOp::kLe;
        } else if (t == ">") {
          op = CompareOp::kGt;
        } else if (t == ">=") {
          op = CompareOp::kGe;
        }
        if (op) Advance();
      } else if (IsName("in")) {
        op = CompareOp::kIn;
        Advance();
      } else if (IsName("not") && Peek().kind == TokenKind::kName && Peek().text == "in") {
        op = CompareOp::kNotIn;
        Advance();
        Advance();
      }
      if (!op) break;
      KILN_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      if (!compare) compare = std::make_unique<CompareExpr>(pos, std::move(first));
      compare->rest.emplace_back(*op, std::move(operand));
    }
    if (!compare) return first;
    return ExprPtr(std::move(compare));
  }

  // Left-associative binary operators: `next` parses the operands.
  template <typename Next>
  Expected<ExprPtr> ParseBinaryChain(Next next,
                                     std::initializer_list<std::pair<std::string_view, BinaryOp>> ops) {
    DepthScope scope(&depth_);
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr left, next());
    while (Cur().kind == TokenKind::kOperator) {
      std::optional<BinaryOp> op;
      for (const auto& [spelling, value] : ops) {
        if (Cur().text == spelling) op = value;
      }
      if (!op) break;
      Advance();
      KILN_RETURN_IF_ERROR(Descend());
      KILN_ASSIGN_OR_RETURN(ExprPtr right, next());
      left = std::make_unique<BinaryExpr>(ExprKind::kBinary, pos, *op, std::move(left), std::move(right));
      pos = Cur().pos;
    }
    return left;
  }

  Expected<ExprPtr> ParseMath1() {
    return ParseBinaryChain([this] { return ParseConcat(); }, {{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}});
  }

  Expected<ExprPtr> ParseConcat() {
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
    if (!IsOp("~")) return first;
    auto concat = std::make_unique<ConcatExpr>(pos);
    concat->parts.push_back(std::move(first));
    while (SkipOp("~")) {
      KILN_ASSIGN_OR_RETURN(ExprPtr part, ParseMath2());
      concat->parts.push_back(std::move(part));
    }
    return ExprPtr(std::move(concat));
  }

  Expected<ExprPtr> ParseMath2() {
    return ParseBinaryChain(
        [this] { return ParsePow(); },
        {{"*", BinaryOp::kMul}, {"/", BinaryOp::kDiv}, {"//", BinaryOp::kFloorDiv}, {"%", BinaryOp::kMod}});
  }

  Expected<ExprPtr> ParsePow() {
    return ParseBinaryChain([this] { return ParseUnary(true); }, {{"**", BinaryOp::kPow}});
  }

  Expected<ExprPtr> ParseUnary(bool with_filter) {
    DepthScope scope(&depth_);
    KILN_RETURN_IF_ERROR(Descend());
    SourcePos pos = Cur().pos;
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      ExprKind kind = IsOp("-") ? ExprKind::kNegate : ExprKind::kPlus;
      Advance();
      KILN_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node = std::make_unique<UnaryExpr>(kind, pos, std::move(operand));
    } else {
      KILN_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    KILN_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      KILN_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Expected<ExprPtr> ParsePrimary() {
    const Token& token = Cur();
    SourcePos pos = token.pos;
    switch (token.kind) {
      case TokenKind::kName: {
        ExprPtr node;
        if (token.text == "true" || token.text == "True") {
          node = std::make_unique<LiteralExpr>(pos, Value::Bool(true));
        } else if (token.text == "false" || token.text == "False") {
          node = std::make_unique<LiteralExpr>(pos, Value::Bool(false));
        } else if (token.text == "none" || token.text == "None") {
          node = std::make_unique<LiteralExpr>(pos, Value::None());
        } else {
          node = std::make_unique<NameExpr>(pos, token.text);
          for (MacroDef* def : macros_) {
            def->uses_varargs |= token.text == "varargs";
            def->uses_kwargs |= token.text == "kwargs";
            def->uses_caller |= token.text == "caller";
          }
        }
        Advance();
        return node;
      }
      case TokenKind::kString: {
        std::string text;
        while (Cur().kind == TokenKind::kString) {
          text += Cur().text;
          Advance();
        }
        return ExprPtr(std::make_unique<LiteralExpr>(pos, Value::String(std::move(text))));
      }
      case TokenKind::kInteger: {
        Value v = Value::Int(token.int_value);
        Advance();
        return ExprPtr(std::make_unique<LiteralExpr>(pos, std::move(v)));
      }
      case TokenKind::kFloat: {
        Value v = Value::Float(token.float_value);
        Advance();
        return ExprPtr(std::make_unique<LiteralExpr>(pos, std::move(v)));
      }
      case TokenKind::kOperator:
        if (token.text == "(" || token.text == "[" || token.text == "{") {
          DepthScope scope(&depth_);
          KILN_RETURN_IF_ERROR(Descend());
          if (token.text == "(") {
            Advance();
            KILN_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(TupleItems::kFull, {}, true));
            KILN_RETURN_IF_ERROR(ExpectOp(")"));
            return inner;
          }
          return token.text == "[" ? ParseList() : ParseDict();
        }
        break;
      default: break;
    }
    if (token.kind == TokenKind::kEof) return EndOfTemplate("an expression");
    return Fail(fmt::format("unexpected '{}'", Describe(token)));
  }

  Expected<ExprPtr> ParseList() {
    auto list = std::make_unique<SequenceExpr>(ExprKind::kList, Cur().pos);
    Advance();
    while (!IsOp("]")) {
      if (!list->items.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      KILN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      list->items.push_back(std::move(item));
    }
    Advance();
    return ExprPtr(std::move(list));
  }

  Expected<ExprPtr> ParseDict() {
    auto dict = std::make_unique<DictExpr>(Cur().pos);
    Advance();
    while (!IsOp("}")) {
      if (!dict->entries.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      KILN_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
      KILN_RETURN_IF_ERROR(ExpectOp(":"));
      KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      dict->entries.emplace_back(std::move(key), std::move(value));
    }
    Advance();
    return ExprPtr(std::move(dict));
  }

  Expected<ExprPtr> ParsePostfix(ExprPtr node) {
    DepthScope scope(&depth_);
    while (IsOp(".") || IsOp("[") || IsOp("(")) {
      KILN_RETURN_IF_ERROR(Descend());
      if (IsOp("(")) {
        KILN_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        KILN_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      }
    }
    return node;
  }

  Expected<ExprPtr> ParseFilterExpr(ExprPtr node) {
    DepthScope scope(&depth_);
    while (true) {
      if (IsOp("|")) {
        KILN_RETURN_IF_ERROR(Descend());
        Advance();
        KILN_ASSIGN_OR_RETURN(auto filter, ParseFilterCall());
        filter->input = std::move(node);
        node = std::move(filter);
      } else if (IsName("is")) {
        KILN_RETURN_IF_ERROR(Descend());
        KILN_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        KILN_RETURN_IF_ERROR(Descend());
        KILN_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        break;
      }
    }
    return node;
  }

  Expected<ExprPtr> ParseSubscript(ExprPtr node) {
    SourcePos pos = Cur().pos;
    if (SkipOp(".")) {
      const Token& attr = Cur();
      if (attr.kind == TokenKind::kName) {
        std::string name = attr.text;
        Advance();
        return ExprPtr(std::make_unique<GetAttrExpr>(pos, std::move(node), std::move(name)));
      }
      if (attr.kind != TokenKind::kInteger) return Fail(attr.pos, "expected name or number");
      auto key = std::make_unique<LiteralExpr>(attr.pos, Value::Int(attr.int_value));
      Advance();
      return ExprPtr(std::make_unique<GetItemExpr>(pos, std::move(node), std::move(key)));
    }
    Advance();  // [
    std::vector<ExprPtr> args;
    while (!IsOp("]")) {
      if (!args.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      if (Cur().kind == TokenKind::kEof) return EndOfTemplate("']'");
      KILN_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
      args.push_back(std::move(arg));
    }
    Advance();
    ExprPtr key;
    if (args.size() == 1) {
      key = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, pos);
      tuple->items = std::move(args);
      key = std::move(tuple);
    }
    return ExprPtr(std::make_unique<GetItemExpr>(pos, std::move(node), std::move(key)));
  }

  // One subscript: an expression or a slice start:stop:step.
  Expected<ExprPtr> ParseSubscribed() {
    SourcePos pos = Cur().pos;
    ExprPtr start;
    if (!SkipOp(":")) {
      KILN_ASSIGN_OR_RETURN(start, ParseExpression(true));
      if (!SkipOp(":")) return start;
    }
    auto slice = std::make_unique<SliceExpr>(pos);
    slice->start = std::move(start);
    if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
      KILN_ASSIGN_OR_RETURN(slice->stop, ParseExpression(true));
    }
    if (SkipOp(":")) {
      if (!IsOp("]") && !IsOp(",")) {
        KILN_ASSIGN_OR_RETURN(slice->step, ParseExpression(true));
      }
    }
    return ExprPtr(std::move(slice));
  }

  Expected<CallArgsExpr> ParseCallArgs() {
    SourcePos pos = Cur().pos;
    KILN_RETURN_IF_ERROR(ExpectOp("("));
    CallArgsExpr args;
    bool require_comma = false;
    auto invalid = [&] { return Fail(pos, "invalid syntax for function call expression"); };
    while (!IsOp(")")) {
      if (require_comma) {
        KILN_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      if (Cur().kind == TokenKind::kEof) return EndOfTemplate("')'");
      if (SkipOp("*")) {
        if (args.star_args || args.star_kwargs) return invalid();
        KILN_ASSIGN_OR_RETURN(args.star_args, ParseExpression(true));
      } else if (SkipOp("**")) {
        if (args.star_kwargs) return invalid();
        KILN_ASSIGN_OR_RETURN(args.star_kwargs, ParseExpression(true));
      } else if (Cur().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator &&
                 Peek().text == "=") {
        if (args.star_kwargs) return invalid();
        std::string key = Cur().text;
        Advance();
        Advance();
        KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        args.keyword.emplace_back(std::move(key), std::move(value));
      } else {
        if (args.star_args || args.star_kwargs || !args.keyword.empty()) return invalid();
        KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        args.positional.push_back(std::move(value));
      }
      require_comma = true;
    }
    Advance();
    return args;
  }

  Expected<ExprPtr> ParseCall(ExprPtr callee) {
    SourcePos pos = callee->pos;
    auto call = std::make_unique<CallExpr>(pos, std::move(callee));
    KILN_ASSIGN_OR_RETURN(call->args, ParseCallArgs());
    return ExprPtr(std::move(call));
  }

  // A dotted name, as filters and tests are written.
  Expected<std::string> ParseDottedName() {
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (SkipOp(".")) {
      KILN_ASSIGN_OR_RETURN(std::string part, ExpectName());
      name += "." + part;
    }
    return name;
  }

  // `name` or `name(args)` after a pipe; the input is filled in by the caller.
  Expected<std::unique_ptr<FilterExpr>> ParseFilterCall() {
    SourcePos pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    FilterFn fn = FindFilter(name);
    if (!fn) return Fail(pos, fmt::format("no filter named '{}'", name));
    auto filter = std::make_unique<FilterExpr>(pos, nullptr, std::move(name), fn);
    if (IsOp("(")) {
      KILN_ASSIGN_OR_RETURN(filter->args, ParseCallArgs());
    }
    return filter;
  }

  // The filters of {% filter a|b %} (start_inline: no leading pipe) and
  // {% set x | a | b %}.
  Expected<std::vector<std::unique_ptr<FilterExpr>>> ParseFilterChain(bool start_inline) {
    DepthScope scope(&depth_);
    std::vector<std::unique_ptr<FilterExpr>> filters;
    while (start_inline || SkipOp("|")) {
      start_inline = false;
      KILN_RETURN_IF_ERROR(Descend());
      KILN_ASSIGN_OR_RETURN(auto filter, ParseFilterCall());
      filters.push_back(std::move(filter));
    }
    return filters;
  }

  Expected<ExprPtr> ParseTest(ExprPtr node) {
    SourcePos pos = Cur().pos;
    Advance();  // is
    bool negated = SkipName("not");
    SourcePos name_pos = Cur().pos;
    KILN_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    TestFn fn = FindTest(name);
    if (!fn) return Fail(name_pos, fmt::format("no test named '{}'", name));
    auto test = std::make_unique<TestExpr>(pos, std::move(node), std::move(name), fn);
    const Token& t = Cur();
    bool argument_follows =
        (t.kind == TokenKind::kName || t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
         t.kind == TokenKind::kFloat || IsOp("[") || IsOp("{")) &&
        !IsName("else") && !IsName("or") && !IsName("and");
    if (IsOp("(")) {
      KILN_ASSIGN_OR_RETURN(test->args, ParseCallArgs());
    } else if (argument_follows) {
      if (IsName("is")) return Fail("you cannot chain multiple tests with is");
      KILN_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      KILN_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      test->args.positional.push_back(std::move(arg));
    }
    if (negated) return ExprPtr(std::make_unique<UnaryExpr>(ExprKind::kNot, pos, std::move(test)));
    return ExprPtr(std::move(test));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<OpenBlock> open_blocks_;
  std::vector<MacroDef*> macros_;  // the macros being parsed, innermost last
};

}  // namespace

Expected<std::unique_ptr<Template>> Parse(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).Run();
}

}  // namespace kiln::jinja
