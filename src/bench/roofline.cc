// Measuring, caching and printing the roofline.
#include "bench/roofline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "backend/cpu/kernels/amx.h"
#include "bench/page_buffer.h"
#include "bench/pinned_threads.h"
#include "bench/roofline_loops.h"
#include "bench/text_table.h"
#include "core/cpu_info.h"
#include "core/mapped_file.h"

namespace kiln::bench {
namespace {

constexpr int kCacheVersion = 1;

// Keeps checksums alive so that the loops are not optimized away.
volatile double g_sink = 0;

double Seconds(const std::function<void()>& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Iterations of `loop` that take about `seconds` on one thread.
int64_t Calibrate(const ComputeLoop& loop, double seconds) {
  int64_t iterations = 1024;
  double t = 0;
  while (true) {
    t = Seconds([&] { g_sink = g_sink + loop.run(iterations); });
    if (t >= 0.02 || iterations >= (int64_t{1} << 40)) break;
    iterations *= 4;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iterations) * seconds / std::max(t, 1e-9)));
}

// How repetitions are taken (RepeatUntilSettled).
constexpr double kSettledSpread = 0.10;
constexpr int kMaxRepetitionFactor = 8;

// The seconds of at least `repetitions` calls of `timed`, and of more, up to
// kMaxRepetitionFactor times as many, until the fastest and slowest are
// within kSettledSpread of each other. On a shared machine rates are noisy
// and often bimodal (a virtual CPU whose physical core another guest is
// using runs at about half speed); more repetitions make it likely that the
// fastest one, the figure reported as the limit, had the core to itself.
std::vector<double> RepeatUntilSettled(int repetitions, const std::function<double()>& timed) {
  std::vector<double> seconds;
  const auto settled = [&] {
    const auto [fastest, slowest] = std::minmax_element(seconds.begin(), seconds.end());
    return *slowest <= *fastest * (1 + kSettledSpread);
  };
  for (int r = 0; r < repetitions * kMaxRepetitionFactor; ++r) {
    if (r >= repetitions && settled()) break;
    seconds.push_back(timed());
  }
  return seconds;
}

ComputeFigure MeasureLoop(const ComputeLoop& loop, int64_t iterations, int threads, int repetitions,
                          const std::vector<int>& cpus, const ContentionSampler& sampler) {
  ComputeFigure f;
  f.name = loop.name;
  f.instructions = loop.instructions;
  f.unit = loop.unit;
  std::vector<double> sums(static_cast<size_t>(threads));
  const ContentionSampler::Point start = sampler.Now();
  const std::vector<double> seconds = RepeatUntilSettled(repetitions, [&] {
    const double t = RunPinned(threads, cpus, [&](int i) { sums[static_cast<size_t>(i)] = loop.run(iterations); });
    for (double s : sums) g_sink = g_sink + s;
    return t;
  });
  f.contention = sampler.Since(start);
  const double ops = loop.ops_per_iteration * static_cast<double>(iterations) * threads;
  f.repetitions = RateSummary(ops, seconds);
  f.per_second = f.repetitions.max;
  return f;
}

// Reads `buffer` on `threads` threads (each its own contiguous slice,
// `passes` times) and returns the seconds taken.
double ReadBuffer(const LoopSet& set, const PageBuffer& buffer, int threads, int passes, const std::vector<int>& cpus) {
  const size_t slice = buffer.bytes() / static_cast<size_t>(threads) / 4096 * 4096;
  std::vector<double> sums(static_cast<size_t>(threads));
  double seconds = RunPinned(threads, cpus, [&](int i) {
    const char* begin = static_cast<const char*>(buffer.data()) + slice * static_cast<size_t>(i);
    double sum = 0;
    for (int p = 0; p < passes; ++p) sum += set.stream_read(begin, slice);
    sums[static_cast<size_t>(i)] = sum;
  });
  for (double s : sums) g_sink = g_sink + s;
  return seconds;
}

Expected<std::vector<BandwidthFigure>> MeasureBandwidth(const RooflineOptions& o, const LoopSet& set,
                                                        const std::vector<int>& thread_counts,
                                                        const std::vector<int>& cpus,
                                                        const ContentionSampler& sampler) {
  std::vector<BandwidthFigure> figures;  // thread-count major, then page mode
  figures.resize(thread_counts.size() * 2);
  const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
  for (PageMode mode : {PageMode::kSmall, PageMode::kHuge}) {
    const int m = mode == PageMode::kSmall ? 0 : 1;
    if (o.on_progress) {
      o.on_progress(fmt::format("read bandwidth, {} pages: mapping and touching {} MiB", PageModeName(mode),
                                o.buffer_bytes >> 20));
    }
    KILN_ASSIGN_OR_RETURN(PageBuffer buffer, PageBuffer::Map(static_cast<size_t>(o.buffer_bytes), mode));
    // First touch from the measuring threads, so pages sit near them.
    const size_t slice = buffer.bytes() / static_cast<size_t>(max_threads);
    RunPinned(max_threads, cpus, [&](int i) {
      std::memset(static_cast<char*>(buffer.data()) + slice * static_cast<size_t>(i), 1,
                  i + 1 == max_threads ? buffer.bytes() - slice * static_cast<size_t>(i) : slice);
    });
    KILN_ASSIGN_OR_RETURN(int64_t huge, buffer.HugeBytes());
    for (size_t t = 0; t < thread_counts.size(); ++t) {
      const int threads = thread_counts[t];
      if (o.on_progress) o.on_progress(fmt::format("{} thread(s): read bandwidth, {} pages", threads, PageModeName(mode)));
      const double once = ReadBuffer(set, buffer, threads, 1, cpus);
      const int passes = std::clamp(static_cast<int>(std::ceil(0.1 / std::max(once, 1e-6))), 1, 1000);
      const size_t read_per_pass = buffer.bytes() / static_cast<size_t>(threads) / 4096 * 4096 * threads;
      const ContentionSampler::Point start = sampler.Now();
      const std::vector<double> seconds =
          RepeatUntilSettled(o.repetitions, [&] { return ReadBuffer(set, buffer, threads, passes, cpus); });
      BandwidthFigure& f = figures[t * 2 + static_cast<size_t>(m)];
      f.contention = sampler.Since(start);
      f.pages = PageModeName(mode);
      f.buffer_bytes = static_cast<int64_t>(buffer.bytes());
      f.huge_page_bytes = huge;
      f.repetitions = RateSummary(static_cast<double>(read_per_pass) * passes, seconds);
      f.bytes_per_s = f.repetitions.max;
    }
  }
  return figures;
}

nlohmann::ordered_json ComputeJson(const ComputeFigure& f) {
  nlohmann::ordered_json j;
  j["name"] = f.name;
  j["unit"] = f.unit;
  j["supported"] = f.supported;
  if (!f.supported) {
    j["note"] = f.note;
    return j;
  }
  j["instructions"] = f.instructions;
  j["per_second"] = f.per_second;
  j["repetitions"] = ToJson(f.repetitions);
  j["contention"] = f.contention.ToJson();
  return j;
}

nlohmann::ordered_json BandwidthJson(const BandwidthFigure& f) {
  nlohmann::ordered_json j;
  j["pages"] = f.pages;
  j["bytes_per_s"] = f.bytes_per_s;
  j["buffer_bytes"] = f.buffer_bytes;
  j["huge_page_bytes"] = f.huge_page_bytes;
  j["repetitions"] = ToJson(f.repetitions);
  j["contention"] = f.contention.ToJson();
  return j;
}

std::string Cell(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

double Number(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

std::string Bytes(double bytes) {
  if (bytes >= 1 << 30) return fmt::format("{:.1f} GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt::format("{:.0f} MiB", bytes / (1 << 20));
  return fmt::format("{:.0f} KiB", bytes / 1024);
}

}  // namespace

const ComputeFigure* RooflineRow::Find(const std::string& name) const {
  for (const ComputeFigure& f : compute) {
    if (f.name == name && f.supported) return &f;
  }
  return nullptr;
}

const BandwidthFigure* RooflineRow::BestBandwidth() const {
  const BandwidthFigure* best = nullptr;
  for (const BandwidthFigure& b : bandwidth) {
    if (best == nullptr || b.bytes_per_s > best->bytes_per_s) best = &b;
  }
  return best;
}

const RooflineRow* Roofline::AtThreads(int threads) const {
  for (const RooflineRow& r : rows) {
    if (r.threads == threads) return &r;
  }
  return nullptr;
}

nlohmann::ordered_json Roofline::ToJson() const {
  nlohmann::ordered_json j;
  j["cpu_model"] = cpu_model;
  j["isa"] = isa;
  j["cpu"] = cpu_summary;
  j["transparent_hugepage"] = thp_setting;
  j["stream_instructions"] = stream_instructions;
  j["measured_at"] = measured_at;
  j["repetitions"] = repetitions;
  j["rows"] = nlohmann::ordered_json::array();
  for (const RooflineRow& r : rows) {
    nlohmann::ordered_json row;
    row["threads"] = r.threads;
    row["compute"] = nlohmann::ordered_json::array();
    for (const ComputeFigure& f : r.compute) row["compute"].push_back(ComputeJson(f));
    row["bandwidth"] = nlohmann::ordered_json::array();
    for (const BandwidthFigure& b : r.bandwidth) row["bandwidth"].push_back(BandwidthJson(b));
    j["rows"].push_back(std::move(row));
  }
  return j;
}

Expected<Roofline> Roofline::FromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("rows") || !j["rows"].is_array()) {
    return Corrupt("roofline: expected an object with a \"rows\" array");
  }
  Roofline r;
  r.cpu_model = Cell(j, "cpu_model");
  r.isa = Cell(j, "isa");
  r.cpu_summary = Cell(j, "cpu");
  r.thp_setting = Cell(j, "transparent_hugepage");
  r.stream_instructions = Cell(j, "stream_instructions");
  r.measured_at = Cell(j, "measured_at");
  r.repetitions = static_cast<int>(Number(j, "repetitions"));
  for (const nlohmann::json& row : j["rows"]) {
    if (!row.is_object() || !row.contains("threads") || !row["threads"].is_number_integer()) {
      return Corrupt("roofline: a row without an integer \"threads\"");
    }
    RooflineRow out;
    out.threads = row["threads"].get<int>();
    if (row.contains("compute") && row["compute"].is_array()) {
      for (const nlohmann::json& c : row["compute"]) {
        if (!c.is_object()) return Corrupt("roofline: a compute figure that is not an object");
        ComputeFigure f;
        f.name = Cell(c, "name");
        f.unit = Cell(c, "unit");
        f.supported = !c.contains("supported") || !c["supported"].is_boolean() || c["supported"].get<bool>();
        f.note = Cell(c, "note");
        f.instructions = Cell(c, "instructions");
        f.per_second = Number(c, "per_second");
        if (c.contains("repetitions")) f.repetitions = SummaryFromJson(c["repetitions"]);
        if (c.contains("contention")) f.contention = ContentionReading::FromJson(c["contention"]);
        if (f.name.empty()) return Corrupt("roofline: a compute figure without a name");
        out.compute.push_back(std::move(f));
      }
    }
    if (row.contains("bandwidth") && row["bandwidth"].is_array()) {
      for (const nlohmann::json& b : row["bandwidth"]) {
        if (!b.is_object()) return Corrupt("roofline: a bandwidth figure that is not an object");
        BandwidthFigure f;
        f.pages = Cell(b, "pages");
        f.bytes_per_s = Number(b, "bytes_per_s");
        f.buffer_bytes = static_cast<int64_t>(Number(b, "buffer_bytes"));
        f.huge_page_bytes = static_cast<int64_t>(Number(b, "huge_page_bytes"));
        if (b.contains("repetitions")) f.repetitions = SummaryFromJson(b["repetitions"]);
        if (b.contains("contention")) f.contention = ContentionReading::FromJson(b["contention"]);
        out.bandwidth.push_back(std::move(f));
      }
    }
    r.rows.push_back(std::move(out));
  }
  return r;
}

Expected<Roofline> MeasureRoofline(const RooflineOptions& o) {
  const CpuInfo& cpu = GetCpuInfo();
  std::vector<int> cpus = OneCpuPerCore();
  std::vector<int> thread_counts = o.thread_counts;
  if (thread_counts.empty()) {
    for (int t = 1; t <= std::max(1, cpu.physical_cores); ++t) thread_counts.push_back(t);
  }
  for (int t : thread_counts) {
    if (t < 1 || t > 4096) return InvalidArgument("roofline: thread count {} outside [1, 4096]", t);
  }
  if (o.repetitions < 1 || o.repetitions > 1000) {
    return InvalidArgument("roofline: repetitions {} outside [1, 1000]", o.repetitions);
  }
  if (!(o.seconds_per_repetition > 0) || o.seconds_per_repetition > 60) {
    return InvalidArgument("roofline: seconds per repetition {} outside (0, 60]", o.seconds_per_repetition);
  }
  if (o.measure_bandwidth && (o.buffer_bytes < (int64_t{4} << 20) || o.buffer_bytes > (int64_t{1} << 40))) {
    return InvalidArgument("roofline: buffer of {} bytes outside [4 MiB, 1 TiB]", o.buffer_bytes);
  }

  Roofline r;
  r.cpu_model = cpu.model_name.empty() ? cpu.vendor : cpu.model_name;
  r.isa = RooflineIsaLevel();
  r.cpu_summary = cpu.Summary();
  r.thp_setting = TransparentHugePageSetting();
  r.measured_at = UtcNow();
  r.repetitions = o.repetitions;
  const LoopSet set = LoopsForThisCpu();
  r.stream_instructions = set.stream_instructions;
  ContentionSampler sampler;

  std::vector<int64_t> iterations;
  for (const ComputeLoop& loop : set.loops) {
    if (o.on_progress) o.on_progress(fmt::format("calibrating {}", loop.name));
    iterations.push_back(Calibrate(loop, o.seconds_per_repetition));
  }
  for (int threads : thread_counts) {
    RooflineRow row;
    row.threads = threads;
    for (size_t i = 0; i < set.loops.size(); ++i) {
      if (o.on_progress) o.on_progress(fmt::format("{} thread(s): {}", threads, set.loops[i].name));
      row.compute.push_back(MeasureLoop(set.loops[i], iterations[i], threads, o.repetitions, cpus, sampler));
    }
    for (const UnsupportedLoop& u : set.unsupported) {
      ComputeFigure f;
      f.name = u.name;
      f.unit = u.unit;
      f.supported = false;
      f.note = u.reason;
      row.compute.push_back(std::move(f));
    }
    r.rows.push_back(std::move(row));
  }
  if (o.measure_bandwidth) {
    KILN_ASSIGN_OR_RETURN(std::vector<BandwidthFigure> bandwidth,
                          MeasureBandwidth(o, set, thread_counts, cpus, sampler));
    for (size_t t = 0; t < r.rows.size(); ++t) {
      r.rows[t].bandwidth = {bandwidth[2 * t], bandwidth[2 * t + 1]};
    }
  }
  return r;
}

const char* WeightArithmeticName(WeightArithmetic a) {
  switch (a) {
    case WeightArithmetic::kFp32: return "fp32";
    case WeightArithmetic::kBf16: return "bf16";
    case WeightArithmetic::kF16: return "f16";
    case WeightArithmetic::kInt8: return "int8";
  }
  return "fp32";
}

namespace {

// A unit that can do a weight type's arithmetic: the roofline figure that
// measures it, and what it is.
struct PeakCandidate {
  const char* figure;
  const char* unit;
};

// Every unit that can multiply `arithmetic`'s weights with the products
// that type defines (bf16 and f16 products are exact in fp32, so the fp32
// FMA units do bf16 and f16 math once the weights are widened; AVX512-FP16
// rounds its products to f16 and is not among them), fastest first where
// that is known.
std::vector<PeakCandidate> UnitsFor(WeightArithmetic arithmetic) {
  switch (arithmetic) {
    case WeightArithmetic::kBf16:
      return {{"amx_bf16", "the AMX tiles (tdpbf16ps)"},
              {"bf16_dot", "the bf16 dot product (vdpbf16ps)"},
              {"fp32_fma", "the fp32 FMA units on widened bf16"}};
    case WeightArithmetic::kF16:
      return {{"fp32_fma", "the fp32 FMA units on widened f16"}};
    case WeightArithmetic::kInt8:
      return {{"amx_int8", "the AMX tiles (tdpbssd)"},
              {"int8_dot", "the int8 dot product (vpdpbusd)"},
              {"int8_madd", "vpmaddubsw + vpmaddwd (no int8 dot product on this CPU)"}};
    case WeightArithmetic::kFp32:
      break;
  }
  return {{"fp32_fma", "the fp32 FMA units"}};
}

}  // namespace

PeakChoice ComputePeak(const RooflineRow& row, WeightArithmetic arithmetic) {
  // The honest limit is the fastest unit on the chip that can do the
  // math, whether or not kiln's kernels use it: a fraction against a
  // slower unit (vdpbf16ps where the tiles do 30x more) overstates them.
  PeakChoice c;
  std::vector<std::string> others;
  for (const PeakCandidate& unit : UnitsFor(arithmetic)) {
    const ComputeFigure* f = row.Find(unit.figure);
    if (f == nullptr) continue;
    if (f->per_second > c.per_second) {
      if (!c.figure.empty()) others.push_back(c.figure);
      c.per_second = f->per_second;
      c.figure = fmt::format("{} at {} thread(s)", unit.figure, row.threads);
      c.reason = fmt::format("the fastest unit here that does {} arithmetic: {}", WeightArithmeticName(arithmetic),
                             unit.unit);
    } else {
      others.push_back(fmt::format("{} at {} thread(s)", unit.figure, row.threads));
    }
  }
  if (!others.empty()) c.reason += fmt::format(" (faster than {})", fmt::join(others, ", "));
  return c;
}

PeakChoice BandwidthPeak(const RooflineRow& row) {
  PeakChoice c;
  if (const BandwidthFigure* b = row.BestBandwidth()) {
    c.per_second = b->bytes_per_s;
    c.figure = fmt::format("streaming read with {} pages at {} thread(s)", b->pages, row.threads);
    c.reason = "the better of the 4 KiB and huge-page reads";
  }
  return c;
}

std::string RooflineIsaLevel() {
  const CpuInfo& cpu = GetCpuInfo();
  std::string level = cpu.BestIsa();
  if (level == "avx512") {
    if (cpu.avx512_vnni) level += "+vnni";
    if (cpu.avx512_bf16) level += "+bf16";
  }
  if (level == "avx2" && cpu.avx_vnni) level += "+avx-vnni";
  if (cpu.BestIsa() == "avx512" && (cpu::AmxInt8Usable() || cpu::AmxBf16Usable())) level += "+amx";
  return level;
}

std::string DefaultRooflineCachePath() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] != '\0') {
    return std::string(xdg) + "/kiln/roofline.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return std::string(home) + "/.cache/kiln/roofline.json";
  }
  return "roofline.json";
}

Status SaveRooflineCache(const std::string& path, const Roofline& roofline) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  if (auto text = ReadFileToString(path); text.ok()) {
    // A cache that cannot be read is replaced: it only saves time.
    nlohmann::ordered_json old = nlohmann::ordered_json::parse(*text, nullptr, false);
    if (old.is_object() && old.contains("entries") && old["entries"].is_array()) {
      for (const auto& e : old["entries"]) {
        auto entry = Roofline::FromJson(e);
        if (!entry.ok() || entry->rows.size() != 1) continue;
        if (entry->cpu_model == roofline.cpu_model && entry->isa == roofline.isa &&
            roofline.AtThreads(entry->rows[0].threads) != nullptr) {
          continue;
        }
        entries.push_back(e);
      }
    }
  }
  for (const RooflineRow& row : roofline.rows) {
    Roofline one = roofline;
    one.rows = {row};
    entries.push_back(one.ToJson());
  }
  nlohmann::ordered_json file;
  file["kiln_roofline_cache"] = kCacheVersion;
  file["entries"] = std::move(entries);

  std::error_code ec;
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  const std::string temp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!out) return IoError("{}: cannot write: {}", temp, std::strerror(errno));
    out << file.dump(2) << "\n";
    if (!out.flush()) return IoError("{}: write failed", temp);
  }
  std::filesystem::rename(temp, target, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return IoError("{}: cannot replace: {}", path, ec.message());
  }
  return Status::Ok();
}

Expected<Roofline> LoadRooflineCache(const std::string& path, int threads) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return NotFound("{}: no roofline cache", path);
  nlohmann::json file = nlohmann::json::parse(*text, nullptr, false);
  if (!file.is_object() || !file.contains("entries") || !file["entries"].is_array()) {
    return Corrupt("{}: not a roofline cache (no \"entries\" array)", path);
  }
  const CpuInfo& cpu = GetCpuInfo();
  const std::string model = cpu.model_name.empty() ? cpu.vendor : cpu.model_name;
  for (const nlohmann::json& e : file["entries"]) {
    auto entry = Roofline::FromJson(e);
    if (!entry.ok()) return entry.status().WithContext(path);
    if (entry->cpu_model != model || entry->isa != RooflineIsaLevel() || entry->rows.size() != 1 ||
        entry->rows[0].threads != threads) {
      continue;
    }
    return entry;
  }
  return NotFound("{}: no entry for {} ({}) at {} thread(s)", path, model, RooflineIsaLevel(), threads);
}

Expected<Roofline> LoadOrMeasureRoofline(const std::string& cache_path, int threads,
                                         const std::function<void(const std::string&)>& on_progress) {
  auto cached = LoadRooflineCache(cache_path, threads);
  if (cached.ok()) return cached;
  if (on_progress) {
    on_progress(fmt::format("{}; measuring the roofline at {} thread(s) (`kiln bench roofline` measures all)",
                            cached.status().message(), threads));
  }
  return MeasureAndCacheRoofline(cache_path, ShortRooflineOptions(threads, on_progress));
}

RooflineOptions ShortRooflineOptions(int threads,
                                     const std::function<void(const std::string&)>& on_progress) {
  RooflineOptions o;
  o.thread_counts = {threads};
  o.repetitions = 3;
  o.seconds_per_repetition = 0.1;
  o.on_progress = on_progress;
  return o;
}

Expected<Roofline> MeasureAndCacheRoofline(const std::string& cache_path, const RooflineOptions& o) {
  KILN_ASSIGN_OR_RETURN(Roofline measured, MeasureRoofline(o));
  Status saved = SaveRooflineCache(cache_path, measured);
  if (!saved.ok() && o.on_progress) o.on_progress(fmt::format("not cached: {}", saved.ToString()));
  return measured;
}

std::string FormatRate(double per_second, const std::string& unit) {
  if (unit == "B/s") {
    if (per_second >= 1e9) return fmt::format("{:.2f} GB/s", per_second / 1e9);
    return fmt::format("{:.1f} MB/s", per_second / 1e6);
  }
  if (per_second >= 1e12) return fmt::format("{:.2f} T{}", per_second / 1e12, unit);
  if (per_second >= 1e9) return fmt::format("{:.1f} G{}", per_second / 1e9, unit);
  if (per_second >= 1e6) return fmt::format("{:.1f} M{}", per_second / 1e6, unit);
  return fmt::format("{:.0f} {}", per_second, unit);
}

std::string FormatRooflineTable(const Roofline& r) {
  std::string out = fmt::format(
      "Roofline of {} ({}), measured {}; each figure is its fastest repetition of at least {} (repeated, up to "
      "{}x as many, until slowest and fastest are within {:.0f}%)\n",
      r.cpu_model, r.cpu_summary, r.measured_at, r.repetitions, kMaxRepetitionFactor, 100 * kSettledSpread);
  out += fmt::format("transparent huge pages: {}; GB/s are 10^9 bytes per second\n\n", r.thp_setting);
  TextTable table({"threads", "figure", "peak (fastest)", "median", "slowest", "runs", "how", "note"},
                  {TextTable::Align::kRight, TextTable::Align::kLeft, TextTable::Align::kRight,
                   TextTable::Align::kRight, TextTable::Align::kRight, TextTable::Align::kRight,
                   TextTable::Align::kLeft, TextTable::Align::kLeft});
  for (const RooflineRow& row : r.rows) {
    for (const ComputeFigure& f : row.compute) {
      if (!f.supported) {
        table.AddRow({std::to_string(row.threads), f.name, "-", "-", "-", "-", f.note, ""});
        continue;
      }
      table.AddRow({std::to_string(row.threads), f.name, FormatRate(f.per_second, f.unit),
                    FormatRate(f.repetitions.median, f.unit), FormatRate(f.repetitions.min, f.unit),
                    std::to_string(f.repetitions.count), f.instructions,
                    f.contention.Mark()});
    }
    for (const BandwidthFigure& b : row.bandwidth) {
      table.AddRow({std::to_string(row.threads), fmt::format("read_{}", b.pages), FormatRate(b.bytes_per_s, "B/s"),
                    FormatRate(b.repetitions.median, "B/s"), FormatRate(b.repetitions.min, "B/s"),
                    std::to_string(b.repetitions.count),
                    fmt::format("{} buffer, {} of it in huge pages; {}", Bytes(static_cast<double>(b.buffer_bytes)),
                                Bytes(static_cast<double>(b.huge_page_bytes)), r.stream_instructions),
                    b.contention.Mark()});
    }
  }
  out += table.ToString();
  if (!r.rows.empty()) {
    const RooflineRow& last = r.rows.back();
    out += fmt::format("\nPeaks the other modes compare with (at {} thread(s)):\n", last.threads);
    for (WeightArithmetic a : {WeightArithmetic::kFp32, WeightArithmetic::kBf16, WeightArithmetic::kF16,
                               WeightArithmetic::kInt8}) {
      PeakChoice c = ComputePeak(last, a);
      if (c.figure.empty()) continue;
      out += fmt::format("  {} weights: {} = {} ({})\n", WeightArithmeticName(a), c.figure,
                         FormatRate(c.per_second, a == WeightArithmetic::kInt8 ? "OP/s" : "FLOP/s"), c.reason);
    }
    PeakChoice bw = BandwidthPeak(last);
    if (!bw.figure.empty()) {
      out += fmt::format("  bandwidth: {} = {}\n", bw.figure, FormatRate(bw.per_second, "B/s"));
    }
  }
  return out;
}

}  // namespace kiln::bench
