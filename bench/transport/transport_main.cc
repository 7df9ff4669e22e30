// kiln_bench_transport: what moving tensors between processes costs, under
// mpirun: ping-pong latency and bandwidth by message size, fp32 all-reduces
// of tensor parallelism's sizes, and KV-block transfers of a prefill/decode
// split. The transport is mpirun's choice (shared memory by default on one
// machine; --mca btl tcp,self for loopback TCP; --mca pml ucx for UCX).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>
#include <CLI/CLI.hpp>

#include "allreduce.h"
#include "core/cpu_info.h"
#include "kv_block_transfer.h"
#include "ping_pong.h"
#include "transport_options.h"
#include "transport_report.h"

namespace {

using kiln::transport::TransportOptions;

// Discards what the ranks other than 0 would print.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

std::string SizesText(const std::vector<int64_t>& values) {
  return fmt::format("{}", fmt::join(values, ","));
}

std::string KvShapesText(const std::vector<kiln::transport::KvShape>& shapes) {
  std::vector<std::string> items;
  for (const auto& s : shapes)
    items.push_back(fmt::format("{}={}x{}x{}", s.name, s.layers, s.kv_heads, s.head_dim));
  return fmt::format("{}", fmt::join(items, ","));
}

// Parses the command line into `options`; on an error or --help, the exit
// code to return (what to print is printed by rank 0 only).
std::optional<int> ParseCommandLine(int argc, char** argv, bool print, TransportOptions* options) {
  *options = kiln::transport::DefaultTransportOptions();
  CLI::App app{
      "Transport costs between MPI ranks: ping-pong, fp32 all-reduce and KV-block transfers (run under "
      "mpirun)"};
  std::string sizes = SizesText(options->message_sizes);
  std::string hidden = SizesText(options->hidden_sizes);
  std::string rows = SizesText(options->rows);
  std::string kv_shapes = KvShapesText(options->kv_shapes);
  app.add_option("--sizes", sizes, "Ping-pong message sizes (1KiB, 4MiB, ...), comma-separated; empty skips")
      ->capture_default_str();
  app.add_option("--hidden", hidden, "All-reduce widths (fp32 values per row), comma-separated; empty skips")
      ->capture_default_str();
  app.add_option("--rows", rows, "All-reduce rows (tokens), comma-separated")->capture_default_str();
  app.add_option("--kv-shapes", kv_shapes,
                 "KV shapes NAME=LAYERSxKV_HEADSxHEAD_DIM, comma-separated; empty skips")
      ->capture_default_str();
  app.add_option("--block-tokens", options->block_tokens, "Tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--kv-dtype-bytes", options->kv_dtype_bytes, "Bytes per KV element")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{8}));
  app.add_option("--stream-blocks", options->stream_blocks, "KV blocks streamed back to back")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--repeats", options->repeats, "Timed repetitions per figure (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--min-repetition-ms", options->min_repetition_ms, "Shortest repetition")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 60000.0));
  app.add_option("--label", options->label, "The transport's name in the output")->capture_default_str();
  app.add_flag("--json", options->json, "One JSON object per line instead of tables");
  app.add_option("--append-json", options->append_json,
                 "Append the JSON lines to this file too (tables stay on stdout)");
  NullBuffer null_buffer;
  std::ostream null_stream(&null_buffer);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return print ? app.exit(e) : app.exit(e, null_stream, null_stream);
  }

  auto fail = [&](const std::string& option, const kiln::Status& status) {
    if (print) fmt::print(stderr, "kiln_bench_transport: {}: {}\n", option, status.message());
    return 2;
  };
  auto message_sizes = kiln::transport::ParseSizeList(sizes);
  if (!message_sizes.ok()) return fail("--sizes", message_sizes.status());
  auto hidden_sizes = kiln::transport::ParseCountList(hidden);
  if (!hidden_sizes.ok()) return fail("--hidden", hidden_sizes.status());
  auto row_counts = kiln::transport::ParseCountList(rows);
  if (!row_counts.ok()) return fail("--rows", row_counts.status());
  auto shapes = kiln::transport::ParseKvShapes(kv_shapes);
  if (!shapes.ok()) return fail("--kv-shapes", shapes.status());
  options->message_sizes = *message_sizes;
  options->hidden_sizes = *hidden_sizes;
  options->rows = *row_counts;
  options->kv_shapes = *shapes;
  for (int64_t h : options->hidden_sizes) {
    for (int64_t r : options->rows) {
      if (h * r > (int64_t{1} << 30)) {
        return fail("--hidden/--rows",
                    kiln::InvalidArgument("{} x {} values is over 2^30 (4 GiB of fp32)", h, r));
      }
    }
  }
  for (const auto& shape : options->kv_shapes) {
    const int64_t bytes =
        kiln::transport::KvBlockBytes(shape, options->block_tokens, options->kv_dtype_bytes);
    if (bytes > (int64_t{1} << 30) || bytes * options->stream_blocks > (int64_t{8} << 30)) {
      return fail("--kv-shapes",
                  kiln::InvalidArgument("{}: blocks of {} bytes, {} of them streamed, is over 1 GiB a "
                                        "block or 8 GiB in all",
                                        shape.name, bytes, options->stream_blocks));
    }
  }
  return std::nullopt;
}

std::string MpiLibrary() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<size_t>(length));
  const size_t comma = text.find(',');  // "Open MPI v4.1.4, package: ..., ident: ..."
  return comma == std::string::npos ? text : text.substr(0, comma);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const bool print = rank == 0;

  TransportOptions options;
  if (auto code = ParseCommandLine(argc, argv, print, &options)) {
    MPI_Finalize();
    return *code;
  }
  if (ranks < 2) {
    if (print)
      fmt::print(stderr, "kiln_bench_transport: needs at least 2 ranks, has {} (run it under mpirun -np 2)\n",
                 ranks);
    MPI_Finalize();
    return 2;
  }

  kiln::transport::RunDescription run{options.label, ranks, MpiLibrary(), kiln::GetCpuInfo().Summary(),
                                      options.repeats};
  std::FILE* json_file = nullptr;
  if (print && !options.append_json.empty()) {
    json_file = std::fopen(options.append_json.c_str(), "a");
    if (json_file == nullptr) {
      fmt::print(stderr, "kiln_bench_transport: --append-json: cannot open '{}' for appending: {}\n",
                 options.append_json, std::strerror(errno));
    }
  }
  int opened = options.append_json.empty() || !print || json_file != nullptr ? 1 : 0;
  MPI_Bcast(&opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!opened) {
    MPI_Finalize();
    return 2;
  }
  auto emit = [&](const nlohmann::ordered_json& record) {
    if (print && options.json) {
      fmt::print("{}\n", record.dump());
      std::fflush(stdout);
    }
    if (json_file != nullptr) {
      fmt::print(json_file, "{}\n", record.dump());
      std::fflush(json_file);
    }
  };
  auto table = [&](const std::string& title, const std::string& text) {
    if (print && !options.json) {
      fmt::print("\n{}\n{}", title, text);
      std::fflush(stdout);
    }
  };
  emit(kiln::transport::ToJson(run));
  if (print && !options.json) {
    fmt::print("{}: {} ranks, {}; {}; median of {} repetitions, min in brackets\n", run.label, ranks,
               run.mpi_library, run.cpu, run.repeats);
  }
  const double min_seconds = options.min_repetition_ms / 1e3;
  bool all_verified = true;

  std::vector<kiln::transport::PingPongResult> pings;
  for (int64_t bytes : options.message_sizes) {
    pings.push_back(kiln::transport::MeasurePingPong(MPI_COMM_WORLD, bytes, options.repeats, min_seconds));
    all_verified = all_verified && pings.back().verified;
    emit(kiln::transport::ToJson(pings.back(), options.label));
  }
  if (!pings.empty())
    table("ping-pong between ranks 0 and 1 (one-way = round trip / 2)", PingPongTable(pings));

  std::vector<kiln::transport::AllreduceResult> reductions;
  for (int64_t hidden : options.hidden_sizes) {
    for (int64_t rows : options.rows) {
      reductions.push_back(
          kiln::transport::MeasureAllreduce(MPI_COMM_WORLD, hidden, rows, options.repeats, min_seconds));
      all_verified = all_verified && reductions.back().verified;
      emit(kiln::transport::ToJson(reductions.back(), options.label));
    }
  }
  if (!reductions.empty()) table("MPI_Allreduce, fp32 sum", AllreduceTable(reductions));

  std::vector<kiln::transport::KvBlockResult> kv;
  for (const auto& shape : options.kv_shapes) {
    kv.push_back(kiln::transport::MeasureKvBlocks(MPI_COMM_WORLD, shape, options));
    all_verified = all_verified && kv.back().one_block.verified && kv.back().stream_verified;
    emit(kiln::transport::ToJson(kv.back(), options.label));
  }
  if (!kv.empty()) {
    table(fmt::format("KV blocks of {} tokens, {} bytes per element, rank 0 to rank 1", options.block_tokens,
                      options.kv_dtype_bytes),
          KvBlockTable(kv));
  }

  if (!all_verified && print)
    fmt::print(stderr, "kiln_bench_transport: some transfers arrived wrong (check column)\n");
  if (json_file != nullptr) std::fclose(json_file);
  MPI_Finalize();
  return all_verified ? 0 : 1;
}
