// The Llama-family decoder, in the order the math happens:
//   h = embed(ids)
//   per layer: h += o_proj(attention(rope(q), rope(k), v))   over norm(h)
//              h += down(silu(gate(x)) * up(x))              over norm(h)
//                   (split over tensor-parallel ranks: each o_proj and
//                   down output is a partial sum, all-reduced before the add)
//                   (or, in a mixture's layers, the weighted sum of that
//                   MLP over the experts the router picks: one moe node)
//   logits = lm_head(norm(h[selected rows]))
// A pipeline stage (ModelConfig's pipeline fields) builds its layers only:
// after the first, h is the hidden state the stage before gave (a graph
// input); before the last, the graph's output is h of every token.
// Gemma scales the embeddings by sqrt(hidden_size), normalizes each block's
// output as well as its input (h += norm(o_proj(...)), h += norm(down(...))),
// and Gemma 2 soft-caps the logits.
#include "models/decoder_builder.h"

#include <cmath>

#include <fmt/format.h>

#include "format/weight_store.h"
#include "graph/rope_attributes.h"

namespace kiln {

namespace value_names {
std::string Layer(int64_t layer, const char* what) { return fmt::format("layers.{}.{}", layer, what); }
}  // namespace value_names

namespace {

class Builder {
 public:
  Builder(const WeightStore& weights) : store_(weights), c_(weights.config()) {}

  Expected<Graph> Build() {
    ValueId h = kNoValue;
    if (c_.FirstStage()) {
      KILN_ASSIGN_OR_RETURN(const Weight* embed, store_.Require(weight_names::Embedding()));
      NodeAttrs embed_attrs;
      // Hugging Face multiplies by the normalizer in the activations' dtype:
      // f32 here.
      if (c_.gemma_norms) embed_attrs.scale = static_cast<float>(std::sqrt(static_cast<double>(c_.hidden_size)));
      h = Op(OpKind::kEmbedding, "model.embed_tokens", {}, {embed}, embed_attrs, "embed", c_.hidden_size);
    } else {
      // A later pipeline stage: the stage before's hidden state of every
      // token, read from the caller's memory (tensor_io[0]) into the arena.
      ValueId in = g_.AddValue("hidden_in", DType::kF32, RowSpace::kTokens, c_.hidden_size);
      g_.value(in).is_graph_input = true;
      g_.value(in).io_slot = 0;
      h = Op(OpKind::kTransfer, "pipeline.receive", {in}, {}, {}, "embed", c_.hidden_size);
    }
    for (int64_t l = c_.StageLayerBegin(); l < c_.StageLayerEnd(); ++l) {
      KILN_ASSIGN_OR_RETURN(h, Layer(l, h));
    }
    if (!c_.LastStage()) {
      // The hidden state of every token for the next stage, written where
      // the logits would go.
      ValueId out = Op(OpKind::kTransfer, "pipeline.send", {h}, {}, {}, "hidden_out", c_.hidden_size);
      g_.value(out).is_output = true;
      KILN_RETURN_IF_ERROR(g_.Validate());
      return std::move(g_);
    }
    ValueId rows = g_.AddValue("final_rows", DType::kF32, RowSpace::kOutputRows, c_.hidden_size);
    Node select;
    select.op = OpKind::kSelectRows;
    select.name = "select_rows";
    select.inputs = {h};
    select.outputs = {rows};
    g_.AddNode(std::move(select));

    KILN_ASSIGN_OR_RETURN(const Weight* norm_w, store_.Require(weight_names::FinalNorm()));
    ValueId x = Norm("model.norm", rows, norm_w, 0, "final_norm");
    const Weight* head = store_.Find(weight_names::LmHead());
    if (head == nullptr || c_.tie_word_embeddings) {
      KILN_ASSIGN_OR_RETURN(head, store_.Require(weight_names::Embedding()));
    }
    ValueId logits = LinearOp("lm_head", x, head, nullptr, "logits");
    if (c_.final_logit_softcap > 0) {
      NodeAttrs a;
      a.softcap = c_.final_logit_softcap;
      logits = Op(OpKind::kSoftcap, "final_logit_softcap", {logits}, {}, a, "capped_logits", c_.vocab_size,
                  RowSpace::kOutputRows);
    }
    g_.value(logits).is_output = true;
    KILN_RETURN_IF_ERROR(g_.Validate());
    return std::move(g_);
  }

 private:
  Expected<ValueId> Layer(int64_t l, ValueId h) {
    auto w = [&](const char* suffix) { return store_.Require(weight_names::Layer(l, suffix)); };
    auto maybe = [&](const char* suffix) { return store_.Find(weight_names::Layer(l, suffix)); };
    std::string prefix = fmt::format("model.layers.{}.", l);
    auto vname = [&](const char* what) { return value_names::Layer(l, what); };

    // Attention block.
    KILN_ASSIGN_OR_RETURN(const Weight* in_norm, w("input_layernorm.weight"));
    ValueId x = Norm(prefix + "input_layernorm", h, in_norm, 0, vname("attn_norm"));
    KILN_ASSIGN_OR_RETURN(const Weight* wq, w("self_attn.q_proj.weight"));
    KILN_ASSIGN_OR_RETURN(const Weight* wk, w("self_attn.k_proj.weight"));
    KILN_ASSIGN_OR_RETURN(const Weight* wv, w("self_attn.v_proj.weight"));
    const Weight* bq = c_.attention_bias ? maybe("self_attn.q_proj.bias") : nullptr;
    const Weight* bk = c_.attention_bias ? maybe("self_attn.k_proj.bias") : nullptr;
    const Weight* bv = c_.attention_bias ? maybe("self_attn.v_proj.bias") : nullptr;
    ValueId q = LinearOp(prefix + "self_attn.q_proj", x, wq, bq, vname("q"));
    ValueId k = LinearOp(prefix + "self_attn.k_proj", x, wk, bk, vname("k"));
    ValueId v = LinearOp(prefix + "self_attn.v_proj", x, wv, bv, vname("v"));
    if (c_.qk_norm) {
      KILN_ASSIGN_OR_RETURN(const Weight* qn, w("self_attn.q_norm.weight"));
      KILN_ASSIGN_OR_RETURN(const Weight* kn, w("self_attn.k_norm.weight"));
      q = Norm(prefix + "self_attn.q_norm", q, qn, c_.head_dim, vname("q_norm"));
      k = Norm(prefix + "self_attn.k_norm", k, kn, c_.head_dim, vname("k_norm"));
    }
    q = Rope(prefix + "self_attn.rope_q", q, c_.num_heads, l, vname("q_rope"));
    k = Rope(prefix + "self_attn.rope_k", k, c_.num_kv_heads, l, vname("k_rope"));

    ValueId written = g_.AddValue(vname("kv_written"), DType::kF32, RowSpace::kNone, 0);
    Node kv;
    kv.op = OpKind::kKvWrite;
    kv.name = prefix + "self_attn.kv_cache";
    kv.inputs = {k, v};
    kv.outputs = {written};
    kv.attrs.layer = l - c_.StageLayerBegin();  // the stage's own cache holds its layers only
    kv.attrs.n_kv_heads = c_.num_kv_heads;
    kv.attrs.head_dim = c_.head_dim;
    g_.AddNode(std::move(kv));

    ValueId attn = g_.AddValue(vname("attn"), DType::kF32, RowSpace::kTokens, c_.num_heads * c_.head_dim);
    Node at;
    at.op = OpKind::kAttention;
    at.name = prefix + "self_attn.attention";
    at.inputs = {q, written};
    at.outputs = {attn};
    at.attrs.layer = l - c_.StageLayerBegin();
    at.attrs.n_heads = c_.num_heads;
    at.attrs.n_kv_heads = c_.num_kv_heads;
    at.attrs.head_dim = c_.head_dim;
    at.attrs.sliding_window = c_.LayerSlides(l) ? c_.sliding_window : 0;
    at.attrs.scale = c_.AttentionScale();
    at.attrs.softcap = c_.attn_logit_softcap;
    g_.AddNode(std::move(at));

    KILN_ASSIGN_OR_RETURN(const Weight* wo, w("self_attn.o_proj.weight"));
    const Weight* bo = c_.attention_output_bias ? maybe("self_attn.o_proj.bias") : nullptr;
    ValueId o = LinearOp(prefix + "self_attn.o_proj", attn, wo, bo, vname("attn_out"));
    o = SumOverRanks(prefix + "self_attn.o_proj.all_reduce", o, vname("attn_out_sum"));
    KILN_ASSIGN_OR_RETURN(const Weight* post_norm, w("post_attention_layernorm.weight"));
    if (c_.gemma_norms) {
      o = Norm(prefix + "post_attention_layernorm", o, post_norm, 0, vname("attn_out_norm"));
      KILN_ASSIGN_OR_RETURN(post_norm, w("pre_feedforward_layernorm.weight"));
    }
    h = Binary(OpKind::kAdd, prefix + "attn_residual", h, o, vname("attn_residual"));

    // MLP block.
    x = Norm(prefix + (c_.gemma_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm"), h, post_norm,
             0, vname("mlp_norm"));
    ValueId d;
    if (c_.LayerIsMoe(l)) {
      KILN_ASSIGN_OR_RETURN(d, Experts(l, x));
    } else {
      KILN_ASSIGN_OR_RETURN(const Weight* wg, w("mlp.gate_proj.weight"));
      KILN_ASSIGN_OR_RETURN(const Weight* wu, w("mlp.up_proj.weight"));
      KILN_ASSIGN_OR_RETURN(const Weight* wd, w("mlp.down_proj.weight"));
      ValueId gate = LinearOp(prefix + "mlp.gate_proj", x, wg, nullptr, vname("gate"));
      ValueId up = LinearOp(prefix + "mlp.up_proj", x, wu, nullptr, vname("up"));
      OpKind act = c_.activation == Activation::kSilu ? OpKind::kSiluMul : OpKind::kGeluMul;
      ValueId m = Binary(act, prefix + "mlp.act", gate, up, vname("mlp_act"));
      if (act == OpKind::kGeluMul) g_.nodes().back().attrs.gelu_tanh = c_.activation == Activation::kGeluTanh;
      d = LinearOp(prefix + "mlp.down_proj", m, wd, nullptr, vname("mlp_out"));
      d = SumOverRanks(prefix + "mlp.down_proj.all_reduce", d, vname("mlp_out_sum"));
    }
    if (c_.gemma_norms) {
      KILN_ASSIGN_OR_RETURN(const Weight* out_norm, w("post_feedforward_layernorm.weight"));
      d = Norm(prefix + "post_feedforward_layernorm", d, out_norm, 0, vname("mlp_out_norm"));
    }
    return Binary(OpKind::kAdd, prefix + "output", h, d, vname("output"));
  }

  // One moe node: the router, every expert's gate/up/down, and the shared
  // expert where the model has one (moe_weights' order).
  Expected<ValueId> Experts(int64_t l, ValueId x) {
    if (c_.activation != Activation::kSilu) {
      return Unsupported("layer {}: experts with an activation other than SiLU", l);
    }
    auto w = [&](const std::string& suffix) { return store_.Require(weight_names::Layer(l, suffix)); };
    std::vector<const Weight*> weights;
    KILN_ASSIGN_OR_RETURN(const Weight* router, w("mlp.gate.weight"));
    weights.push_back(router);
    for (int64_t e = 0; e < c_.num_experts; ++e) {
      for (const char* projection : {"gate_proj", "up_proj", "down_proj"}) {
        KILN_ASSIGN_OR_RETURN(const Weight* p, w(weight_names::ExpertSuffix(e, projection)));
        weights.push_back(p);
      }
    }
    if (c_.shared_expert_intermediate_size > 0) {
      for (const char* suffix : {"mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                                 "mlp.shared_expert.down_proj.weight", "mlp.shared_expert_gate.weight"}) {
        KILN_ASSIGN_OR_RETURN(const Weight* p, w(suffix));
        weights.push_back(p);
      }
    } else {
      weights.insert(weights.end(), 4, nullptr);
    }
    NodeAttrs a;
    a.experts_per_token = c_.experts_per_token;
    a.normalize_expert_weights = c_.normalize_expert_weights;
    return Op(OpKind::kMoe, fmt::format("model.layers.{}.mlp.experts", l), {x}, std::move(weights), a,
              value_names::Layer(l, "mlp_out"), c_.hidden_size);
  }

  ValueId Op(OpKind op, std::string name, std::vector<ValueId> inputs, std::vector<const Weight*> weights,
             NodeAttrs attrs, std::string out_name, int64_t cols, RowSpace rows = RowSpace::kTokens) {
    ValueId out = g_.AddValue(std::move(out_name), DType::kF32, rows, cols);
    Node n;
    n.op = op;
    n.name = std::move(name);
    n.inputs = std::move(inputs);
    n.outputs = {out};
    n.weights = std::move(weights);
    n.attrs = attrs;
    g_.AddNode(std::move(n));
    return out;
  }

  ValueId Norm(std::string name, ValueId x, const Weight* w, int64_t group, std::string out_name) {
    NodeAttrs a;
    a.eps = c_.rms_norm_eps;
    a.group = group;
    const Value& in = g_.value(x);
    return Op(OpKind::kRmsNorm, std::move(name), {x}, {w}, a, std::move(out_name), in.cols, in.rows);
  }

  ValueId LinearOp(std::string name, ValueId x, const Weight* w, const Weight* bias, std::string out_name) {
    RowSpace rows = g_.value(x).rows;
    return Op(OpKind::kLinear, std::move(name), {x}, {w, bias}, {}, std::move(out_name), w->shape[0], rows);
  }

  // A row-parallel linear's partial sums added up over the tensor-parallel
  // ranks; the value itself where the model is not split.
  ValueId SumOverRanks(std::string name, ValueId x, std::string out_name) {
    if (c_.tensor_parallel_size <= 1) return x;
    const Value& v = g_.value(x);
    return Op(OpKind::kAllReduceSum, std::move(name), {x}, {}, {}, std::move(out_name), v.cols, v.rows);
  }

  ValueId Rope(std::string name, ValueId x, int64_t heads, int64_t layer, std::string out_name) {
    NodeAttrs a;
    a.n_heads = heads;
    a.head_dim = c_.head_dim;
    a.rope_style = c_.rope_style;
    ValueId out = Op(OpKind::kRope, std::move(name), {x}, {}, a, std::move(out_name), g_.value(x).cols);
    RopeParameters rope;
    rope.rotary_dim = c_.RotaryDim();
    rope.theta = c_.LayerRopeTheta(layer);
    // Gemma 3's sliding layers rotate at their own base, unscaled.
    if (!(c_.rope_local_theta > 0 && c_.LayerSlides(layer))) rope.scaling = c_.rope_scaling;
    SetRopeAttributes(rope, &g_.nodes().back().named_attrs);
    return out;
  }

  ValueId Binary(OpKind op, std::string name, ValueId a, ValueId b, std::string out_name) {
    const Value& va = g_.value(a);
    return Op(op, std::move(name), {a, b}, {}, {}, std::move(out_name), va.cols, va.rows);
  }

  const WeightStore& store_;
  const ModelConfig& c_;
  Graph g_;
};

}  // namespace

Expected<Graph> BuildDecoderGraph(const WeightStore& weights) {
  KILN_RETURN_IF_ERROR(weights.config().Validate());
  return Builder(weights).Build();
}

}  // namespace kiln
