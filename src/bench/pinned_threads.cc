// Pinned, simultaneously started threads.
#include "bench/pinned_threads.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace kiln::bench {
namespace {

// The (package, core) a logical CPU belongs to, or (-1, cpu) when unknown.
std::pair<int, int> CoreOf(int cpu) {
  std::ifstream core(fmt::format("/sys/devices/system/cpu/cpu{}/topology/core_id", cpu));
  std::ifstream package(fmt::format("/sys/devices/system/cpu/cpu{}/topology/physical_package_id", cpu));
  int core_id = -1, package_id = -1;
  if (!(core >> core_id) || !(package >> package_id)) return {-1, cpu};
  return {package_id, core_id};
}

}  // namespace

std::vector<int> OneCpuPerCore() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return cpus;
  std::set<std::pair<int, int>> seen;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen.insert(CoreOf(cpu)).second) cpus.push_back(cpu);
  }
  return cpus;
}

double RunPinned(int threads, const std::vector<int>& cpus, const std::function<void(int)>& body) {
  using Clock = std::chrono::steady_clock;
  threads = std::max(threads, 1);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Clock::time_point> finished(static_cast<size_t>(threads));
  std::vector<std::thread> team;
  team.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    team.emplace_back([&, i] {
      if (!cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[static_cast<size_t>(i) % cpus.size()], &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      }
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(i);
      finished[static_cast<size_t>(i)] = Clock::now();
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& t : team) t.join();
  const Clock::time_point last = *std::max_element(finished.begin(), finished.end());
  return std::chrono::duration<double>(last - start).count();
}

}  // namespace kiln::bench
