// The quantization pipeline: pick each tensor's type, convert its rows in
// parallel, gather the metadata, write the file.
#include "quantize/quantize_model.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/weight_store.h"
#include "quant/dequantize.h"
#include "quant/quantize_ref.h"

namespace kiln {
namespace {

// One tensor of the output and where its values come from.
struct Job {
  std::string name;  // GGUF name
  const Weight* weight = nullptr;  // the first of `parts`
  // The weights whose rows the tensor holds, one after another: one, or
  // the parts of a tensor GGUF keeps fused (Phi-3's q/k/v and gate/up).
  std::vector<const Weight*> parts;
  std::vector<int64_t> shape;  // as written
  // llama.cpp's q/k row permutation for interleaved RoPE: the head size, or 0.
  int64_t permute_head_dim = 0;
  TypeChoice choice;
  DType dtype = DType::kF32;  // as written
};

Job JobOf(std::string name, const Weight* w) {
  Job job;
  job.name = std::move(name);
  job.weight = w;
  job.parts = {w};
  job.shape = w->shape;
  return job;
}

// Adds `w` to the last job when both are parts of one fused tensor (the
// store split it at load and they share its source name), else a new job.
void AddJob(std::vector<Job>& jobs, std::string name, const Weight* w,
            const std::unordered_map<std::string, int>& parts_of_source) {
  auto fused = parts_of_source.find(w->source_name);
  if (fused != parts_of_source.end() && fused->second > 1 && !jobs.empty() &&
      jobs.back().weight->source_name == w->source_name) {
    Job& job = jobs.back();
    job.parts.push_back(w);
    job.shape[0] += w->shape[0];
    return;
  }
  jobs.push_back(JobOf(std::move(name), w));
}

std::unordered_map<std::string, int> PartsOfSource(const WeightStore& store) {
  std::unordered_map<std::string, int> count;
  for (const Weight& w : store.weights()) ++count[w.source_name];
  return count;
}

// LongRoPE's factor lists, which GGUF keeps as tensors and the loader reads
// into the config.
void AddLongRopeFactors(const ModelConfig& c, std::vector<Job>& jobs, std::vector<std::unique_ptr<Weight>>& owned,
                        std::vector<std::shared_ptr<std::vector<float>>>& values) {
  if (c.rope_scaling.type != RopeScalingType::kLongRope) return;
  const std::vector<double>* lists[2] = {&c.rope_scaling.long_factor, &c.rope_scaling.short_factor};
  for (int i = 0; i < 2; ++i) {
    auto data = std::make_shared<std::vector<float>>(lists[i]->begin(), lists[i]->end());
    auto w = std::make_unique<Weight>();
    w->name = kLongRopeFactorTensors[i];
    w->source_name = w->name;
    w->file = "config";
    w->dtype = DType::kF32;
    w->file_dtype = DType::kF32;
    w->shape = {static_cast<int64_t>(data->size())};
    w->data = reinterpret_cast<const uint8_t*>(data->data());
    w->nbytes = data->size() * sizeof(float);
    jobs.push_back(JobOf(w->name, w.get()));
    values.push_back(std::move(data));
    owned.push_back(std::move(w));
  }
}

// The source row of output row r under the q/k permutation: within each
// head of d rows, output row 2i + j is source row i + j * d / 2.
int64_t SourceRow(int64_t r, int64_t head_dim) {
  if (head_dim <= 0) return r;
  int64_t head = r / head_dim, p = r % head_dim;
  return head * head_dim + (p % 2) * (head_dim / 2) + p / 2;
}

// Architectures whose GGUF files permute q/k rows for interleaved RoPE.
bool IsHfLlama(const ModelConfig& c) {
  return c.arch == Architecture::kLlama || c.arch == Architecture::kMistral || c.arch == Architecture::kMixtral;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Rows(const std::vector<int64_t>& shape) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return shape.size() <= 1 ? 1 : rows;
}

// The jobs of a Hugging Face folder: the tensors the architecture needs, in
// llama.cpp's naming, q/k permuted for llama.
std::vector<Job> HfJobs(const WeightStore& store, const QuantizeOptions& options) {
  const ModelConfig& c = store.config();
  const std::unordered_map<std::string, int> parts_of_source = PartsOfSource(store);
  std::vector<Job> jobs;
  std::vector<std::string> used;
  for (const WeightSpec& spec : RequiredWeights(c)) {
    const Weight* w = store.Find(spec.name);
    if (w == nullptr) continue;  // WeightStore::Open checked the required ones
    // A part of a fused tensor is written under the fused tensor's name.
    const bool part = parts_of_source.count(w->source_name) > 0 && parts_of_source.at(w->source_name) > 1;
    AddJob(jobs, weight_names::ToGgufFor(part ? w->source_name : spec.name, c), w, parts_of_source);
    if (IsHfLlama(c)) {
      bool q = spec.name.find("self_attn.q_proj.") != std::string::npos;
      bool k = spec.name.find("self_attn.k_proj.") != std::string::npos;
      if (q || k) jobs.back().permute_head_dim = c.head_dim;
    }
    used.push_back(spec.name);
  }
  for (const Weight& w : store.weights()) {
    if (std::find(used.begin(), used.end(), w.name) != used.end()) continue;
    if (options.on_notice) options.on_notice(fmt::format("{}: not part of the {} layout, left out", w.name, ArchitectureName(c.arch)));
  }
  return jobs;
}

// The expert index of "model.layers.N.mlp.experts.E.<projection>.weight",
// or -1 for any other name.
int64_t ExpertIndex(std::string_view name) {
  constexpr std::string_view kExperts = ".mlp.experts.";
  const size_t at = name.find(kExperts);
  if (at == std::string_view::npos) return -1;
  int64_t e = 0;
  size_t i = at + kExperts.size();
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    e = e * 10 + (name[i] - '0');
    if (e > (int64_t{1} << 30)) return -1;
  }
  return e;
}

std::vector<Job> GgufJobs(const WeightStore& store) {
  const std::unordered_map<std::string, int> parts_of_source = PartsOfSource(store);
  std::vector<Job> jobs;
  for (const Weight& w : store.weights()) {
    // An expert goes under its layer's stacked name whether the file
    // stacked it or held it alone (older Mixtral files); StackExperts joins them.
    if (ExpertIndex(w.name) >= 0) {
      jobs.push_back(JobOf(weight_names::ToGgufFor(w.name, store.config()), &w));
    } else {
      AddJob(jobs, w.source_name, &w, parts_of_source);
    }
  }
  return jobs;
}

// Joins the one-expert jobs of each blk.N.ffn_{gate,up,down}_exps tensor
// into one 3-D job, experts outermost in expert order, where its first
// expert stood. Errors when the experts differ in shape or type, or one is
// missing or repeated.
Status StackExperts(const ModelConfig& c, std::vector<Job>& jobs) {
  if (c.num_experts <= 0) return Status::Ok();
  std::vector<Job> out;
  std::unordered_map<std::string, size_t> stacked;  // name -> index in out
  for (Job& job : jobs) {
    const int64_t expert = ExpertIndex(job.weight->name);
    if (expert < 0) {
      out.push_back(std::move(job));
      continue;
    }
    const Weight& w = *job.weight;
    if (w.shape.size() != 2 || expert >= c.num_experts) {
      return Corrupt("{}: tensor {}: expert {} of shape [{}] is not one of {} matrices", w.file, w.source_name,
                     expert, fmt::join(w.shape, ", "), c.num_experts);
    }
    auto [it, first] = stacked.emplace(job.name, out.size());
    if (first) {
      Job all = job;
      all.parts.assign(static_cast<size_t>(c.num_experts), nullptr);
      all.shape = {c.num_experts, w.shape[0], w.shape[1]};
      out.push_back(std::move(all));
    }
    Job& all = out[it->second];
    const Weight*& slot = all.parts[static_cast<size_t>(expert)];
    if (slot != nullptr) return Corrupt("{}: expert {} of {} appears twice", w.file, expert, job.name);
    if (w.shape != std::vector<int64_t>{all.shape[1], all.shape[2]} || w.dtype != all.weight->dtype) {
      return Corrupt("{}: tensor {}: expert {} is [{}] {}, expert 0 of {} is [{}, {}] {}", w.file, w.source_name,
                     expert, fmt::join(w.shape, ", "), DTypeName(w.dtype), job.name, all.shape[1], all.shape[2],
                     DTypeName(all.weight->dtype));
    }
    slot = &w;
  }
  for (Job& job : out) {
    for (size_t e = 0; e < job.parts.size(); ++e) {
      if (job.parts[e] == nullptr) return Corrupt("{}: expert {} of {} is missing", job.weight->file, e, job.name);
    }
    job.weight = job.parts.front();
    // GGUF holds Qwen2-MoE's shared-expert gate as a vector.
    if (job.name.ends_with(".ffn_gate_inp_shexp.weight") && job.shape.size() == 2 && job.shape[0] == 1) {
      job.shape = {job.shape[1]};
    }
  }
  jobs = std::move(out);
  return Status::Ok();
}

// The first non-finite value of `n` floats, or -1.
int64_t FirstNonFinite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

// Converts one tensor into out->data (sized by the caller).
Status ConvertTensor(const Job& job, ThreadPool& pool, QuantizedTensor* out) {
  const Weight& w = *job.weight;
  const std::string where = fmt::format("{}: tensor {}", w.file, w.source_name);
  const bool vector = job.shape.size() <= 1;
  // Vectors are one row of `n` elements, permuted element-wise (q/k biases).
  const int64_t rows = vector ? 1 : Rows(job.shape);
  const int64_t row = vector ? w.num_elements() : job.shape.back();
  auto src_row_bytes = DTypeBytes(w.dtype, static_cast<uint64_t>(row));
  auto dst_row_bytes = DTypeBytes(job.dtype, static_cast<uint64_t>(row));
  if (!src_row_bytes || !dst_row_bytes) {
    return Corrupt("{}: rows of {} elements are not whole {} blocks", where, row, DTypeName(!src_row_bytes ? w.dtype : job.dtype));
  }
  // The first output row of each part.
  std::vector<int64_t> first_rows;
  int64_t part_rows_total = 0;
  for (const Weight* part : job.parts) {
    const int64_t part_rows = vector ? 1 : Rows(part->shape);
    if (part->dtype != w.dtype) {
      return Corrupt("{}: the parts of a fused tensor differ in type ({} and {})", where, DTypeName(w.dtype),
                     DTypeName(part->dtype));
    }
    if (*src_row_bytes * static_cast<uint64_t>(part_rows) > part->nbytes) {
      return Corrupt("{}: tensor {}: {} rows of {} bytes exceed the tensor's {} bytes", part->file, part->source_name,
                     part_rows, *src_row_bytes, part->nbytes);
    }
    first_rows.push_back(part_rows_total);
    part_rows_total += part_rows;
  }
  if (part_rows_total != rows) return Corrupt("{}: {} rows in its parts, {} written", where, part_rows_total, rows);
  auto source_row = [&](int64_t r) {
    r = SourceRow(r, job.permute_head_dim);
    size_t p = static_cast<size_t>(std::upper_bound(first_rows.begin(), first_rows.end(), r) - first_rows.begin()) - 1;
    return job.parts[p]->data + static_cast<uint64_t>(r - first_rows[p]) * *src_row_bytes;
  };
  uint8_t* dst = out->data.data();

  if (w.dtype == job.dtype && !(vector && job.permute_head_dim > 0)) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst + static_cast<uint64_t>(r) * *dst_row_bytes, source_row(r), *src_row_bytes);
    }
    return Status::Ok();
  }

  const bool check_finite = IsQuantized(job.dtype);
  std::vector<Status> errors(static_cast<size_t>(pool.num_threads()));
  pool.ParallelFor(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(row, 1)),
                   [&](int64_t begin, int64_t end, int thread) {
                     std::vector<float> values(static_cast<size_t>(row)), permuted;
                     Status& error = errors[static_cast<size_t>(thread)];
                     for (int64_t r = begin; r < end && error.ok(); ++r) {
                       const uint8_t* src = source_row(r);
                       Status s = DequantizeRow(w.dtype, src, values.data(), row);
                       if (!s.ok()) {
                         error = s.WithContext(where);
                         break;
                       }
                       if (vector && job.permute_head_dim > 0) {
                         permuted.resize(values.size());
                         for (int64_t i = 0; i < row; ++i) permuted[static_cast<size_t>(i)] = values[static_cast<size_t>(SourceRow(i, job.permute_head_dim))];
                         values.swap(permuted);
                       }
                       if (check_finite) {
                         if (int64_t bad = FirstNonFinite(values.data(), row); bad >= 0) {
                           error = InvalidArgument("{}: row {} column {} is {}, which {} cannot hold", where,
                                                   SourceRow(r, job.permute_head_dim), bad, values[static_cast<size_t>(bad)],
                                                   DTypeName(job.dtype));
                           break;
                         }
                       }
                       s = QuantizeRowRef(job.dtype, values.data(), dst + static_cast<uint64_t>(r) * *dst_row_bytes, row);
                       if (!s.ok()) error = s.WithContext(where);
                     }
                   });
  for (const Status& s : errors) KILN_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// `v` as an f32 metadata value reads back. Through memory, because GCC 12's
// SLP vectorizer drops adjacent double -> float -> double round trips.
double StoredAsF32(double v) {
  volatile float stored = static_cast<float>(v);
  return stored;
}

// The configuration WeightStore::Open derives from the written file.
ModelConfig FileConfig(const WeightStore& store, const GgufMetadata& metadata, bool has_output) {
  ModelConfig c = store.config();
  if (store.format() == ModelFormat::kGguf) return c;
  if (c.arch == Architecture::kMixtral) {
    c.hf_architecture = "MixtralForCausalLM";
    c.rope_style = RopeStyle::kInterleaved;
  } else if (IsHfLlama(c)) {
    c.arch = Architecture::kLlama;
    c.hf_architecture = "LlamaForCausalLM";
    c.rope_style = RopeStyle::kInterleaved;
  } else {
    switch (c.arch) {
      case Architecture::kQwen2: c.hf_architecture = "Qwen2ForCausalLM"; break;
      case Architecture::kPhi3: c.hf_architecture = "Phi3ForCausalLM"; break;
      case Architecture::kGemma2: c.hf_architecture = "Gemma2ForCausalLM"; break;
      case Architecture::kGemma3: c.hf_architecture = "Gemma3ForCausalLM"; break;
      case Architecture::kQwen2Moe: c.hf_architecture = "Qwen2MoeForCausalLM"; break;
      case Architecture::kQwen3Moe: c.hf_architecture = "Qwen3MoeForCausalLM"; break;
      default: c.hf_architecture = "Qwen3ForCausalLM"; break;
    }
  }
  c.text_tower_of_multimodal = false;
  // Floats are stored as f32.
  c.attn_logit_softcap = StoredAsF32(c.attn_logit_softcap);
  c.final_logit_softcap = StoredAsF32(c.final_logit_softcap);
  c.rms_norm_eps = StoredAsF32(c.rms_norm_eps);
  c.rope_theta = StoredAsF32(c.rope_theta);
  c.rope_scaling.factor = StoredAsF32(c.rope_scaling.factor);
  c.rope_scaling.beta_fast = StoredAsF32(c.rope_scaling.beta_fast);
  c.rope_scaling.beta_slow = StoredAsF32(c.rope_scaling.beta_slow);
  c.rope_scaling.attention_factor = StoredAsF32(c.rope_scaling.attention_factor);
  c.tie_word_embeddings = !has_output;
  c.torch_dtype.clear();
  c.bos_token_ids.clear();
  c.eos_token_ids.clear();
  for (const auto& [key, value] : metadata) {
    if (key == "tokenizer.ggml.bos_token_id") c.bos_token_ids.push_back(value.AsInt().value_or(-1));
    if (key == "tokenizer.ggml.eos_token_id") c.eos_token_ids.push_back(value.AsInt().value_or(-1));
  }
  if (c.rope_scaling.type != RopeScalingType::kNone && c.rope_scaling.original_max_position_embeddings <= 0) {
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  }
  return c;
}

GgufMetadata CopiedMetadata(const GgufFile& gguf, QuantFileType type) {
  GgufMetadata metadata = gguf.metadata();
  bool has_file_type = false, has_version = false;
  for (auto& [key, value] : metadata) {
    if (key == "general.file_type") {
      value = GgufValue::UInt(GgufType::kU32, static_cast<uint32_t>(type));
      has_file_type = true;
    } else if (key == "general.quantization_version") {
      value = GgufValue::UInt(GgufType::kU32, 2);
      has_version = true;
    }
  }
  if (!has_version) metadata.emplace_back("general.quantization_version", GgufValue::UInt(GgufType::kU32, 2));
  if (!has_file_type) {
    metadata.emplace_back("general.file_type", GgufValue::UInt(GgufType::kU32, static_cast<uint32_t>(type)));
  }
  return metadata;
}

}  // namespace

uint64_t QuantizedModel::TensorBytes() const {
  uint64_t total = 0;
  for (const QuantizedTensor& t : tensors) total += t.data.size();
  return total;
}

Expected<QuantizedModel> QuantizeModel(const std::string& source, const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store, WeightStore::Open(source));
  const bool from_gguf = store->format() == ModelFormat::kGguf;
  std::vector<Job> jobs = from_gguf ? GgufJobs(*store) : HfJobs(*store, options);
  KILN_RETURN_IF_ERROR(StackExperts(store->config(), jobs));
  std::vector<std::unique_ptr<Weight>> factor_weights;
  std::vector<std::shared_ptr<std::vector<float>>> factor_values;
  AddLongRopeFactors(store->config(), jobs, factor_weights, factor_values);

  QuantizedModel model;
  model.type = options.type;
  ModelFacts facts;
  facts.num_layers = store->config().num_layers;
  for (const Job& job : jobs) facts.has_output |= job.name == "output.weight";

  // Types and sizes first, so that progress can show the total.
  uint64_t bytes_total = 0;
  bool requantizing = false;
  for (Job& job : jobs) {
    const Weight& w = *job.weight;
    job.choice = ChooseTensorType(options.type, {job.name, job.shape}, facts);
    if (job.choice.keep_as_is) {
      // GGUF tensors stay as they are; Hugging Face vectors become f32, as
      // llama.cpp's converter writes them.
      job.dtype = from_gguf ? w.dtype : DType::kF32;
    } else {
      job.dtype = job.choice.dtype;
      requantizing |= IsQuantized(w.dtype) && w.dtype != job.dtype;
    }
    job.choice.dtype = job.dtype;
    auto bytes = DTypeBytes(job.dtype, static_cast<uint64_t>(Elements(job.shape)));
    if (!bytes) {
      return Corrupt("{}: tensor {}: {} elements do not fit {}", w.file, w.source_name, Elements(job.shape),
                     DTypeName(job.dtype));
    }
    bytes_total += *bytes;
    if (!job.choice.fallback_reason.empty()) {
      ++model.fallbacks;
      if (options.on_notice) {
        options.on_notice(fmt::format("{}: {}, falling back to {}", job.name, job.choice.fallback_reason,
                                      DTypeName(job.dtype)));
      }
    }
  }
  if (requantizing && options.on_notice) {
    options.on_notice(fmt::format("{}: requantizing weights that are already block-quantized; the errors of both "
                                  "quantizations add up",
                                  source));
  }

  if (from_gguf) {
    model.metadata = CopiedMetadata(*store->gguf(), options.type);
  } else {
    KILN_ASSIGN_OR_RETURN(model.metadata,
                          HfGgufMetadata(store->path(), store->config(), static_cast<uint32_t>(options.type)));
  }
  model.config = FileConfig(*store, model.metadata, facts.has_output);

  ThreadPool& pool = DefaultThreadPool(options.threads);
  QuantizeProgress progress;
  progress.tensors_total = static_cast<int64_t>(jobs.size());
  progress.bytes_total = bytes_total;
  for (const Job& job : jobs) {
    QuantizedTensor t;
    t.name = job.name;
    t.dtype = job.dtype;
    t.shape = job.shape;
    t.choice = job.choice;
    t.data.resize(static_cast<size_t>(*DTypeBytes(job.dtype, static_cast<uint64_t>(Elements(job.shape)))));
    KILN_RETURN_IF_ERROR(ConvertTensor(job, pool, &t));
    progress.bytes_done += t.data.size();
    ++progress.tensors_done;
    progress.last_tensor = t.name;
    model.tensors.push_back(std::move(t));
    progress.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.on_progress) options.on_progress(progress);
  }
  return model;
}

Status WriteQuantizedGguf(const QuantizedModel& model, const std::string& path) {
  GgufWriter writer;
  for (const auto& [key, value] : model.metadata) KILN_RETURN_IF_ERROR(writer.Set(key, value));
  for (const QuantizedTensor& t : model.tensors) {
    KILN_RETURN_IF_ERROR(writer.AddTensor(t.name, t.dtype, t.shape, t.data.data(), t.data.size()));
  }
  return writer.Write(path);
}

}  // namespace kiln
