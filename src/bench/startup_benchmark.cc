// Start-up timing: fresh `kiln generate -n 1` processes, timed from spawn
// to their first byte on stdout and to their exit.
#include "bench/startup_benchmark.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "bench/statistics.h"
#include "bench/text_table.h"

extern char** environ;

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  double first_byte = -1;
  double exit = 0;
  double read_bytes = 0;  // block inputs from its rusage
};

// The files a model path stands for: the file, or a folder's regular files.
std::vector<std::string> ModelFiles(const std::string& model) {
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(model, ec)) {
      if (e.is_regular_file(ec)) files.push_back(e.path().string());
    }
  } else if (std::filesystem::is_regular_file(model, ec)) {
    files.push_back(model);
  }
  return files;
}

// Drops the files' pages from the page cache (clean pages no process maps).
Status DropFromPageCache(const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("cannot open {}: {}", f, std::strerror(errno));
    const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) return IoError("posix_fadvise(DONTNEED) on {}: {}", f, std::strerror(rc));
  }
  return Status::Ok();
}

// Bytes of the files now in the page cache (mincore over a mapping).
double CachedBytes(const std::vector<std::string>& files) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  double bytes = 0;
  for (const std::string& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::error_code ec;
    const size_t size = static_cast<size_t>(std::filesystem::file_size(f, ec));
    void* p = size > 0 && !ec ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (p == MAP_FAILED) continue;
    std::vector<unsigned char> resident((size + page - 1) / page);
    if (::mincore(p, size, resident.data()) == 0) {
      for (unsigned char r : resident) bytes += (r & 1) != 0 ? static_cast<double>(page) : 0.0;
    }
    ::munmap(p, size);
  }
  return bytes;
}

// The line `kiln serve` logs once its model is loaded and it answers.
constexpr std::string_view kServeReady = "ready: http://";

// Times one process: to its first byte on stdout, or with `serve` to the
// line that says it is ready (it is then stopped by SIGTERM), and to its
// exit.
Expected<Run> TimeOneRun(const std::vector<std::string>& argv, bool serve) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return IoError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const Clock::time_point start = Clock::now();
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (spawned != 0) {
    ::close(out[0]);
    ::close(err[0]);
    return IoError("cannot start {}: {}", argv[0], std::strerror(spawned));
  }
  Run run;
  std::string errors;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  char buffer[4096];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) break;
    for (pollfd& f : fds) {
      if (f.fd < 0 || (f.revents & (POLLIN | POLLHUP)) == 0) continue;
      const ssize_t n = ::read(f.fd, buffer, sizeof(buffer));
      if (n <= 0) {
        ::close(f.fd);
        f.fd = -1;
        --open;
        continue;
      }
      if (f.fd == out[0] && run.first_byte < 0 && !serve) {
        run.first_byte = std::chrono::duration<double>(Clock::now() - start).count();
      }
      if (f.fd == err[0]) {
        errors.append(buffer, static_cast<size_t>(n));
        if (serve && run.first_byte < 0 && errors.find(kServeReady) != std::string::npos) {
          run.first_byte = std::chrono::duration<double>(Clock::now() - start).count();
          ::kill(pid, SIGTERM);
        }
      }
    }
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  run.exit = std::chrono::duration<double>(Clock::now() - start).count();
  run.read_bytes = static_cast<double>(usage.ru_inblock) * 512.0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || (serve && run.first_byte < 0)) {
    while (!errors.empty() && errors.back() == '\n') errors.pop_back();
    const size_t line = errors.rfind('\n');
    return Internal("`{}` failed: {}", fmt::join(argv, " "),
                    line == std::string::npos ? errors : errors.substr(line + 1));
  }
  if (run.first_byte < 0) run.first_byte = run.exit;
  return run;
}

std::string Seconds(double s) { return fmt::format("{:.3f}", s); }

}  // namespace

Expected<std::vector<StartupResult>> RunStartupBenchmark(const StartupOptions& o) {
  if (o.models.empty()) return InvalidArgument("no model given (-m, repeatable)");
  if (o.runs < 1) return InvalidArgument("--runs {}: at least 1", o.runs);
  std::vector<StartupResult> results;
  std::vector<std::vector<std::string>> commands;
  for (const std::string& m : o.models) {
    StartupResult r;
    r.model = m;
    std::error_code ec;
    if (std::filesystem::is_regular_file(m, ec)) r.file_bytes = static_cast<double>(std::filesystem::file_size(m, ec));
    results.push_back(std::move(r));
    std::vector<std::string> argv =
        o.serve ? std::vector<std::string>{o.kiln, "serve", "-m", m, "--port", "0", "--no-access-log"}
                : std::vector<std::string>{o.kiln, "generate", "-m", m, "-p", o.prompt, "-n", "1", "--temperature", "0"};
    if (o.threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(o.threads)});
    argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
    commands.push_back(std::move(argv));
  }
  // One untimed run each warms the page cache (unless measuring a cold
  // one); then the models take turns, so that a slow spell of the machine
  // falls on all of them alike.
  if (!o.cold) {
    for (const auto& argv : commands) KILN_RETURN_IF_ERROR(TimeOneRun(argv, o.serve).status());
  }
  for (int i = 0; i < o.runs; ++i) {
    for (size_t m = 0; m < commands.size(); ++m) {
      const std::vector<std::string> files = o.cold ? ModelFiles(o.models[m]) : std::vector<std::string>();
      if (o.cold) {
        KILN_RETURN_IF_ERROR(DropFromPageCache(files));
        results[m].cached_before_max = std::max(results[m].cached_before_max, CachedBytes(files));
      }
      KILN_ASSIGN_OR_RETURN(Run run, TimeOneRun(commands[m], o.serve));
      results[m].first_token.push_back(run.first_byte);
      results[m].exit.push_back(run.exit);
      if (o.cold) {
        results[m].read_bytes.push_back(run.read_bytes);
        results[m].cached_after.push_back(CachedBytes(files));
      }
    }
  }
  return results;
}

std::string StartupTable(const std::vector<StartupResult>& results, bool serve) {
  const bool cold = !results.empty() && !results[0].read_bytes.empty();
  std::vector<std::string> columns = {"model", "file MiB", serve ? "ready (median s)" : "first token (median s)",
                                      "min s", "exit (median s)", "vs first"};
  if (cold) columns.insert(columns.end(), {"read MiB (median)", "cached after MiB", "left cached before MiB"});
  TextTable table(columns);
  const double base = results.empty() ? 0 : Percentile(results[0].first_token, 50);
  auto mib = [](double b) { return fmt::format("{:.1f}", b / (1 << 20)); };
  for (const StartupResult& r : results) {
    const double median = Percentile(r.first_token, 50);
    std::vector<std::string> row = {r.model, r.file_bytes > 0 ? fmt::format("{:.0f}", r.file_bytes / (1 << 20)) : "-",
                                    Seconds(median), Seconds(*std::min_element(r.first_token.begin(), r.first_token.end())),
                                    Seconds(Percentile(r.exit, 50)), base > 0 ? fmt::format("{:.2f}x", median / base) : "-"};
    if (cold) {
      row.insert(row.end(), {mib(Percentile(r.read_bytes, 50)), mib(Percentile(r.cached_after, 50)),
                             mib(r.cached_before_max)});
    }
    table.AddRow(row);
  }
  return table.ToString();
}

}  // namespace kiln::bench
