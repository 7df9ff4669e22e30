// Prefix affinity bounded by load, else least loaded.
#include "router/replica_picker.h"

namespace kiln::router {

ReplicaPick PickReplica(const std::vector<ReplicaLoad>& replicas, int affinity_replica, int load_margin,
                        size_t rotation) {
  const size_t n = replicas.size();
  auto usable = [&](size_t i) { return replicas[i].up && !replicas[i].excluded; };
  int least = -1;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (rotation + k) % n;
    if (usable(i) && (least < 0 || replicas[i].in_flight < replicas[static_cast<size_t>(least)].in_flight)) {
      least = static_cast<int>(i);
    }
  }
  if (least < 0) return ReplicaPick{};
  if (affinity_replica >= 0 && static_cast<size_t>(affinity_replica) < n &&
      usable(static_cast<size_t>(affinity_replica)) &&
      replicas[static_cast<size_t>(affinity_replica)].in_flight <=
          replicas[static_cast<size_t>(least)].in_flight + load_margin) {
    return ReplicaPick{affinity_replica, PickReason::kPrefixAffinity};
  }
  return ReplicaPick{least, PickReason::kLeastLoaded};
}

std::string_view PickReasonName(PickReason reason) {
  switch (reason) {
    case PickReason::kPrefixAffinity: return "prefix-affinity";
    case PickReason::kLeastLoaded: return "least-loaded";
    case PickReason::kNone: break;
  }
  return "none";
}

}  // namespace kiln::router
