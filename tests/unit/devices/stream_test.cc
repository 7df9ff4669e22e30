// Streams, events and the stand-in device's memory: work runs in order on
// the worker, events order one stream after another, and device memory and
// pending host destinations hold poison until written.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "testaccel/poisoning_domain.h"
#include "testaccel/worker_stream.h"

namespace kiln {
namespace stream_tests {

using std::chrono::microseconds;

TEST(WorkerStream, RunsInOrderAndSynchronizeWaitsForAll) {
  WorkerStream s(microseconds(200));
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) s.Enqueue([&order, i] { order.push_back(i); });
  s.Synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(WorkerStream, EnqueueReturnsBeforeTheWorkRuns) {
  WorkerStream s(microseconds(20000));
  std::atomic<bool> ran{false};
  s.Enqueue([&] { ran = true; });
  EXPECT_FALSE(ran.load());
  s.Synchronize();
  EXPECT_TRUE(ran.load());
}

TEST(WorkerStream, AnEventOrdersOneStreamAfterAnother) {
  WorkerStream a(microseconds(5000)), b(microseconds(0));
  HostEvent e;
  int value = 0;
  int seen = -1;
  a.Enqueue([&] { value = 42; });
  a.Record(e);
  b.Wait(e);
  b.Enqueue([&] { seen = value; });
  b.Synchronize();
  EXPECT_EQ(seen, 42);
  a.Synchronize();
}

TEST(WorkerStream, TheHostWaitsOnAnEvent) {
  WorkerStream a(microseconds(5000));
  HostEvent e;
  int value = 0;
  a.Enqueue([&] { value = 7; });
  a.Record(e);
  HostStream().Wait(e);  // the CPU's stream blocks the host
  EXPECT_EQ(value, 7);
  // Re-armed for the next pass.
  a.Enqueue([&] { value = 8; });
  a.Record(e);
  e.HostWait();
  EXPECT_EQ(value, 8);
}

TEST(InlineStream, AnEventRecordedOnTheHostIsComplete) {
  HostEvent e;
  HostStream().Record(e);
  e.HostWait();  // returns at once
  int ran = 0;
  HostStream().Enqueue([&] { ran = 1; });
  EXPECT_EQ(ran, 1);
}

TEST(PoisoningDomain, AllocationsAndDiscardedBytesHoldPoison) {
  PoisoningDomain d("poison-test", 99);
  auto p = d.Allocate(256);
  ASSERT_TRUE(p.ok());
  auto* f = static_cast<float*>(*p);
  EXPECT_TRUE(std::isnan(f[0]) && std::isnan(f[63]));
  for (int i = 0; i < 64; ++i) f[i] = 1.0f;
  d.Discard(f, 256);
  EXPECT_TRUE(std::isnan(f[10]));
  d.Free(*p, 256);
}

TEST(TestAccelerator, UnsynchronizedReadOfACopysDestinationSeesPoison) {
  Backend* accel = BackendRegistry::Get().Find("testaccel");
  ASSERT_NE(accel, nullptr);
  ASSERT_TRUE(accel->SetOption("kernel_delay_us", "20000").ok());
  auto device = DomainBuffer::Allocate(accel->domain(), 4 * sizeof(float));
  ASSERT_TRUE(device.ok());
  std::vector<float> host = {1, 2, 3, 4}, back(4, 0.0f);
  RowCopy up{device->data(), 16, host.data(), 16, 16, 1};
  accel->EnqueueCopy(CopyDirection::kHostToDevice, up);
  RowCopy down{back.data(), 16, device->data(), 16, 16, 1};
  accel->EnqueueCopy(CopyDirection::kDeviceToHost, down);
  float early;
  std::memcpy(&early, back.data(), sizeof(float));  // not yet copied: poison
  accel->stream().Synchronize();
  ASSERT_TRUE(accel->SetOption("kernel_delay_us", "20").ok());
  EXPECT_TRUE(std::isnan(early));
  EXPECT_EQ(back, host);
}

}  // namespace stream_tests
}  // namespace kiln
