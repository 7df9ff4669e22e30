// The choice of replica for one request, from what the router knows: which
// replicas are up, how many requests each has in flight through the router,
// and which one holds the request's longest known prompt prefix.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace kiln::router {

struct ReplicaLoad {
  bool up = false;
  int in_flight = 0;
  bool excluded = false;  // already tried for this request
};

enum class PickReason {
  kNone,            // no replica is up (and untried)
  kPrefixAffinity,  // the replica holding the prefix
  kLeastLoaded,     // no known prefix, or its replica was too busy
};

struct ReplicaPick {
  int replica = -1;
  PickReason reason = PickReason::kNone;
};

// The affinity replica when it is usable and has at most `load_margin`
// requests in flight more than the least loaded usable replica; otherwise
// the least loaded usable replica, ties going to the first at or after
// `rotation` (modulo the count) so that equal replicas take turns.
// `affinity_replica` -1: no known prefix.
ReplicaPick PickReplica(const std::vector<ReplicaLoad>& replicas, int affinity_replica, int load_margin,
                        size_t rotation);

// "prefix-affinity", "least-loaded" or "none".
std::string_view PickReasonName(PickReason reason);

}  // namespace kiln::router
