// Starting the group, rank 0's side of each pass (send the batch), the
// other ranks' follower loop (receive, run, repeat), and the stop at exit.
#include "parallel/tensor_parallel.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/kv_cache.h"
#include "backend/memory_domain.h"
#include "compiler/compiled_model.h"
#include "compiler/program.h"
#include "core/cpu_info.h"
#include "core/log.h"
#include "engine/model_loader.h"
#include "engine/model_session.h"
#include "engine/model_session_options.h"
#include "format/weight_store.h"
#include "parallel/forward_batch_message.h"
#include "parallel/mpi_collective.h"

namespace kiln {
namespace {

// Rank 0's group, which the exit handler stops.
std::shared_ptr<MpiCollective>& EngineGroup() {
  static std::shared_ptr<MpiCollective> group;
  return group;
}

// At rank 0's exit: tell the others to stop, then finalize. After a failed
// collective MPI cannot be finalized (a collective is still in flight) and
// the process ends at once; mpirun then ends the other ranks.
void StopGroupAtExit() {
  std::shared_ptr<MpiCollective>& group = EngineGroup();
  if (group == nullptr) return;
  int32_t stop[PassMessageHeader::kInts] = {};
  if (group->failed()) {
    std::fflush(nullptr);
    std::_Exit(1);
  }
  Status stopped = group->Broadcast(stop, PassMessageHeader::kInts, true);
  if (stopped.ok()) stopped = group->Barrier();
  if (!stopped.ok()) {
    // The work is done, but a rank did not take the word to stop: say so
    // rather than end with a bare exit code.
    std::fprintf(stderr, "kiln: stopping the other ranks: %s\n", stopped.ToString().c_str());
    std::fflush(nullptr);
    std::_Exit(1);
  }
  group.reset();
  MPI_Finalize();
}

// Ends the process when MPI's start-up (every rank joining, which waits on
// the slowest) has not finished within the collective time-out: a rank
// that stopped or died that early must not leave the others waiting.
class StartupWatchdog {
 public:
  explicit StartupWatchdog(double seconds)
      : thread_([this, seconds] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
            std::fprintf(stderr,
                         "kiln: tensor parallelism: the other ranks did not join within the collective time-out of "
                         "%g s\n",
                         seconds);
            std::fflush(nullptr);
            std::_Exit(1);
          }
        }) {}
  ~StartupWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

bool StartedByMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

// Pipeline parallelism's messages between stages: a micro-batch's hidden
// state (stage to stage), its output rows' logits (last stage to rank 0).
constexpr int kHiddenTag = 1;
constexpr int kLogitsTag = 2;

// A micro-batch: sequences [seq_begin, seq_end) of a pass, as a pass of
// their own (the arrays of the whole pass, rebased where they count
// tokens or sequences), and which of the pass's output rows it computes.
struct MicroBatch {
  ForwardBatch batch;
  std::vector<int32_t> token_seq, query_start, output_rows, output_index;
};

// A pass split by sequence into up to `parts` micro-batches, as even in
// sequences as can be: every rank splits the pass it was sent the same way.
// (Each kernel gives a row the same bits whatever the other rows of its
// pass, so the split changes no result.)
void SplitPass(const ForwardBatch& b, int parts, std::vector<MicroBatch>* out) {
  const int32_t n = std::max(1, std::min<int32_t>(parts, b.num_seqs));
  out->resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t s0 = static_cast<int32_t>(int64_t{b.num_seqs} * i / n);
    const int32_t s1 = static_cast<int32_t>(int64_t{b.num_seqs} * (i + 1) / n);
    const int32_t t0 = b.query_start[s0], t1 = b.query_start[s1];
    MicroBatch& m = (*out)[static_cast<size_t>(i)];
    m.token_seq.resize(static_cast<size_t>(t1 - t0));
    for (int32_t t = t0; t < t1; ++t) m.token_seq[static_cast<size_t>(t - t0)] = b.token_seq[t] - s0;
    m.query_start.resize(static_cast<size_t>(s1 - s0) + 1);
    for (int32_t s = s0; s <= s1; ++s) m.query_start[static_cast<size_t>(s - s0)] = b.query_start[s] - t0;
    m.output_rows.clear();
    m.output_index.clear();
    for (int32_t r = 0; r < b.num_output_rows; ++r) {
      if (b.output_rows[r] >= t0 && b.output_rows[r] < t1) {
        m.output_rows.push_back(b.output_rows[r] - t0);
        m.output_index.push_back(r);
      }
    }
    ForwardBatch& p = m.batch;
    p = ForwardBatch{};
    p.num_tokens = t1 - t0;
    p.token_ids = b.token_ids + t0;
    p.positions = b.positions + t0;
    p.token_seq = m.token_seq.data();
    p.num_seqs = s1 - s0;
    p.query_start = m.query_start.data();
    p.seq_lens = b.seq_lens + s0;
    p.block_tables = b.block_tables + s0;
    p.num_output_rows = static_cast<int32_t>(m.output_rows.size());
    p.output_rows = m.output_rows.data();
  }
}

// Rank 0's side of a pipelined pass (after the batch went out): the first
// stage over each micro-batch in turn, its hidden state sent on while the
// next one computes, then the logits of every micro-batch from the last
// stage into their rows.
class PipelineHead {
 public:
  // `tensor_parallel` ranks a stage: stage s is world ranks [s T, (s + 1) T).
  PipelineHead(MpiCollective* group, int tensor_parallel) : group_(group), tp_(tensor_parallel) {}

  Status Run(const ForwardBatch& batch, ModelSession& session, float* logits, int64_t logits_stride,
             const DumpFn* dump) {
    const ModelConfig& c = session.config();
    const int stages = static_cast<int>(c.pipeline_stages);
    SplitPass(batch, stages, &parts_);
    const size_t n = parts_.size();
    if (hidden_.size() < n) hidden_.resize(n);
    std::vector<MPI_Request> sends(n);
    Status st;
    size_t sent = 0;
    for (size_t i = 0; i < n && st.ok(); ++i) {
      const ForwardBatch& b = parts_[i].batch;
      hidden_[i].resize(static_cast<size_t>(b.num_tokens * c.hidden_size));
      // Dumped values are the whole pass's: a split pass dumps its logits only.
      st = session.ForwardStage(b, nullptr, hidden_[i].data(), c.hidden_size, n == 1 ? dump : nullptr);
      if (st.ok()) st = group_->ISend(hidden_[i].data(), static_cast<int64_t>(hidden_[i].size()), tp_,
                                      kHiddenTag, &sends[i]);
      if (st.ok()) ++sent;
    }
    for (size_t i = 0; i < sent && st.ok(); ++i) st = group_->WaitSend(&sends[i], tp_);
    for (size_t i = 0; i < n && st.ok(); ++i) {
      const MicroBatch& m = parts_[i];
      if (m.batch.num_output_rows == 0) continue;
      rows_.resize(static_cast<size_t>(m.batch.num_output_rows * c.vocab_size));
      st = group_->Recv(rows_.data(), static_cast<int64_t>(rows_.size()), (stages - 1) * tp_, kLogitsTag);
      if (!st.ok()) break;
      for (int32_t r = 0; r < m.batch.num_output_rows; ++r) {
        std::memcpy(logits + m.output_index[static_cast<size_t>(r)] * logits_stride,
                    rows_.data() + static_cast<int64_t>(r) * c.vocab_size,
                    static_cast<size_t>(c.vocab_size) * sizeof(float));
      }
    }
    if (!st.ok()) return st.WithContext("pipeline-parallel forward");
    if (dump != nullptr && *dump && batch.num_output_rows > 0) {
      BoundValue v;
      v.data = reinterpret_cast<uint8_t*>(logits);
      v.row_stride = logits_stride;
      v.cols = c.vocab_size;
      v.rows = RowSpace::kOutputRows;
      v.is_output = true;
      v.domain = HostMemory().id();
      (*dump)(c.final_logit_softcap > 0 ? "capped_logits" : "logits", v, batch.num_output_rows);
    }
    return Status::Ok();
  }

 private:
  MpiCollective* group_;
  int tp_ = 1;
  std::vector<MicroBatch> parts_;
  std::vector<std::vector<float>> hidden_;
  std::vector<float> rows_;
};

// A rank other than 0: its shard, compiled ahead for the session the
// command-line options describe, and the session rank 0's passes shape (its
// KV cache has rank 0's number of blocks; an engine made with other batch
// limits, as each step of the throughput benchmark's sweep is, gets the
// model compiled again for them).
class Follower {
 public:
  static Expected<std::unique_ptr<Follower>> Create(const EngineOptions& options, int rank) {
    auto f = std::unique_ptr<Follower>(new Follower());
    f->rank_ = rank;
    f->tp_ = options.tensor_parallel_size;
    KILN_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options));
    f->weights_ = loaded.weights;
    KILN_ASSIGN_OR_RETURN(f->options_, SessionOptionsFor(options, loaded));
    f->options_.before_forward = nullptr;  // rank 0's alone
    KILN_ASSIGN_OR_RETURN(f->compiled_, CompileForSession(*f->weights_, f->options_));
    return f;
  }

  Status Run(const PassMessageHeader& header, std::vector<int32_t> payload, MpiCollective& group) {
    if (session_ == nullptr || !(header.shape == shape_)) KILN_RETURN_IF_ERROR(Reshape(header.shape));
    KILN_RETURN_IF_ERROR(DecodeForwardBatch(header, std::move(payload), shape_.block_size, &decoded_));
    const ModelConfig& c = weights_->config();
    if (c.pipeline_stages > 1) return RunStage(group);
    const int64_t vocab = c.vocab_size;
    logits_.resize(static_cast<size_t>(std::max<int64_t>(header.num_output_rows, 1) * vocab));
    return session_->Forward(decoded_.batch, logits_.data(), vocab);
  }

 private:
  Follower() = default;

  Status Reshape(const SessionShape& shape) {
    session_.reset();
    ModelSessionOptions o = options_;
    o.max_batch_tokens = shape.max_batch_tokens;
    o.max_seqs = shape.max_seqs;
    o.max_model_len = shape.max_model_len;
    o.block_size = shape.block_size;
    o.kv_num_blocks = shape.num_kv_blocks;
    const CompileOptions& ahead = compiled_ != nullptr ? compiled_->options() : CompileOptions{};
    if (compiled_ == nullptr || compiled_->max_batch_tokens() != shape.max_batch_tokens ||
        compiled_->max_model_len() != shape.max_model_len || ahead.max_seqs != shape.max_seqs ||
        ahead.block_size != shape.block_size) {
      compiled_.reset();
      KILN_ASSIGN_OR_RETURN(compiled_, CompileForSession(*weights_, o));
    }
    KILN_ASSIGN_OR_RETURN(session_, ModelSession::Create(std::move(compiled_), o));
    shape_ = shape;
    const ModelConfig& c = weights_->config();
    if (c.pipeline_stages > 1) {
      KILN_LOG_INFO("pipeline parallel rank {}: layers {} to {}, {} MiB of weights, {} KV blocks of {} tokens ({} "
                    "MiB)",
                    rank_, c.StageLayerBegin(), c.StageLayerEnd() - 1, weights_->TotalBytes() >> 20,
                    session_->num_kv_blocks(), session_->block_size(),
                    (session_->num_kv_blocks() * session_->kv_cache().layout().BlockBytes()) >> 20);
    } else {
      KILN_LOG_INFO("tensor parallel rank {}: {} MiB of weights, {} KV blocks of {} tokens ({} MiB)", rank_,
                    weights_->TotalBytes() >> 20, session_->num_kv_blocks(), session_->block_size(),
                    (session_->num_kv_blocks() * session_->kv_cache().layout().BlockBytes()) >> 20);
    }
    return Status::Ok();
  }

  // A pipeline stage: each micro-batch's hidden state from the stage before
  // (but on the first stage), this stage's layers over it, the result on to
  // the next stage (or, from the last, the output rows' logits to rank 0),
  // the sends left in flight while the next micro-batch computes. With
  // tensor parallelism too, stage s is world ranks [s T, (s + 1) T): each
  // talks to its counterpart in the stages beside it (every one of them
  // holds the whole hidden state), and the last stage's first rank sends
  // the logits.
  Status RunStage(MpiCollective& group) {
    const ModelConfig& c = weights_->config();
    const int stage = static_cast<int>(c.pipeline_stage);
    const int t = rank_ % tp_;
    const bool first = c.FirstStage(), last = c.LastStage();
    SplitPass(decoded_.batch, static_cast<int>(c.pipeline_stages), &parts_);
    const size_t n = parts_.size();
    if (in_.size() < n) in_.resize(n);
    if (out_.size() < n) out_.resize(n);
    std::vector<MPI_Request> sends;
    std::vector<int> peers;
    Status st;
    for (size_t i = 0; i < n && st.ok(); ++i) {
      const ForwardBatch& b = parts_[i].batch;
      if (!first) {
        in_[i].resize(static_cast<size_t>(b.num_tokens * c.hidden_size));
        st = group.Recv(in_[i].data(), static_cast<int64_t>(in_[i].size()), (stage - 1) * tp_ + t, kHiddenTag);
        if (!st.ok()) break;
      }
      const int64_t width = last ? c.vocab_size : c.hidden_size;
      const int64_t rows = last ? b.num_output_rows : b.num_tokens;
      out_[i].resize(static_cast<size_t>(std::max<int64_t>(rows, 1) * width));
      st = session_->ForwardStage(b, first ? nullptr : in_[i].data(), out_[i].data(), width);
      if (!st.ok() || rows == 0 || (last && t != 0)) continue;
      const int peer = last ? 0 : (stage + 1) * tp_ + t;
      MPI_Request request;
      st = group.ISend(out_[i].data(), rows * width, peer, last ? kLogitsTag : kHiddenTag, &request);
      if (st.ok()) {
        sends.push_back(request);
        peers.push_back(peer);
      }
    }
    for (size_t i = 0; i < sends.size() && st.ok(); ++i) st = group.WaitSend(&sends[i], peers[i]);
    return st;
  }

  int rank_ = 0;
  int tp_ = 1;  // ranks per pipeline stage
  std::vector<MicroBatch> parts_;
  std::vector<std::vector<float>> in_, out_;
  std::shared_ptr<const WeightStore> weights_;
  ModelSessionOptions options_;
  std::unique_ptr<CompiledModel> compiled_;  // until a session takes it
  std::unique_ptr<ModelSession> session_;
  SessionShape shape_;
  DecodedForwardBatch decoded_;
  std::vector<float> logits_;
};

// Receives and runs rank 0's passes until it says stop. A rank whose own
// setup failed still waits for rank 0's word (which failed the same way
// on a bad option), so that the job ends on rank 0's error.
int RunFollower(const EngineOptions& options, MpiCollective& group) {
  // mpirun passes SIGINT and SIGTERM to every rank: rank 0 shuts down as
  // it would alone and then stops the others, which must live until then
  // (mpirun still ends them with SIGKILL if rank 0 never does).
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  const char* kind = options.pipeline_parallel_size > 1 ? "pipeline" : "tensor";
  auto follower = Follower::Create(options, group.rank());
  if (!follower.ok()) KILN_LOG_ERROR("{} parallel rank {}: {}", kind, group.rank(), follower.status().ToString());
  for (;;) {
    int32_t ints[PassMessageHeader::kInts];
    Status st = group.Broadcast(ints, PassMessageHeader::kInts, false);
    if (!st.ok()) {
      KILN_LOG_ERROR("{} parallel rank {}: {}", kind, group.rank(), st.ToString());
      return 1;
    }
    const PassMessageHeader header = PassMessageHeader::FromInts(ints);
    if (header.kind == PassMessageKind::kStop) return follower.ok() ? 0 : 1;
    std::vector<int32_t> payload(static_cast<size_t>(std::max(header.payload_ints, 0)));
    st = group.Broadcast(payload.data(), static_cast<int64_t>(payload.size()), true);
    // Rank 0 runs a pass this rank cannot follow: leave, and mpirun ends
    // the job.
    if (!follower.ok()) return 1;
    if (st.ok()) st = (*follower)->Run(header, std::move(payload), group);
    if (!st.ok()) {
      KILN_LOG_ERROR("{} parallel rank {}: {}", kind, group.rank(), st.ToString());
      return 1;
    }
  }
}

}  // namespace

Expected<TensorParallelStart> StartTensorParallel(EngineOptions* options) {
  const int ranks = options->tensor_parallel_size * options->pipeline_parallel_size;
  if (!StartedByMpirun()) {
    return InvalidArgument(
        "--tensor-parallel-size {} x --pipeline-parallel-size {} runs as {} processes started together: mpirun -np "
        "{} kiln ...",
        options->tensor_parallel_size, options->pipeline_parallel_size, ranks, ranks);
  }
  auto watchdog = std::make_unique<StartupWatchdog>(options->collective_timeout_seconds);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    // The engine's passes may run on another thread than the one that
    // started MPI (kiln serve's), never two at a time.
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      return IoError("tensor parallelism: MPI did not start");
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      return Unsupported("tensor parallelism: this MPI does not allow calls from more than one thread");
    }
  }
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world != ranks) {
    MPI_Finalize();
    return InvalidArgument(
        "--tensor-parallel-size {} x --pipeline-parallel-size {} = {} ranks, but mpirun started {} processes",
        options->tensor_parallel_size, options->pipeline_parallel_size, ranks, world);
  }
  // Threads: the host's cores shared among the ranks on it.
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_ranks = 1;
  MPI_Comm_size(local, &local_ranks);
  MPI_Comm_free(&local);
  if (options->threads == 0) options->threads = std::max(1, GetCpuInfo().physical_cores / local_ranks);

  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  // Both splits: stage s is ranks [s T, (s + 1) T), its all-reduces over
  // a group of its own; the batch's broadcast and the stage-to-stage
  // messages go over the whole job's.
  std::shared_ptr<MpiCollective> stage_group;
  if (options->tensor_parallel_size > 1 && options->pipeline_parallel_size > 1) {
    MPI_Comm stage_comm;
    MPI_Comm_split(comm, rank / options->tensor_parallel_size, rank % options->tensor_parallel_size, &stage_comm);
    stage_group = std::make_shared<MpiCollective>(stage_comm, options->collective_timeout_seconds);
    options->pipeline_stage = rank / options->tensor_parallel_size;
  }
  watchdog.reset();
  auto group = std::make_shared<MpiCollective>(comm, options->collective_timeout_seconds);
  options->collective = stage_group != nullptr ? std::shared_ptr<Collective>(stage_group) : group;
  KILN_LOG_INFO("{} parallel rank {} of {}: {} threads ({} ranks on this host)",
                options->pipeline_parallel_size > 1 ? "pipeline" : "tensor", rank, world, options->threads,
                local_ranks);
  if (rank != 0) {
    TensorParallelStart start;
    start.exit_code = RunFollower(*options, *group);
    const bool stage_failed = stage_group != nullptr && stage_group->failed();
    if (!group->failed() && !stage_failed) (void)group->Barrier();
    if (group->failed() || stage_failed) {
      std::fflush(nullptr);
      std::_Exit(start.exit_code == 0 ? 1 : start.exit_code);
    }
    options->collective.reset();
    MPI_Finalize();
    return start;
  }
  auto payload = std::make_shared<std::vector<int32_t>>();
  MpiCollective* sender = group.get();
  options->before_forward = [sender, payload](const ForwardBatch& batch, const ModelSession& session) {
    SessionShape shape;
    shape.max_batch_tokens = static_cast<int32_t>(session.max_batch_tokens());
    shape.max_seqs = static_cast<int32_t>(session.options().max_seqs);
    shape.max_model_len = static_cast<int32_t>(session.max_model_len());
    shape.block_size = static_cast<int32_t>(session.block_size());
    shape.num_kv_blocks = static_cast<int32_t>(session.num_kv_blocks());
    KILN_ASSIGN_OR_RETURN(PassMessageHeader header, EncodeForwardBatch(batch, shape, payload.get()));
    int32_t ints[PassMessageHeader::kInts];
    header.ToInts(ints);
    KILN_RETURN_IF_ERROR(sender->Broadcast(ints, PassMessageHeader::kInts, true));
    return sender->Broadcast(payload->data(), static_cast<int64_t>(payload->size()), true);
  };
  if (options->pipeline_parallel_size > 1) {
    auto head = std::make_shared<PipelineHead>(sender, options->tensor_parallel_size);
    options->pipeline_run_pass = [head](const ForwardBatch& batch, ModelSession& session, float* logits,
                                        int64_t logits_stride, const DumpFn* dump) {
      return head->Run(batch, session, logits, logits_stride, dump);
    };
  }
  EngineGroup() = group;
  std::atexit(StopGroupAtExit);
  TensorParallelStart start;
  start.runs_engine = true;
  return start;
}

}  // namespace kiln
