// Starting the group, rank 0's side of each pass (send the batch), the
// other ranks' follower loop (receive, run, repeat), and the stop at exit.
#include "parallel/tensor_parallel.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
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
  if (group->failed() || !group->Broadcast(stop, PassMessageHeader::kInts, true).ok() || !group->Barrier().ok()) {
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

// A follower's model, compiled before the first pass; its KV cache comes
// with the first pass, which says how many blocks rank 0 has.
struct FollowerModel {
  std::shared_ptr<const WeightStore> weights;
  ModelSessionOptions options;
  std::unique_ptr<CompiledModel> model;
};

Expected<FollowerModel> PrepareFollower(const EngineOptions& options) {
  KILN_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options));
  FollowerModel f;
  f.weights = loaded.weights;
  KILN_ASSIGN_OR_RETURN(f.options, SessionOptionsFor(options, loaded));
  f.options.before_forward = nullptr;  // rank 0's alone
  KILN_ASSIGN_OR_RETURN(f.model, CompileForSession(*f.weights, f.options));
  return f;
}

// Receives and runs rank 0's passes until it says stop. A rank whose own
// setup failed still waits for rank 0's word (which failed the same way
// on a bad option), so that the job ends on rank 0's error.
int RunFollower(const EngineOptions& options, MpiCollective& group) {
  // mpirun passes SIGINT and SIGTERM to every rank: rank 0 shuts down as
  // it would alone and then stops the others, which must live until then
  // (mpirun still ends them with SIGKILL if rank 0 never does).
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  Expected<FollowerModel> prepared = PrepareFollower(options);
  const Status setup = prepared.ok() ? Status::Ok() : prepared.status();
  FollowerModel empty;
  FollowerModel& f = prepared.ok() ? *prepared : empty;
  ModelSessionOptions& session_options = f.options;
  std::unique_ptr<CompiledModel>& model = f.model;
  const std::shared_ptr<const WeightStore>& weights = f.weights;
  const int64_t vocab = weights != nullptr ? weights->config().vocab_size : 0;
  if (!setup.ok()) KILN_LOG_ERROR("tensor parallel rank {}: {}", group.rank(), setup.ToString());

  std::unique_ptr<ModelSession> session;
  std::vector<float> logits;
  DecodedForwardBatch decoded;
  for (;;) {
    int32_t ints[PassMessageHeader::kInts];
    Status st = group.Broadcast(ints, PassMessageHeader::kInts, false);
    if (!st.ok()) {
      KILN_LOG_ERROR("tensor parallel rank {}: {}", group.rank(), st.ToString());
      return 1;
    }
    const PassMessageHeader header = PassMessageHeader::FromInts(ints);
    if (header.kind == PassMessageKind::kStop) return setup.ok() ? 0 : 1;
    std::vector<int32_t> payload(static_cast<size_t>(std::max(header.payload_ints, 0)));
    st = group.Broadcast(payload.data(), static_cast<int64_t>(payload.size()), true);
    if (st.ok() && setup.ok()) {
      if (session == nullptr) {
        // Blocks as rank 0's, sized to this rank's share of the heads.
        session_options.kv_num_blocks = header.num_kv_blocks;
        auto created = ModelSession::Create(std::move(model), session_options);
        if (created.ok()) {
          session = std::move(created).value();
          KILN_LOG_INFO("tensor parallel rank {}: {} MiB of weights, {} KV blocks of {} tokens ({} MiB)", group.rank(),
                        weights->TotalBytes() >> 20, session->num_kv_blocks(), session->block_size(),
                        (session->num_kv_blocks() * session->kv_cache().layout().BlockBytes()) >> 20);
        } else {
          st = created.status();
        }
      } else if (header.num_kv_blocks != session->num_kv_blocks()) {
        st = Internal("rank 0 has {} KV blocks, this rank {}", header.num_kv_blocks, session->num_kv_blocks());
      }
    }
    if (st.ok() && setup.ok()) {
      st = DecodeForwardBatch(header, std::move(payload), session->block_size(), &decoded);
    }
    if (st.ok() && setup.ok()) {
      logits.resize(static_cast<size_t>(std::max<int64_t>(header.num_output_rows, 1) * vocab));
      st = session->Forward(decoded.batch, logits.data(), vocab);
    }
    if (!st.ok() || !setup.ok()) {
      // Rank 0 runs a pass this rank cannot follow: leave, and mpirun ends
      // the job.
      if (!st.ok()) KILN_LOG_ERROR("tensor parallel rank {}: {}", group.rank(), st.ToString());
      return 1;
    }
  }
}

}  // namespace

Expected<TensorParallelStart> StartTensorParallel(EngineOptions* options) {
  const int ranks = options->tensor_parallel_size * options->pipeline_parallel_size;
  if (!StartedByMpirun()) {
    return InvalidArgument("--tensor-parallel-size {} runs as {} processes started together: mpirun -np {} kiln ...",
                           options->tensor_parallel_size, ranks, ranks);
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
  watchdog.reset();
  auto group = std::make_shared<MpiCollective>(comm, options->collective_timeout_seconds);
  options->collective = group;
  KILN_LOG_INFO("tensor parallel rank {} of {}: {} threads ({} ranks on this host)", rank, world, options->threads,
                local_ranks);
  if (rank != 0) {
    TensorParallelStart start;
    start.exit_code = RunFollower(*options, *group);
    if (!group->failed()) (void)group->Barrier();
    if (group->failed()) {
      std::fflush(nullptr);
      std::_Exit(start.exit_code == 0 ? 1 : start.exit_code);
    }
    options->collective.reset();
    MPI_Finalize();
    return start;
  }
  const int64_t block_size = options->block_size;
  auto payload = std::make_shared<std::vector<int32_t>>();
  MpiCollective* sender = group.get();
  options->before_forward = [sender, payload, block_size](const ForwardBatch& batch, int64_t num_kv_blocks) {
    KILN_ASSIGN_OR_RETURN(PassMessageHeader header, EncodeForwardBatch(batch, block_size, num_kv_blocks, payload.get()));
    int32_t ints[PassMessageHeader::kInts];
    header.ToInts(ints);
    KILN_RETURN_IF_ERROR(sender->Broadcast(ints, PassMessageHeader::kInts, true));
    return sender->Broadcast(payload->data(), static_cast<int64_t>(payload->size()), true);
  };
  EngineGroup() = group;
  std::atexit(StopGroupAtExit);
  TensorParallelStart start;
  start.runs_engine = true;
  return start;
}

}  // namespace kiln
