// The syntax tree of a parsed template: expressions and statements, each
// with the position it came from for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/value.h"

namespace kiln::jinja {

// A filter or test implementation, looked up by name when parsing.
using FilterFn = Expected<Value> (*)(Runtime& rt, const Value& input, const CallArgs& args);
using TestFn = Expected<bool> (*)(Runtime& rt, const Value& input, const CallArgs& args);

enum class ExprKind {
  kLiteral,
  kName,
  kList,
  kTuple,
  kDict,
  kGetAttr,
  kGetItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNot,
  kNegate,
  kPlus,
  kBinary,
  kAnd,
  kOr,
  kCompare,
  kConcat,
  kConditional,
};

struct Expr {
  Expr(ExprKind kind, SourcePos pos) : kind(kind), pos(pos) {}
  virtual ~Expr() = default;
  ExprKind kind;
  SourcePos pos;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
  LiteralExpr(SourcePos pos, Value value) : Expr(ExprKind::kLiteral, pos), value(std::move(value)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(SourcePos pos, std::string name) : Expr(ExprKind::kName, pos), name(std::move(name)) {}
  std::string name;
};

// A list or tuple display.
struct SequenceExpr : Expr {
  using Expr::Expr;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(SourcePos pos) : Expr(ExprKind::kDict, pos) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

// obj.name
struct GetAttrExpr : Expr {
  GetAttrExpr(SourcePos pos, ExprPtr object, std::string name)
      : Expr(ExprKind::kGetAttr, pos), object(std::move(object)), name(std::move(name)) {}
  ExprPtr object;
  std::string name;
};

// obj[key]; key may be a SliceExpr.
struct GetItemExpr : Expr {
  GetItemExpr(SourcePos pos, ExprPtr object, ExprPtr key)
      : Expr(ExprKind::kGetItem, pos), object(std::move(object)), key(std::move(key)) {}
  ExprPtr object;
  ExprPtr key;
};

// start:stop:step inside a subscript; each part may be absent.
struct SliceExpr : Expr {
  explicit SliceExpr(SourcePos pos) : Expr(ExprKind::kSlice, pos) {}
  ExprPtr start, stop, step;
};

// The arguments written in a call, filter or test.
struct CallArgsExpr {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct CallExpr : Expr {
  CallExpr(SourcePos pos, ExprPtr callee) : Expr(ExprKind::kCall, pos), callee(std::move(callee)) {}
  ExprPtr callee;
  CallArgsExpr args;
};

// input | name(args)
struct FilterExpr : Expr {
  FilterExpr(SourcePos pos, ExprPtr input, std::string name, FilterFn fn)
      : Expr(ExprKind::kFilter, pos), input(std::move(input)), name(std::move(name)), fn(fn) {}
  ExprPtr input;  // null inside {% filter %} and {% set x | f %}, which filter a body
  std::string name;
  FilterFn fn;
  CallArgsExpr args;
};

// input is [not] name(args)
struct TestExpr : Expr {
  TestExpr(SourcePos pos, ExprPtr input, std::string name, TestFn fn)
      : Expr(ExprKind::kTest, pos), input(std::move(input)), name(std::move(name)), fn(fn) {}
  ExprPtr input;
  std::string name;
  TestFn fn;
  CallArgsExpr args;
};

// not x, -x, +x
struct UnaryExpr : Expr {
  UnaryExpr(ExprKind kind, SourcePos pos, ExprPtr operand) : Expr(kind, pos), operand(std::move(operand)) {}
  ExprPtr operand;
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };

// Arithmetic, and `and`/`or` (kind kAnd/kOr, op unused).
struct BinaryExpr : Expr {
  BinaryExpr(ExprKind kind, SourcePos pos, BinaryOp op, ExprPtr left, ExprPtr right)
      : Expr(kind, pos), op(op), left(std::move(left)), right(std::move(right)) {}
  BinaryOp op;
  ExprPtr left, right;
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

// a < b <= c: each operator applies to its neighbours, all must hold.
struct CompareExpr : Expr {
  CompareExpr(SourcePos pos, ExprPtr first) : Expr(ExprKind::kCompare, pos), first(std::move(first)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

// a ~ b ~ c: the parts' str() joined.
struct ConcatExpr : Expr {
  explicit ConcatExpr(SourcePos pos) : Expr(ExprKind::kConcat, pos) {}
  std::vector<ExprPtr> parts;
};

// then_value if condition else else_value; without else, undefined.
struct ConditionalExpr : Expr {
  explicit ConditionalExpr(SourcePos pos) : Expr(ExprKind::kConditional, pos) {}
  ExprPtr condition, then_value, else_value;
};

// Where `set`, `for` and `with` store values: a name, a namespace
// attribute (ns.attr), or a tuple of targets to unpack into.
struct AssignTarget {
  enum class Kind { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  SourcePos pos;
  std::string name;                 // kName; the namespace variable for kNamespaceAttr
  std::string attr;                 // kNamespaceAttr
  std::vector<AssignTarget> items;  // kTuple
};

enum class StmtKind {
  kText,
  kPrint,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
};

struct Stmt {
  Stmt(StmtKind kind, SourcePos pos) : kind(kind), pos(pos) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  SourcePos pos;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(SourcePos pos, std::string text) : Stmt(StmtKind::kText, pos), text(std::move(text)) {}
  std::string text;
};

// {{ expr }}
struct PrintStmt : Stmt {
  PrintStmt(SourcePos pos, ExprPtr expr) : Stmt(StmtKind::kPrint, pos), expr(std::move(expr)) {}
  ExprPtr expr;
};

// if / elif... / else
struct IfStmt : Stmt {
  explicit IfStmt(SourcePos pos) : Stmt(StmtKind::kIf, pos) {}
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(SourcePos pos) : Stmt(StmtKind::kFor, pos) {}
  AssignTarget target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  bool recursive = false;
  Body body;
  Body else_body;  // runs when no item passed the filter
};

// {% set target = value %}
struct SetStmt : Stmt {
  explicit SetStmt(SourcePos pos) : Stmt(StmtKind::kSet, pos) {}
  AssignTarget target;
  ExprPtr value;
};

// {% set target | filters %}body{% endset %}
struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(SourcePos pos) : Stmt(StmtKind::kSetBlock, pos) {}
  AssignTarget target;
  std::vector<std::unique_ptr<FilterExpr>> filters;  // applied in order, inputs unset
  Body body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

// A macro's signature and body; also the body of a call block, which the
// called macro sees as caller(...).
struct MacroDef {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  // Whether the body mentions these names, which decides (as in jinja2)
  // whether extra arguments are collected or refused.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

// {% macro name(params) %}body{% endmacro %}
struct MacroStmt : Stmt {
  explicit MacroStmt(SourcePos pos) : Stmt(StmtKind::kMacro, pos) {}
  MacroDef def;
};

// {% call(params) callee(args) %}body{% endcall %}: calls `call` with the
// body available to it as caller(...).
struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(SourcePos pos) : Stmt(StmtKind::kCallBlock, pos) {}
  MacroDef caller;
  std::unique_ptr<CallExpr> call;
};

// {% filter f | g %}body{% endfilter %}
struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(SourcePos pos) : Stmt(StmtKind::kFilterBlock, pos) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

// {% with a = 1, b = 2 %}body{% endwith %}
struct WithStmt : Stmt {
  explicit WithStmt(SourcePos pos) : Stmt(StmtKind::kWith, pos) {}
  std::vector<std::pair<AssignTarget, ExprPtr>> assignments;
  Body body;
};

// {% break %} and {% continue %} (kind tells which).
struct LoopControlStmt : Stmt {
  using Stmt::Stmt;
};

struct Template {
  Body body;
};

}  // namespace kiln::jinja
