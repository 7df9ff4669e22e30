// `kiln quantize MODEL OUTPUT --type TYPE`: a Hugging Face folder or a GGUF
// file to a GGUF file of another type, with llama.cpp's mixed policy.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cli/commands.h"
#include "quantize/quantize_model.h"
#include "quantize/quantize_progress.h"

namespace kiln::cli {
namespace {

struct QuantizeFlags {
  std::string model;
  std::string output;
  std::string type;
  int threads = 0;
  bool no_progress = false;
};

// Draws the progress bar on stderr: redrawn in place on a terminal, a new
// line every tenth of the way otherwise (logs stay short).
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), terminal_(::isatty(STDERR_FILENO) != 0) {}

  void Update(const QuantizeProgress& p) {
    if (!enabled_) return;
    const bool finished = p.tensors_done >= p.tensors_total;
    if (terminal_) {
      auto now = std::chrono::steady_clock::now();
      if (!finished && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      fmt::print(stderr, "\r{}\033[K", QuantizeProgressLine(p));
      if (finished) fmt::print(stderr, "\n");
      drawn_ = !finished;
      return;
    }
    int tenth = p.bytes_total > 0 ? static_cast<int>(10 * p.bytes_done / p.bytes_total) : 10;
    if (tenth <= last_tenth_ && !finished) return;
    last_tenth_ = tenth;
    fmt::print(stderr, "{}\n", QuantizeProgressLine(p));
  }

  // A message on a line of its own, not inside the bar.
  void Notice(const std::string& text) {
    if (terminal_ && drawn_) fmt::print(stderr, "\r\033[K");
    fmt::print(stderr, "kiln quantize: {}\n", text);
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool terminal_;
  bool drawn_ = false;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
};

// "24 q4_k, 5 q6_k, 17 f32".
std::string TypeCounts(const QuantizedModel& model) {
  std::map<std::string, int> counts;
  for (const QuantizedTensor& t : model.tensors) ++counts[DTypeName(t.dtype)];
  std::string out;
  for (const auto& [name, count] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", count, name);
  return out;
}

int Run(const QuantizeFlags& flags) {
  auto type = ParseQuantFileType(flags.type);
  if (!type) {
    fmt::print(stderr, "kiln quantize: --type {}: not a type kiln writes ({})\n", flags.type, QuantFileTypeNames());
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::exists(flags.output, ec) && std::filesystem::equivalent(flags.model, flags.output, ec)) {
    fmt::print(stderr, "kiln quantize: {}: the output would replace the model being read\n", flags.output);
    return 2;
  }

  // The file is written beside the output at the end; a folder that cannot
  // take it should fail now, not after the whole model is converted.
  if (std::filesystem::is_directory(flags.output, ec)) {
    fmt::print(stderr, "kiln quantize: {}: is a folder; give the path of the .gguf file to write\n", flags.output);
    return 2;
  }
  std::filesystem::path parent = std::filesystem::path(flags.output).parent_path();
  if (parent.empty()) parent = ".";
  if (!std::filesystem::is_directory(parent, ec)) {
    fmt::print(stderr, "kiln quantize: {}: the folder {} does not exist\n", flags.output, parent.string());
    return 1;
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    fmt::print(stderr, "kiln quantize: {}: cannot write in the folder {}: {}\n", flags.output, parent.string(),
               std::strerror(errno));
    return 1;
  }

  ProgressBar bar(!flags.no_progress);
  QuantizeOptions options;
  options.type = *type;
  options.threads = flags.threads;
  options.on_progress = [&bar](const QuantizeProgress& p) { bar.Update(p); };
  options.on_notice = [&bar](const std::string& text) { bar.Notice(text); };
  auto start = std::chrono::steady_clock::now();
  auto model = QuantizeModel(flags.model, options);
  if (!model.ok()) {
    fmt::print(stderr, "kiln quantize: {}\n", model.status().ToString());
    return 1;
  }
  Status written = WriteQuantizedGguf(*model, flags.output);
  if (!written.ok()) {
    fmt::print(stderr, "kiln quantize: {}\n", written.ToString());
    return 1;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("wrote {}: {}, {} tensors ({}), {:.2f} MiB, {} fallback{}, {:.1f} s\n", flags.output,
             QuantFileTypeName(*type), model->tensors.size(), TypeCounts(*model),
             static_cast<double>(model->TensorBytes()) / (1024.0 * 1024.0), model->fallbacks,
             model->fallbacks == 1 ? "" : "s", seconds);
  return 0;
}

}  // namespace

void RegisterQuantize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "Write a model as a GGUF file of another type (llama.cpp's mixed policy for the _m types)");
  auto flags = std::make_shared<QuantizeFlags>();
  cmd->add_option("model", flags->model, "A Hugging Face folder or a .gguf file")->required();
  cmd->add_option("output", flags->output, "The .gguf file to write (atomically)")->required();
  cmd->add_option("--type", flags->type, "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, iq4_nl, iq4_xs, bf16, f16 or f32")
      ->required();
  cmd->add_option("--threads", flags->threads, "Threads to quantize with (0: one per physical core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-progress", flags->no_progress, "Do not draw the progress bar");
  cmd->callback([flags]() { SetExitCode(Run(*flags)); });
}

}  // namespace kiln::cli
