// kiln_bench_transport's output: aligned tables for people, or one JSON
// object per line (--json) for scripts and the test that checks the figures.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "allreduce.h"
#include "kv_block_transfer.h"
#include "ping_pong.h"

namespace kiln::transport {

// What the run was: the transport's label, ranks, MPI library, CPU.
struct RunDescription {
  std::string label;
  int ranks = 0;
  std::string mpi_library;
  std::string cpu;
  int repeats = 0;
};

nlohmann::ordered_json ToJson(const RunDescription& run);
nlohmann::ordered_json ToJson(const PingPongResult& r, const std::string& label);
nlohmann::ordered_json ToJson(const AllreduceResult& r, const std::string& label);
nlohmann::ordered_json ToJson(const KvBlockResult& r, const std::string& label);

std::string PingPongTable(const std::vector<PingPongResult>& results);
std::string AllreduceTable(const std::vector<AllreduceResult>& results);
std::string KvBlockTable(const std::vector<KvBlockResult>& results);

}  // namespace kiln::transport
