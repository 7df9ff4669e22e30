// The layout stage on hand-made graphs, with layout questions of the
// test's own (a node takes the layout when the test says so).
#include <gtest/gtest.h>

#include <set>

#include "compiler/tensor_layouts.h"

namespace kiln {
namespace tensor_layouts_tests {

Node Op(const char* op, const char* name, std::vector<ValueId> in, ValueId out) {
  Node n;
  n.op = OpKind::kTensorOp;
  n.op_type = op;
  n.name = name;
  n.opset = 13;
  n.inputs = std::move(in);
  n.outputs = {out};
  n.backend = "cpu";
  return n;
}

ValueId Act(Graph& g, const char* name, int64_t c = 16) {
  return g.AddTensorValue(name, TensorType{DType::kF32, {1, c, 4, 4}});
}

// Conv and Relu take nchw16c; convs want it.
LayoutQuestions Blocked() {
  LayoutQuestions ask;
  ask.wanted = [](const Graph&, const Node& n) {
    return n.op_type == "Conv" ? TensorLayout::kNCHW16c : TensorLayout::kRowMajor;
  };
  ask.takes = [](const Graph&, const Node& n, TensorLayout l) {
    return l == TensorLayout::kRowMajor || n.op_type == "Conv" || n.op_type == "Relu";
  };
  return ask;
}

std::string LayoutOf(const Node& n) {
  auto l = n.named_attrs.String("activation_layout");
  return l.ok() ? *l : "row-major";
}

const Node* Named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes()) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::vector<const Node*> Reorders(const Graph& g) {
  std::vector<const Node*> r;
  for (const Node& n : g.nodes()) {
    if (n.op_type == "kiln.Reorder") r.push_back(&n);
  }
  return r;
}

// x -> conv1 -> relu -> conv2 -> y (graph output); relu's output is also
// read by a Softmax, which takes only row-major.
struct Chain {
  Graph g;
  ValueId x, c1, r1, y, s;
};

Chain MakeChain() {
  Chain c;
  Graph& g = c.g;
  c.x = Act(g, "x");
  g.value(c.x).is_graph_input = true;
  g.value(c.x).io_slot = 0;
  const ValueId w =
      g.AddConstant("w", TensorData::FromValues(DType::kF32, {16, 16, 1, 1}, std::vector<float>(256, 0.5f)));
  c.c1 = Act(g, "c1");
  c.r1 = Act(g, "r1");
  c.y = Act(g, "y");
  c.s = Act(g, "s");
  g.AddNode(Op("Conv", "conv1", {c.x, w}, c.c1));
  g.AddNode(Op("Relu", "relu", {c.c1}, c.r1));
  g.AddNode(Op("Conv", "conv2", {c.r1, w}, c.y));
  g.AddNode(Op("Softmax", "softmax", {c.r1}, c.s));
  for (ValueId o : {c.y, c.s}) {
    g.value(o).is_output = true;
    g.value(o).io_slot = o == c.y ? 1 : 2;
  }
  return c;
}

TEST(TensorLayouts, AChainFromAConvIsBlockedWithReordersOnlyAtItsBorders) {
  Chain c = MakeChain();
  TensorLayoutDecisions d;
  ASSERT_TRUE(ChooseTensorLayouts(c.g, Blocked(), &d).ok());
  const Graph& g = c.g;
  EXPECT_EQ(LayoutOf(*Named(g, "conv1")), "nchw16c");
  EXPECT_EQ(LayoutOf(*Named(g, "relu")), "nchw16c");
  EXPECT_EQ(LayoutOf(*Named(g, "conv2")), "nchw16c");
  EXPECT_EQ(LayoutOf(*Named(g, "softmax")), "row-major");
  // In: x; out: r1 once (for the Softmax) and y (the graph output). The
  // borders inside the chain (c1 twice, r1 into conv2) cancelled.
  EXPECT_EQ(d.reorders_inserted, 6);
  EXPECT_EQ(d.reorders_cancelled, 2);
  EXPECT_EQ(d.reorders_kept, 3);
  std::set<std::string> kept;
  for (const Node* r : Reorders(g)) {
    kept.insert(g.value(r->inputs[0]).name + ":" + *r->named_attrs.String("from") + "->" +
                *r->named_attrs.String("to"));
  }
  EXPECT_EQ(kept, (std::set<std::string>{"x:row-major->nchw16c", "r1.nchw16c:nchw16c->row-major",
                                         "y.nchw16c:nchw16c->row-major"}));
  // Graph inputs and outputs stay row-major, the caller's buffers.
  EXPECT_EQ(g.value(c.x).layout, TensorLayout::kRowMajor);
  EXPECT_EQ(g.value(c.y).layout, TensorLayout::kRowMajor);
  EXPECT_EQ(g.value(c.y).io_slot, 1);
  EXPECT_EQ(g.value(Named(g, "conv2")->outputs[0]).layout, TensorLayout::kNCHW16c);
  // conv2 reads what relu writes, with no reorder between them.
  EXPECT_EQ(Named(g, "conv2")->inputs[0], Named(g, "relu")->outputs[0]);
  // The weights stay constants in row-major.
  EXPECT_TRUE(g.value(Named(g, "conv2")->inputs[1]).constant != nullptr);
  EXPECT_TRUE(g.Validate().ok());
  bool reported = false;
  for (const std::string& line : d.lines)
    reported = reported || line.find("activations nchw16c on cpu: 3 nodes") == 0;
  EXPECT_TRUE(reported);
}

// A stem that may read its first input row-major (conv1, reading the graph
// input) starts the chain with no reorder before it; conv2, whose input
// comes from the chain, still reads it blocked.
TEST(TensorLayouts, AStemReadsItsRowMajorInputWithNoReorder) {
  Chain c = MakeChain();
  LayoutQuestions ask = Blocked();
  ask.reads_row_major = [](const Graph&, const Node& n, TensorLayout l) {
    return l == TensorLayout::kNCHW16c && n.op_type == "Conv";
  };
  TensorLayoutDecisions d;
  ASSERT_TRUE(ChooseTensorLayouts(c.g, ask, &d).ok());
  const Graph& g = c.g;
  const Node& conv1 = *Named(g, "conv1");
  const Node& conv2 = *Named(g, "conv2");
  EXPECT_EQ(LayoutOf(conv1), "nchw16c");
  EXPECT_EQ(conv1.inputs[0], c.x);
  EXPECT_EQ(*conv1.named_attrs.String("input_layout"), "row-major");
  EXPECT_FALSE(conv2.named_attrs.Has("input_layout"));
  EXPECT_EQ(conv2.inputs[0], Named(g, "relu")->outputs[0]);
  EXPECT_EQ(d.reorders_kept, 2);  // r1 for the Softmax and y, the graph output
  for (const Node* r : Reorders(g)) EXPECT_NE(r->inputs[0], c.x);
  EXPECT_TRUE(g.Validate().ok());
}

TEST(TensorLayouts, NothingWantedLeavesTheGraphAsItIs) {
  Chain c = MakeChain();
  LayoutQuestions ask = Blocked();
  ask.wanted = [](const Graph&, const Node&) { return TensorLayout::kRowMajor; };
  TensorLayoutDecisions d;
  ASSERT_TRUE(ChooseTensorLayouts(c.g, ask, &d).ok());
  EXPECT_EQ(c.g.nodes().size(), 4u);
  EXPECT_TRUE(Reorders(c.g).empty());
  EXPECT_TRUE(d.lines.empty());
}

TEST(TensorLayouts, TheChainDoesNotCrossBackends) {
  Chain c = MakeChain();
  for (Node& n : c.g.nodes()) {
    if (n.name == "relu") n.backend = "other";
  }
  TensorLayoutDecisions d;
  ASSERT_TRUE(ChooseTensorLayouts(c.g, Blocked(), &d).ok());
  EXPECT_EQ(LayoutOf(*Named(c.g, "relu")), "row-major");
  EXPECT_EQ(LayoutOf(*Named(c.g, "conv1")), "nchw16c");
  // conv1's output leaves the chain, conv2's input enters another.
  EXPECT_EQ(d.reorders_cancelled, 0);
  EXPECT_EQ(d.reorders_kept, 4);
}

TEST(TensorLayouts, AChainWhoseBordersMoveMoreThanItsConvolutionSavesStaysRowMajor) {
  // x -> conv -> Add(., z) -> y: blocking would reorder x, z and y where
  // the convolution alone reorders x and its output.
  Graph g;
  const ValueId x = Act(g, "x"), z = Act(g, "z");
  for (ValueId in : {x, z}) {
    g.value(in).is_graph_input = true;
    g.value(in).io_slot = in == x ? 0 : 1;
  }
  const ValueId w =
      g.AddConstant("w", TensorData::FromValues(DType::kF32, {16, 16, 1, 1}, std::vector<float>(256, 0.5f)));
  const ValueId c = Act(g, "c"), y = Act(g, "y");
  g.AddNode(Op("Conv", "conv", {x, w}, c));
  g.AddNode(Op("Add", "add", {c, z}, y));
  g.value(y).is_output = true;
  g.value(y).io_slot = 2;
  LayoutQuestions ask = Blocked();
  ask.takes = [](const Graph&, const Node& n, TensorLayout l) {
    return l == TensorLayout::kRowMajor || n.op_type == "Conv" || n.op_type == "Add";
  };
  TensorLayoutDecisions d;
  ASSERT_TRUE(ChooseTensorLayouts(g, ask, &d).ok());
  EXPECT_TRUE(Reorders(g).empty());
  EXPECT_EQ(LayoutOf(*Named(g, "conv")), "row-major");
  EXPECT_EQ(LayoutOf(*Named(g, "add")), "row-major");

  // A layout the backend needs (it cannot run the node row-major) stays.
  Graph h;
  const ValueId p = Act(h, "p");
  h.value(p).is_graph_input = true;
  h.value(p).io_slot = 0;
  const ValueId q = Act(h, "q");
  h.AddNode(Op("Relu", "relu", {p}, q));
  h.value(q).is_output = true;
  h.value(q).io_slot = 1;
  ask.wanted = [](const Graph&, const Node&) { return TensorLayout::kNHWC; };
  ask.takes = [](const Graph&, const Node&, TensorLayout l) { return l == TensorLayout::kNHWC; };
  ASSERT_TRUE(ChooseTensorLayouts(h, ask, &d).ok());
  EXPECT_EQ(LayoutOf(*Named(h, "relu")), "nhwc");
  EXPECT_EQ(Reorders(h).size(), 2u);
}

TEST(TensorLayouts, ReordersThatMeetCancel) {
  Graph g;
  const ValueId x = Act(g, "x");
  g.value(x).is_graph_input = true;
  g.value(x).io_slot = 0;
  const ValueId a = Act(g, "a"), b = Act(g, "b"), y = Act(g, "y");
  g.value(b).layout = TensorLayout::kNHWC;
  Node there = Op("kiln.Reorder", "there", {a}, b);
  there.named_attrs.SetString("from", "row-major");
  there.named_attrs.SetString("to", "nhwc");
  Node back = Op("kiln.Reorder", "back", {b}, Act(g, "c"));
  back.named_attrs.SetString("from", "nhwc");
  back.named_attrs.SetString("to", "row-major");
  const ValueId c = back.outputs[0];
  g.AddNode(Op("Relu", "relu", {x}, a));
  g.AddNode(std::move(there));
  g.AddNode(std::move(back));
  g.AddNode(Op("Sigmoid", "sigmoid", {c}, y));
  g.value(y).is_output = true;
  g.value(y).io_slot = 1;
  auto cancelled = CancelMeetingReorders(g);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, 1);
  EXPECT_TRUE(Reorders(g).empty());
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(Named(g, "sigmoid")->inputs[0], a);

  // The same direction twice is no pair: both stay.
  Graph h;
  const ValueId p = Act(h, "p");
  h.value(p).is_graph_input = true;
  h.value(p).io_slot = 0;
  const ValueId q = Act(h, "q"), r = Act(h, "r");
  Node one = Op("kiln.Reorder", "one", {p}, q);
  one.named_attrs.SetString("from", "row-major");
  one.named_attrs.SetString("to", "nhwc");
  Node two = Op("kiln.Reorder", "two", {q}, r);
  two.named_attrs.SetString("from", "row-major");
  two.named_attrs.SetString("to", "nchw16c");
  h.AddNode(std::move(one));
  h.AddNode(std::move(two));
  h.value(r).is_output = true;
  h.value(r).io_slot = 1;
  cancelled = CancelMeetingReorders(h);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, 0);
  EXPECT_EQ(Reorders(h).size(), 2u);
}

}  // namespace tensor_layouts_tests
}  // namespace kiln
