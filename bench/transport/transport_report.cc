#include "transport_report.h"

#include <fmt/format.h>

#include "bench/statistics.h"
#include "bench/text_table.h"

namespace kiln::transport {
namespace {

// The repetitions' seconds per operation, scaled (to microseconds, or per
// block), summarized.
bench::Summary Scaled(const RepeatedTiming& t, double factor) {
  std::vector<double> values;
  for (double s : t.seconds) values.push_back(s * factor);
  return bench::Summarize(values);
}

double GigabytesPerSecond(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0;
}

std::string Bytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0)
    return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string Micros(const bench::Summary& s) {
  return fmt::format("{:.2f} ({:.2f})", s.median, s.min);
}

// A ring all-reduce moves 2(N-1)/N of the vector through each rank's link:
// the bandwidth the link delivered (NCCL's "bus bandwidth").
double BusFactor(int ranks) {
  return ranks > 0 ? 2.0 * (ranks - 1) / ranks : 0;
}

const char* Check(bool ok) {
  return ok ? "ok" : "WRONG";
}

}  // namespace

nlohmann::ordered_json ToJson(const RunDescription& run) {
  return {{"kind", "run"},  {"label", run.label},    {"ranks", run.ranks}, {"mpi_library", run.mpi_library},
          {"cpu", run.cpu}, {"repeats", run.repeats}};
}

nlohmann::ordered_json ToJson(const PingPongResult& r, const std::string& label) {
  const bench::Summary us = Scaled(r.one_way, 1e6);
  return {{"kind", "ping_pong"},
          {"label", label},
          {"bytes", r.bytes},
          {"operations_per_repetition", r.one_way.operations_per_repetition},
          {"one_way_us", bench::ToJson(us)},
          {"bandwidth_gb_s", GigabytesPerSecond(static_cast<double>(r.bytes), us.median / 1e6)},
          {"verified", r.verified}};
}

nlohmann::ordered_json ToJson(const AllreduceResult& r, const std::string& label) {
  const bench::Summary us = Scaled(r.timing, 1e6);
  const double algorithm = GigabytesPerSecond(static_cast<double>(r.bytes()), us.median / 1e6);
  return {{"kind", "allreduce"},
          {"label", label},
          {"ranks", r.ranks},
          {"hidden", r.hidden},
          {"rows", r.rows},
          {"floats", r.floats()},
          {"bytes", r.bytes()},
          {"operations_per_repetition", r.timing.operations_per_repetition},
          {"time_us", bench::ToJson(us)},
          {"algorithm_gb_s", algorithm},
          {"bus_gb_s", algorithm * BusFactor(r.ranks)},
          {"verified", r.verified},
          {"result_sum", r.result_sum},
          {"result_first", r.result_first}};
}

nlohmann::ordered_json ToJson(const KvBlockResult& r, const std::string& label) {
  const bench::Summary one = Scaled(r.one_block.one_way, 1e6);
  const bench::Summary per_block = Scaled(r.stream, 1e6 / static_cast<double>(r.stream_blocks));
  return {{"kind", "kv_block"},
          {"label", label},
          {"shape", r.shape.name},
          {"layers", r.shape.layers},
          {"kv_heads", r.shape.kv_heads},
          {"head_dim", r.shape.head_dim},
          {"block_tokens", r.block_tokens},
          {"block_bytes", r.block_bytes},
          {"one_block_us", bench::ToJson(one)},
          {"one_block_verified", r.one_block.verified},
          {"stream_blocks", r.stream_blocks},
          {"stream_us_per_block", bench::ToJson(per_block)},
          {"stream_gb_s", GigabytesPerSecond(static_cast<double>(r.block_bytes), per_block.median / 1e6)},
          {"stream_verified", r.stream_verified}};
}

std::string PingPongTable(const std::vector<PingPongResult>& results) {
  bench::TextTable table({"bytes", "one-way us, median (min)", "GB/s", "check"});
  for (const auto& r : results) {
    const bench::Summary us = Scaled(r.one_way, 1e6);
    table.AddRow({Bytes(r.bytes), Micros(us),
                  fmt::format("{:.2f}", GigabytesPerSecond(static_cast<double>(r.bytes), us.median / 1e6)),
                  Check(r.verified)});
  }
  return table.ToString();
}

std::string AllreduceTable(const std::vector<AllreduceResult>& results) {
  bench::TextTable table(
      {"hidden x rows", "bytes", "ranks", "us, median (min)", "alg GB/s", "bus GB/s", "check"});
  for (const auto& r : results) {
    const bench::Summary us = Scaled(r.timing, 1e6);
    const double algorithm = GigabytesPerSecond(static_cast<double>(r.bytes()), us.median / 1e6);
    table.AddRow({fmt::format("{} x {}", r.hidden, r.rows), Bytes(r.bytes()), fmt::format("{}", r.ranks),
                  Micros(us), fmt::format("{:.2f}", algorithm),
                  fmt::format("{:.2f}", algorithm * BusFactor(r.ranks)), Check(r.verified)});
  }
  return table.ToString();
}

std::string KvBlockTable(const std::vector<KvBlockResult>& results) {
  bench::TextTable table({"shape", "block", "one block us, median (min)", "streamed",
                          "us per block, median (min)", "GB/s", "check"});
  for (const auto& r : results) {
    const bench::Summary one = Scaled(r.one_block.one_way, 1e6);
    const bench::Summary per_block = Scaled(r.stream, 1e6 / static_cast<double>(r.stream_blocks));
    table.AddRow({r.shape.name, Bytes(r.block_bytes), Micros(one), fmt::format("{} blocks", r.stream_blocks),
                  Micros(per_block),
                  fmt::format("{:.2f}",
                              GigabytesPerSecond(static_cast<double>(r.block_bytes), per_block.median / 1e6)),
                  Check(r.one_block.verified && r.stream_verified)});
  }
  return table.ToString();
}

}  // namespace kiln::transport
