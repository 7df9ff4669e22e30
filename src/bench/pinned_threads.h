// Runs one piece of work on several threads at once, each pinned to its own
// physical core, and times them together: how the roofline loops get an
// aggregate rate per thread count.
#pragma once

#include <functional>
#include <vector>

namespace kiln::bench {

// Logical CPUs this process may run on, one per physical core (the first
// sibling of each), in CPU order. Falls back to every allowed CPU when the
// topology cannot be read.
std::vector<int> OneCpuPerCore();

// Calls body(i) for i in [0, threads) on `threads` new threads, thread i
// pinned to cpus[i % cpus.size()] (not pinned when cpus is empty). All start
// together once every thread is pinned and ready. Returns the seconds from
// that common start until the last one finished.
double RunPinned(int threads, const std::vector<int>& cpus, const std::function<void(int)>& body);

}  // namespace kiln::bench
