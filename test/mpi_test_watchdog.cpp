// The watchdog over NCCL at two ranks (collectives/watchdog.h,
// parallel/comm_nccl.cu): a collective that one member has not joined stays
// tracked, and the other member's host wait on its device expires on it,
// naming the collective; the watchdog's abort hook aborts the group's
// communicators. Needs a device per rank (the CUDA emulation has eight).
// The expiry handler throws here instead of taking the job down.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "device/device.h"
#include "device/device_memory.h"
#include "base/error.h"
#include "collectives/watchdog.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"

namespace llm {
namespace {

struct Expired {
  std::string op, group;
  uint64_t seq;
};

class NcclWatchdog : public testing::Test {
 protected:
  void SetUp() override {
    if (comm_world().size() != 2) GTEST_SKIP() << "a two-rank suite";
    if (cuda_device_count() < comm_local_size())
      GTEST_SKIP() << (kBuiltWithCuda ? "fewer CUDA devices than ranks on this machine"
                                      : "this build has no CUDA backend (no nvcc)");
    cuda_use_device(comm_local_rank());
    saved_ =
        watchdog_set_handlers({nullptr, [](const OpRecord& op, const GroupTrace& trace, double) {
                                 throw Expired{op.op, trace.label, op.seq};
                               }});
  }
  void TearDown() override {
    if (!saved_.expire) return;  // skipped
    watchdog_set_handlers(saved_);
    watchdog_configure({});
  }

  WatchdogHandlers saved_;
};

TEST_F(NcclWatchdog, AWaitBehindACollectiveAPeerHasNotJoinedExpiresOnIt) {
  std::unique_ptr<Group> group = make_nccl_group(comm_world());
  group->set_label("test");
  // The group's communicators were made as its first collectives.
  const uint64_t made = group->trace().collectives_entered;
  const DeviceMemory& memory = cuda_memory();
  const size_t count = 1024;
  const std::vector<float> ones(count, 1.0f);
  void* data = memory.allocate(count * sizeof(float));
  memory.to_device(data, ones.data(), count * sizeof(float));
  const bool late = comm_world().rank() == 1;
  // Rank 0 waits 0.3 s for its device; rank 1 joins only after rank 0's
  // wait has expired (it waits in the world's barrier meanwhile, with the
  // default timeout).
  watchdog_configure({late ? 600.0 : 0.3, "", 64});
  if (!late) {
    group->all_reduce_async(data, count, WireType::f32).wait();
    try {
      memory.synchronize();
      ADD_FAILURE() << "the wait did not expire";
    } catch (const Expired& e) {
      EXPECT_EQ(e.op, "all_reduce");
      EXPECT_EQ(e.group, "test");
      EXPECT_EQ(e.seq, made + 1);
    }
    EXPECT_EQ(watchdog_tracked_count(), 1u);  // still on the device
    // The expiry is checked; the wait below must not expire again on the
    // same collective (already older than 0.3 s) before rank 1 has joined,
    // which a loaded machine can delay past any short timeout.
    watchdog_configure({600.0, "", 64});
  }
  comm_world().barrier();
  if (late) group->all_reduce_async(data, count, WireType::f32).wait();
  std::vector<float> sum(count);
  memory.to_host(sum.data(), data, count * sizeof(float));  // now completes
  EXPECT_EQ(sum, std::vector<float>(count, 2.0f));
  EXPECT_EQ(group->trace().collectives_entered, made + 1);
  memory.release(data);
}

TEST_F(NcclWatchdog, TheAbortHookAbortsTheCommunicators) {
  std::unique_ptr<Group> group = make_nccl_group(comm_world());
  const DeviceMemory& memory = cuda_memory();
  void* data = memory.allocate(16 * sizeof(float));
  watchdog_run_abort_hooks();
  // The communicators are gone: a collective is refused, on this member
  // alone, without waiting for the other.
  EXPECT_THROW(group->all_reduce_async(data, 16, WireType::f32), Error);
  memory.release(data);
  comm_world().barrier();
}

}  // namespace
}  // namespace llm
