// Start-up timing: fresh `kiln generate -n 1` processes, timed from spawn
// to their first byte on stdout and to their exit.
#include "bench/startup_benchmark.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

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
};

Expected<Run> TimeOneRun(const std::vector<std::string>& argv) {
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
      if (f.fd == out[0] && run.first_byte < 0) {
        run.first_byte = std::chrono::duration<double>(Clock::now() - start).count();
      }
      if (f.fd == err[0]) errors.append(buffer, static_cast<size_t>(n));
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit = std::chrono::duration<double>(Clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
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
    std::vector<std::string> argv = {o.kiln, "generate", "-m", m, "-p", o.prompt, "-n", "1", "--temperature", "0"};
    if (o.threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(o.threads)});
    argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
    commands.push_back(std::move(argv));
  }
  // One untimed run each warms the page cache; then the models take turns,
  // so that a slow spell of the machine falls on all of them alike.
  for (const auto& argv : commands) KILN_RETURN_IF_ERROR(TimeOneRun(argv).status());
  for (int i = 0; i < o.runs; ++i) {
    for (size_t m = 0; m < commands.size(); ++m) {
      KILN_ASSIGN_OR_RETURN(Run run, TimeOneRun(commands[m]));
      results[m].first_token.push_back(run.first_byte);
      results[m].exit.push_back(run.exit);
    }
  }
  return results;
}

std::string StartupTable(const std::vector<StartupResult>& results) {
  TextTable table({"model", "file MiB", "first token (median s)", "min s", "exit (median s)", "vs first"});
  const double base = results.empty() ? 0 : Percentile(results[0].first_token, 50);
  for (const StartupResult& r : results) {
    const double median = Percentile(r.first_token, 50);
    table.AddRow({r.model, r.file_bytes > 0 ? fmt::format("{:.0f}", r.file_bytes / (1 << 20)) : "-", Seconds(median),
                  Seconds(*std::min_element(r.first_token.begin(), r.first_token.end())),
                  Seconds(Percentile(r.exit, 50)), base > 0 ? fmt::format("{:.2f}x", median / base) : "-"});
  }
  return table.ToString();
}

}  // namespace kiln::bench
