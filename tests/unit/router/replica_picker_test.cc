// The choice between the replica holding a prefix and the least loaded one.
#include "router/replica_picker.h"

#include <gtest/gtest.h>

namespace kiln::router {
namespace replica_picker_tests {

ReplicaLoad Up(int in_flight) {
  return ReplicaLoad{true, in_flight, false};
}
ReplicaLoad Down() {
  return ReplicaLoad{false, 0, false};
}

TEST(PickReplica, LeastLoadedWithoutAKnownPrefix) {
  ReplicaPick p = PickReplica({Up(3), Up(1), Up(2)}, -1, 4, 0);
  EXPECT_EQ(p.replica, 1);
  EXPECT_EQ(p.reason, PickReason::kLeastLoaded);
}

TEST(PickReplica, EqualReplicasTakeTurns) {
  EXPECT_EQ(PickReplica({Up(0), Up(0), Up(0)}, -1, 4, 0).replica, 0);
  EXPECT_EQ(PickReplica({Up(0), Up(0), Up(0)}, -1, 4, 1).replica, 1);
  EXPECT_EQ(PickReplica({Up(0), Up(0), Up(0)}, -1, 4, 5).replica, 2);
}

TEST(PickReplica, TheAffinityReplicaWithinTheMargin) {
  ReplicaPick p = PickReplica({Up(1), Up(5)}, 1, 4, 0);  // 5 <= 1 + 4
  EXPECT_EQ(p.replica, 1);
  EXPECT_EQ(p.reason, PickReason::kPrefixAffinity);
}

TEST(PickReplica, TheLeastLoadedWhenTheAffinityReplicaIsTooBusy) {
  ReplicaPick p = PickReplica({Up(1), Up(6)}, 1, 4, 0);  // 6 > 1 + 4
  EXPECT_EQ(p.replica, 0);
  EXPECT_EQ(p.reason, PickReason::kLeastLoaded);
  // Margin 0: only when it is (one of) the least loaded.
  EXPECT_EQ(PickReplica({Up(1), Up(1)}, 1, 0, 0).reason, PickReason::kPrefixAffinity);
  EXPECT_EQ(PickReplica({Up(1), Up(2)}, 1, 0, 0).reason, PickReason::kLeastLoaded);
}

TEST(PickReplica, NeverADownOrTriedReplica) {
  ReplicaPick p = PickReplica({Down(), Up(9)}, 0, 100, 0);
  EXPECT_EQ(p.replica, 1);
  EXPECT_EQ(p.reason, PickReason::kLeastLoaded);
  std::vector<ReplicaLoad> loads = {Up(0), Up(7)};
  loads[0].excluded = true;
  EXPECT_EQ(PickReplica(loads, 0, 100, 0).replica, 1);
}

TEST(PickReplica, NoneWhenNoReplicaIsUp) {
  ReplicaPick p = PickReplica({Down(), Down()}, 0, 4, 0);
  EXPECT_EQ(p.replica, -1);
  EXPECT_EQ(p.reason, PickReason::kNone);
  EXPECT_EQ(PickReplica({}, -1, 4, 0).replica, -1);
}

TEST(PickReplica, AnAffinityIndexOutOfRangeIsIgnored) {
  EXPECT_EQ(PickReplica({Up(2), Up(0)}, 7, 4, 0).replica, 1);
}

}  // namespace replica_picker_tests
}  // namespace kiln::router
