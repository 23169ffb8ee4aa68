// The NCCL group (parallel/comm_nccl.h) on a single process: a group of one,
// where every collective is a copy or a no-op, so results must equal the
// inputs bit for bit (no arithmetic happens, hence no tolerance), and the
// traffic counted must match the MPI group's for a group of one (payload
// counted, nothing sent). Also checks that handles order the gather and reduce streams
// against the compute stream, that many handles may be pending at once, and
// that bad arguments are refused before anything is queued or counted
// (point-to-point always is: a group of one has no peer).
// Multi-rank NCCL behaviour needs several GPUs and mpirun; not covered here.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "device/device.h"
#include "base/error.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"
#include "test/gpu_test_support.h"

namespace llm {
namespace {

using test_support::DeviceBuffer;

// Buffers are held as 16-bit words whatever the wire type, so one helper
// serves both: an element is wire_bytes(type) / 2 words.
size_t words_per_element(WireType type) { return wire_bytes(type) / sizeof(uint16_t); }

// count random finite elements of `type` (NaN payloads could legitimately be
// canonicalized by a reduction kernel; finite values must come back exact).
std::vector<uint16_t> random_elements(WireType type, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  std::vector<uint16_t> words;
  words.reserve(count * words_per_element(type));
  for (size_t i = 0; i < count; ++i) {
    float v = value(rng);
    if (type == WireType::bf16) {
      words.push_back(float_to_bf16(v));
    } else {
      uint16_t halves[2];
      std::memcpy(halves, &v, sizeof v);
      words.push_back(halves[0]);
      words.push_back(halves[1]);
    }
  }
  return words;
}

// Number of words that differ (vectors of millions of words are not printed).
size_t mismatches(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  if (got.size() != want.size()) return got.size() + want.size();
  size_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) differing += got[i] != want[i];
  return differing;
}

// A value no random element has (a NaN pattern), to show a buffer was written.
std::vector<uint16_t> sentinel_elements(WireType type, size_t count) {
  return std::vector<uint16_t>(count * words_per_element(type), 0x7FC1);
}

class NcclGroupOfOne : public testing::TestWithParam<WireType> {
 protected:
  // One NCCL communicator for the whole suite (initialization is slow);
  // destroyed by TearDownTestSuite, before MPI and CUDA shut down.
  static Group& group() {
    if (!group_) group_ = make_nccl_group(comm_world());
    return *group_;
  }
  static void TearDownTestSuite() { group_.reset(); }

  void SetUp() override {
    LLM_SKIP_WITHOUT_GPU();
    if (comm_world().size() != 1) GTEST_SKIP() << "single-process suite (run without mpirun)";
    group().reset_stats();
  }

  WireType type() const { return GetParam(); }
  // Pointer to element `index` of a buffer of this test's wire type.
  void* element(DeviceBuffer<uint16_t>& buffer, size_t index) const {
    return buffer.get() + index * words_per_element(type());
  }

  static inline std::unique_ptr<Group> group_;
};

INSTANTIATE_TEST_SUITE_P(WireTypes, NcclGroupOfOne, testing::Values(WireType::f32, WireType::bf16),
                         [](const auto& info) {
                           return info.param == WireType::f32 ? "f32" : "bf16";
                         });

TEST_P(NcclGroupOfOne, IsAGroupOfOne) {
  LLM_SKIP_WITHOUT_GPU();
  EXPECT_EQ(group().size(), 1);
  EXPECT_EQ(group().rank(), 0);
}

TEST_P(NcclGroupOfOne, AllReduceLeavesDataAndSendsNothing) {
  LLM_SKIP_WITHOUT_GPU();
  uint64_t payload = 0;
  // Odd sizes, so no vector width of NCCL's kernels divides them.
  for (size_t count : {size_t{1}, size_t{1000}, size_t{4099}}) {
    std::vector<uint16_t> host = random_elements(type(), count, 1);
    DeviceBuffer<uint16_t> data(host);
    group().all_reduce(data.get(), count, type());
    EXPECT_EQ(mismatches(data.download(), host), 0u) << "count " << count;
    payload += count * wire_bytes(type());
  }
  const CommStats& stats = group().stats();
  EXPECT_EQ(stats.calls, 3u);
  EXPECT_EQ(stats.payload_bytes, payload);
  EXPECT_EQ(stats.sent_bytes, 0u);  // 2(n-1)/n of the payload with n = 1
  EXPECT_EQ(stats.all_reduce_sent, 0u);
}

TEST_P(NcclGroupOfOne, ReduceScatterCopiesTheOnlyChunk) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t recv_count = 777;
  std::vector<uint16_t> host = random_elements(type(), recv_count, 2);
  DeviceBuffer<uint16_t> send(host), recv(sentinel_elements(type(), recv_count));
  group().reduce_scatter(send.get(), recv.get(), recv_count, type());
  EXPECT_EQ(mismatches(recv.download(), host), 0u);
  EXPECT_EQ(mismatches(send.download(), host), 0u);  // the input is not written
  const CommStats& stats = group().stats();
  EXPECT_EQ(stats.calls, 1u);
  EXPECT_EQ(stats.payload_bytes, recv_count * wire_bytes(type()));  // the whole input: 1 chunk
  EXPECT_EQ(stats.sent_bytes, 0u);
  EXPECT_EQ(stats.reduce_scatter_sent, 0u);
}

TEST_P(NcclGroupOfOne, AllGatherCopiesOrKeepsItsOwnSlot) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t count = 1025;
  std::vector<uint16_t> host = random_elements(type(), count, 3);
  DeviceBuffer<uint16_t> send(host), recv(sentinel_elements(type(), count));
  group().all_gather(send.get(), recv.get(), count, type());
  EXPECT_EQ(mismatches(recv.download(), host), 0u);

  // In place: the send buffer is this member's slot of recv (slot 0 here).
  DeviceBuffer<uint16_t> full(host);
  group().all_gather(full.get(), full.get(), count, type());
  EXPECT_EQ(mismatches(full.download(), host), 0u);

  const CommStats& stats = group().stats();
  EXPECT_EQ(stats.calls, 2u);
  EXPECT_EQ(stats.payload_bytes, 2 * count * wire_bytes(type()));
  EXPECT_EQ(stats.sent_bytes, 0u);
  EXPECT_EQ(stats.all_gather_sent, 0u);
}

TEST_P(NcclGroupOfOne, BroadcastFromTheOnlyRootLeavesData) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t count = 333;
  std::vector<uint16_t> host = random_elements(type(), count, 4);
  DeviceBuffer<uint16_t> data(host);
  group().broadcast(data.get(), count, type(), /*root=*/0);
  EXPECT_EQ(mismatches(data.download(), host), 0u);
  const CommStats& stats = group().stats();
  EXPECT_EQ(stats.calls, 1u);
  EXPECT_EQ(stats.payload_bytes, count * wire_bytes(type()));
  EXPECT_EQ(stats.sent_bytes, 0u);  // the MPI group counts no send for a group of one
  EXPECT_EQ(stats.broadcast_sent, 0u);
}

TEST_P(NcclGroupOfOne, RefusesBadArgumentsWithoutCountingThem) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t count = 64;
  std::vector<uint16_t> host = random_elements(type(), 2 * count, 5);
  DeviceBuffer<uint16_t> data(host);
  EXPECT_THROW(group().broadcast(data.get(), count, type(), /*root=*/1), Error);
  EXPECT_THROW(group().broadcast(data.get(), count, type(), /*root=*/-1), Error);
  // reduce_scatter never works in place.
  EXPECT_THROW(group().reduce_scatter(data.get(), element(data, 1), count, type()), Error);
  // An all-gather source inside recv must be exactly this member's slot.
  EXPECT_THROW(group().all_gather(element(data, 1), data.get(), count, type()), Error);
  EXPECT_EQ(group().stats().calls, 0u);
  EXPECT_EQ(mismatches(data.download(), host), 0u);
}

TEST_P(NcclGroupOfOne, RefusesPointToPointWithoutCountingIt) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t count = 64;
  std::vector<uint16_t> host = random_elements(type(), count, 9);
  DeviceBuffer<uint16_t> data(host), other(sentinel_elements(type(), count));
  EXPECT_THROW(group().send(data.get(), count, type(), /*peer=*/0), Error);
  EXPECT_THROW(group().recv(data.get(), count, type(), /*peer=*/1), Error);
  EXPECT_THROW(group().send_recv_async(data.get(), count, 0, other.get(), count, 0, type()), Error);
  EXPECT_EQ(group().stats().calls, 0u);
  EXPECT_EQ(mismatches(data.download(), host), 0u);
  // With both counts 0 there is no message, so the peers are not used.
  CommHandle none = group().send_recv_async(nullptr, 0, -1, nullptr, 0, -1, type());
  EXPECT_FALSE(none.pending());
  EXPECT_EQ(group().stats().calls, 1u);
  EXPECT_EQ(group().stats().p2p_sent, 0u);
}

TEST_P(NcclGroupOfOne, EmptyCollectivesAreCountedAndLaunchNothing) {
  LLM_SKIP_WITHOUT_GPU();
  CommHandle handle = group().all_reduce_async(nullptr, 0, type());
  EXPECT_FALSE(handle.pending());
  group().reduce_scatter(nullptr, nullptr, 0, type());
  group().all_gather(nullptr, nullptr, 0, type());
  group().broadcast(nullptr, 0, type(), 0);
  EXPECT_EQ(group().stats().calls, 4u);
  EXPECT_EQ(group().stats().payload_bytes, 0u);
}

// compute -> comm -> compute, with buffers large enough (32 MB) that a copy
// takes far longer than queuing the next call: if the collective did not wait
// for the compute stream, it would gather stale zeros; if the handle did not
// hold the compute stream back, the last copy would read the collective's
// output before it is written. Three rounds reuse the pooled events.
TEST_P(NcclGroupOfOne, HandlesOrderTheGatherAndReduceStreamsAgainstTheComputeStream) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t count = size_t{1} << 23;
  const size_t bytes = count * wire_bytes(type());
  DeviceBuffer<uint16_t> source(count * words_per_element(type()));
  DeviceBuffer<uint16_t> input(source.size()), gathered(source.size()), result(source.size());
  DeviceBuffer<uint16_t> reduced(source.size()), reduced_result(source.size());
  for (uint32_t round = 0; round < 3; ++round) {
    std::vector<uint16_t> host = random_elements(type(), count, 10 + round);
    source.upload(host);
    cuda_memory().copy(input.get(), source.get(), bytes);  // queued on the compute stream
    // A reduction (reduce stream) issued before a gather (gather stream),
    // waited in the other order: each must still see the compute stream's copy.
    CommHandle reduction = group().reduce_scatter_async(input.get(), reduced.get(), count, type());
    CommHandle handle = group().all_gather_async(input.get(), gathered.get(), count, type());
    EXPECT_TRUE(handle.pending() && reduction.pending());
    handle.wait();
    handle.wait();  // harmless
    cuda_memory().copy(result.get(), gathered.get(), bytes);
    reduction.wait();
    cuda_memory().copy(reduced_result.get(), reduced.get(), bytes);
    EXPECT_EQ(mismatches(result.download(), host), 0u) << "gather, round " << round;
    EXPECT_EQ(mismatches(reduced_result.download(), host), 0u) << "reduction, round " << round;
  }
}

// More handles pending at once than any small fixed pool would hold, waited
// out of order, some only by destruction.
TEST_P(NcclGroupOfOne, ManyPendingHandles) {
  LLM_SKIP_WITHOUT_GPU();
  const size_t slices = 40, slice = 1001;
  std::vector<uint16_t> host = random_elements(type(), slices * slice, 6);
  DeviceBuffer<uint16_t> send(host), recv(sentinel_elements(type(), slices * slice));
  {
    std::vector<CommHandle> handles;
    for (size_t s = 0; s < slices; ++s)
      handles.push_back(group().all_gather_async(element(send, s * slice), element(recv, s * slice),
                                                 slice, type()));
    for (size_t s = slices; s-- > slices / 2;) handles[s].wait();
    // The first half is waited by the handles' destructors.
  }
  EXPECT_EQ(mismatches(recv.download(), host), 0u);
  EXPECT_EQ(group().stats().calls, slices);

  // Chained pending collectives on one buffer, the first handle replaced by
  // the second (which waits for the first on reassignment).
  DeviceBuffer<uint16_t> again(sentinel_elements(type(), slices * slice));
  CommHandle handle = group().all_gather_async(send.get(), again.get(), slices * slice, type());
  handle = group().broadcast_async(again.get(), slices * slice, type(), 0);
  handle.wait();
  EXPECT_EQ(mismatches(again.download(), host), 0u);
}

TEST_P(NcclGroupOfOne, SplitGivesAWorkingGroupWithItsOwnStats) {
  LLM_SKIP_WITHOUT_GPU();
  std::unique_ptr<Group> child = group().split(/*color=*/0, /*key=*/0);
  ASSERT_EQ(child->size(), 1);
  EXPECT_EQ(child->rank(), 0);
  const size_t count = 100;
  std::vector<uint16_t> host = random_elements(type(), count, 7);
  DeviceBuffer<uint16_t> send(host), recv(sentinel_elements(type(), count));
  child->reduce_scatter(send.get(), recv.get(), count, type());
  EXPECT_EQ(mismatches(recv.download(), host), 0u);
  EXPECT_EQ(child->stats().calls, 1u);
  EXPECT_EQ(group().stats().calls, 0u);
  EXPECT_THROW(group().split(/*color=*/-1, /*key=*/0), Error);
}

TEST_P(NcclGroupOfOne, HostSumAndBarrier) {
  LLM_SKIP_WITHOUT_GPU();
  EXPECT_EQ(group().all_reduce_sum(2.5), 2.5);
  EXPECT_EQ(group().all_reduce_sum(-1e300), -1e300);  // a double, not squeezed through f32
  const size_t count = 4096;
  std::vector<uint16_t> host = random_elements(type(), count, 8);
  DeviceBuffer<uint16_t> send(host), recv(sentinel_elements(type(), count));
  CommHandle handle = group().all_gather_async(send.get(), recv.get(), count, type());
  group().barrier();  // the pending collective is complete after a barrier
  EXPECT_EQ(mismatches(recv.download(), host), 0u);
  EXPECT_EQ(group().stats().calls, 1u);  // neither the sum nor the barrier is a counted collective
}

TEST_P(NcclGroupOfOne, RefusesAnNcclGroupAsMembers) {
  LLM_SKIP_WITHOUT_GPU();
  EXPECT_THROW(make_nccl_group(group()), Error);
}

// The CPU-only build's factory says why there is no NCCL group.
TEST(NcclWithoutCuda, FactoryThrows) {
  if (kBuiltWithCuda) GTEST_SKIP() << "this build has CUDA; the NCCL group is tested above";
  EXPECT_THROW(make_nccl_group(comm_world()), Error);
}

}  // namespace
}  // namespace llm
