// Collectives and point-to-point messages of the MPI Group on any world size
// (run under mpirun -np 1..6), messages also through the staged group over
// host memory. Inputs are small integers, so every sum is exact in f32 and
// bf16 whatever order MPI reduces in; the one inexact bf16 case puts all the
// rounding in a single addition, so its result is still order independent.
// Messages are compared bit for bit (no arithmetic happens on them).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/bf16.h"
#include "device/device_memory.h"
#include "base/error.h"
#include "parallel/comm.h"
#include "parallel/comm_staged.h"
#include "test/error_of.h"

namespace llm {
namespace {

using test_support::error_of;

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(float_to_bf16(v));
  return out;
}

std::vector<float> to_float(const std::vector<uint16_t>& values) {
  std::vector<float> out;
  for (uint16_t v : values) out.push_back(bf16_to_float(v));
  return out;
}

// Runs `collective` on data converted to `type` and returns the result as floats.
template <class F>
std::vector<float> run_as(WireType type, std::vector<float> data, size_t result_size,
                          F collective) {
  std::vector<float> result(result_size);
  if (type == WireType::f32) {
    collective(data.data(), result.data());
    return result;
  }
  std::vector<uint16_t> in = to_bf16(data), out(result_size);
  collective(in.data(), out.data());
  return to_float(out);
}

class CommCollective : public testing::TestWithParam<WireType> {
 protected:
  Group& world = comm_world();
  int n = world.size();
  int rank = world.rank();
};

INSTANTIATE_TEST_SUITE_P(WireTypes, CommCollective, testing::Values(WireType::f32, WireType::bf16),
                         [](const auto& info) {
                           return info.param == WireType::f32 ? "f32" : "bf16";
                         });

TEST_P(CommCollective, AllReduceSumsInPlace) {
  for (size_t count : {size_t{1}, size_t{1001}, size_t{1} << 18}) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i % 5 + rank % 3);
    std::vector<float> got = run_as(GetParam(), data, count, [&](void* in, void* out) {
      world.all_reduce(in, count, GetParam());
      std::memcpy(out, in, count * wire_bytes(GetParam()));
    });
    float rank_part = 0;
    for (int r = 0; r < n; ++r) rank_part += static_cast<float>(r % 3);
    size_t mismatches = 0;
    for (size_t i = 0; i < count; ++i)
      mismatches += got[i] != static_cast<float>(n * (i % 5)) + rank_part;
    EXPECT_EQ(mismatches, 0u) << "count " << count;
  }
}

TEST_P(CommCollective, ReduceScatterSumsEachMembersChunk) {
  const size_t chunk = 37;
  std::vector<float> send(n * chunk);
  for (int c = 0; c < n; ++c)
    for (size_t j = 0; j < chunk; ++j)
      send[c * chunk + j] = static_cast<float>((rank + 1) * (c + 1) + j % 4);
  std::vector<float> got = run_as(GetParam(), send, chunk, [&](void* in, void* out) {
    world.reduce_scatter(in, out, chunk, GetParam());
  });
  float rank_sum = n * (n + 1) / 2.0f;
  for (size_t j = 0; j < chunk; ++j)
    EXPECT_EQ(got[j], rank_sum * (rank + 1) + n * static_cast<float>(j % 4)) << "element " << j;
}

TEST_P(CommCollective, AllGatherConcatenatesInRankOrder) {
  const size_t chunk = 13;
  std::vector<float> send(chunk);
  for (size_t j = 0; j < chunk; ++j) send[j] = static_cast<float>(rank * 16 + j);
  std::vector<float> got = run_as(GetParam(), send, n * chunk, [&](void* in, void* out) {
    world.all_gather(in, out, chunk, GetParam());
  });
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < chunk; ++j)
      EXPECT_EQ(got[r * chunk + j], static_cast<float>(r * 16 + j));
}

TEST_P(CommCollective, AllGatherFromOwnSlotWorksInPlace) {
  const size_t chunk = 9;
  std::vector<float> full(n * chunk, -1.0f);
  for (size_t j = 0; j < chunk; ++j) full[rank * chunk + j] = static_cast<float>(rank * 16 + j);
  std::vector<float> got = run_as(GetParam(), full, n * chunk, [&](void* buffer, void* out) {
    char* base = static_cast<char*>(buffer);
    world.all_gather(base + rank * chunk * wire_bytes(GetParam()), base, chunk, GetParam());
    std::memcpy(out, base, n * chunk * wire_bytes(GetParam()));
  });
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < chunk; ++j)
      EXPECT_EQ(got[r * chunk + j], static_cast<float>(r * 16 + j));
}

TEST_P(CommCollective, BroadcastCopiesFromEveryRoot) {
  const size_t count = 21;
  for (int root = 0; root < n; ++root) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank * 32 + i);
    std::vector<float> got = run_as(GetParam(), data, count, [&](void* in, void* out) {
      world.broadcast(in, count, GetParam(), root);
      std::memcpy(out, in, count * wire_bytes(GetParam()));
    });
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ(got[i], static_cast<float>(root * 32 + i)) << "root " << root;
  }
}

TEST_P(CommCollective, TwoInFlightWaitedInReverseOrder) {
  const size_t count = 4096;
  std::vector<float> reduced(count, 1.0f), gathered(n * count);
  std::vector<float> shard(count, static_cast<float>(rank));
  std::vector<uint16_t> reduced16 = to_bf16(reduced), gathered16(n * count),
                        shard16 = to_bf16(shard);
  bool f32 = GetParam() == WireType::f32;
  CommHandle first = f32 ? world.all_reduce_async(reduced.data(), count, GetParam())
                         : world.all_reduce_async(reduced16.data(), count, GetParam());
  CommHandle second =
      f32 ? world.all_gather_async(shard.data(), gathered.data(), count, GetParam())
          : world.all_gather_async(shard16.data(), gathered16.data(), count, GetParam());
  EXPECT_TRUE(first.pending());
  second.wait();
  first.wait();
  if (!f32) {
    reduced = to_float(reduced16);
    gathered = to_float(gathered16);
  }
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(reduced[i], static_cast<float>(n)) << i;
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(gathered[r * count + count - 1], static_cast<float>(r)) << r;
}

// bf16 partial sums round to nearest even. Only ranks 0 and 1 contribute
// nonzero values, so exactly one addition rounds, whatever the reduction order.
TEST(CommBf16, AllReduceRoundsToNearestEven) {
  Group& world = comm_world();
  if (world.size() < 2) GTEST_SKIP() << "needs two ranks";
  struct Case {
    uint16_t a, b, sum;
  };
  const std::vector<Case> cases = {
      {0x3F80, 0x3B80, 0x3F80},  // 1 + 2^-8: a tie, rounds to the even 1.0
      {0x3F81, 0x3B80, 0x3F82},  // (1 + 2^-7) + 2^-8: a tie, rounds up to even
      {0x3F80, 0x3BC0, 0x3F81},  // 1 + 0.75 ulp: above the tie
      {0x3F80, 0x3B00, 0x3F80},  // 1 + 0.25 ulp: below the tie
      {0x7F7F, 0x7F7F, 0x7F80},  // max + max overflows to inf
      {0x3F80, 0xBF80, 0x0000},  // 1 - 1
  };
  std::vector<uint16_t> data(cases.size(), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (world.rank() == 0) data[i] = cases[i].a;
    if (world.rank() == 1) data[i] = cases[i].b;
  }
  world.all_reduce(data.data(), data.size(), WireType::bf16);
  for (size_t i = 0; i < cases.size(); ++i) {
    uint16_t computed = float_to_bf16(bf16_to_float(cases[i].a) + bf16_to_float(cases[i].b));
    EXPECT_EQ(computed, cases[i].sum) << "case " << i;
    EXPECT_EQ(data[i], computed) << "case " << i;
  }
}

TEST(CommWorld, AllReduceSumOfDoubles) {
  Group& world = comm_world();
  int n = world.size();
  EXPECT_EQ(world.all_reduce_sum(world.rank() + 0.5), n * (n - 1) / 2.0 + n * 0.5);
}

TEST(CommWorld, NodeRanksCoverTheWorldOnOneMachine) {
  EXPECT_EQ(comm_local_size(), comm_world().size());
  EXPECT_EQ(comm_local_rank(), comm_world().rank());
  comm_world().barrier();
}

TEST(CommWorld, RejectsCountsBeyondIntMax) {
  float dummy = 0;
  size_t too_many = static_cast<size_t>(INT_MAX) + 1;
  try {
    comm_world().all_reduce_async(&dummy, too_many, WireType::f32);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(too_many)), std::string::npos) << e.what();
  }
}

TEST(CommWorld, RejectsBadRootAndOverlappingBuffers) {
  Group& world = comm_world();
  std::vector<float> buffer(2 * world.size());
  EXPECT_THROW(world.broadcast(buffer.data(), 1, WireType::f32, world.size()), Error);
  EXPECT_THROW(world.reduce_scatter(buffer.data(), buffer.data(), 1, WireType::f32), Error);
}

// Members that share a color form a group, ordered by key.
TEST(CommSplit, ParityAndPairGroupsReduceTheirOwnMembers) {
  Group& world = comm_world();
  int n = world.size(), rank = world.rank();
  std::unique_ptr<Group> parity = world.split(rank % 2, rank);
  std::unique_ptr<Group> pair = world.split(rank / 2, rank);
  EXPECT_EQ(parity->size(), (n - rank % 2 + 1) / 2);
  EXPECT_EQ(parity->rank(), rank / 2);
  EXPECT_EQ(pair->size(), std::min(2, n - 2 * (rank / 2)));
  EXPECT_EQ(pair->rank(), rank % 2);

  // Interleaved on both groups, as hybrid sharding does.
  float parity_sum = static_cast<float>(rank), pair_sum = static_cast<float>(rank);
  CommHandle on_parity = parity->all_reduce_async(&parity_sum, 1, WireType::f32);
  CommHandle on_pair = pair->all_reduce_async(&pair_sum, 1, WireType::f32);
  on_pair.wait();
  on_parity.wait();
  float expected_parity = 0, expected_pair = 0;
  for (int r = 0; r < n; ++r) {
    if (r % 2 == rank % 2) expected_parity += r;
    if (r / 2 == rank / 2) expected_pair += r;
  }
  EXPECT_EQ(parity_sum, expected_parity);
  EXPECT_EQ(pair_sum, expected_pair);

  std::vector<float> members(parity->size());
  float me = static_cast<float>(rank);
  parity->all_gather(&me, members.data(), 1, WireType::f32);
  for (int i = 0; i < parity->size(); ++i)
    EXPECT_EQ(members[i], static_cast<float>(2 * i + rank % 2));
}

TEST(CommSplit, KeyOrdersMembers) {
  Group& world = comm_world();
  std::unique_ptr<Group> reversed = world.split(0, -world.rank());
  EXPECT_EQ(reversed->rank(), world.size() - 1 - world.rank());
  float me = static_cast<float>(world.rank());
  reversed->broadcast(&me, 1, WireType::f32, 0);
  EXPECT_EQ(me, static_cast<float>(world.size() - 1));
}

TEST(CommStats, CountsFollowTheRingFormulas) {
  std::unique_ptr<Group> group = comm_world().split(0, comm_world().rank());
  const uint64_t n = group->size();
  std::vector<float> f32(8 * n);
  std::vector<uint16_t> bf16(8 * n);
  group->all_reduce(f32.data(), 7, WireType::f32);                      // payload 28
  group->reduce_scatter(bf16.data(), f32.data(), 3, WireType::bf16);    // payload n * 6
  group->all_gather(f32.data() + 4 * n, f32.data(), 2, WireType::f32);  // payload n * 8
  group->broadcast(bf16.data(), 5, WireType::bf16, 0);                  // payload 10
  const CommStats& s = group->stats();
  EXPECT_EQ(s.calls, 4u);
  EXPECT_EQ(s.payload_bytes, 28 + n * 6 + n * 8 + 10);
  EXPECT_EQ(s.all_reduce_sent, 2 * (n - 1) * 28 / n);
  EXPECT_EQ(s.reduce_scatter_sent, (n - 1) * 6);
  EXPECT_EQ(s.all_gather_sent, (n - 1) * 8);
  EXPECT_EQ(s.broadcast_sent, n > 1 ? 10u : 0u);
  EXPECT_EQ(s.sent_bytes,
            s.all_reduce_sent + s.reduce_scatter_sent + s.all_gather_sent + s.broadcast_sent);

  CommStats total;
  total.add(s);
  total.add(s);
  EXPECT_EQ(total.calls, 8u);
  EXPECT_EQ(total.payload_bytes, 2 * s.payload_bytes);
  EXPECT_EQ(total.all_gather_sent, 2 * s.all_gather_sent);
  group->reset_stats();
  EXPECT_EQ(group->stats().calls, 0u);
  EXPECT_EQ(group->stats().sent_bytes, 0u);
}

// --- point-to-point -----------------------------------------------------------

// Message `index` from member `sender`, as 16-bit words (an element is
// wire_bytes(type) / 2 of them): bits hashed from (sender, index, position),
// with bit 14 of every word clear so that no element is an inf or a NaN. A
// message from the wrong sender, matched out of order or shifted compares unequal.
std::vector<uint16_t> message(WireType type, int sender, int index, size_t count) {
  std::vector<uint16_t> words(count * wire_bytes(type) / sizeof(uint16_t));
  for (size_t i = 0; i < words.size(); ++i) {
    uint64_t h = (static_cast<uint64_t>(sender) << 48) ^ (static_cast<uint64_t>(index) << 32) ^ i;
    h *= 0x9E3779B97F4A7C15ull;
    words[i] = static_cast<uint16_t>(h >> 48) & 0xBFFF;
  }
  return words;
}

// A receive buffer for `count` elements, filled with a word no message has
// (bit 14 set), so that an unwritten element shows.
std::vector<uint16_t> unwritten(WireType type, size_t count) {
  return std::vector<uint16_t>(count * wire_bytes(type) / sizeof(uint16_t), 0x7FC1);
}

enum class GroupKind { mpi, staged };

// A group of this test's own over the world (so its stats hold this test's
// calls only): the MPI group, or the staged group over host memory wrapping it.
class PointToPoint : public testing::TestWithParam<std::tuple<GroupKind, WireType>> {
 protected:
  std::unique_ptr<Group> host = comm_world().split(0, comm_world().rank());
  std::unique_ptr<Group> staged = std::get<0>(GetParam()) == GroupKind::staged
                                      ? make_staged_group(*host, host_memory())
                                      : nullptr;
  Group& group = staged ? *staged : *host;
  WireType type = std::get<1>(GetParam());
  int n = group.size(), rank = group.rank();
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
};

std::string point_to_point_name(
    const testing::TestParamInfo<std::tuple<GroupKind, WireType>>& info) {
  return std::string(std::get<0>(info.param) == GroupKind::mpi ? "mpi" : "staged") + "_" +
         (std::get<1>(info.param) == WireType::f32 ? "f32" : "bf16");
}

const auto kPointToPointParams =
    testing::Combine(testing::Values(GroupKind::mpi, GroupKind::staged),
                     testing::Values(WireType::f32, WireType::bf16));

// Messages need a peer: these tests skip in a world of one.
class CommPointToPoint : public PointToPoint {
 protected:
  void SetUp() override {
    if (n < 2) GTEST_SKIP() << "needs two ranks";
  }
};
INSTANTIATE_TEST_SUITE_P(Groups, CommPointToPoint, kPointToPointParams, point_to_point_name);

// Refusals, on any world size (a world of one has no valid peer at all).
class CommPointToPointPeers : public PointToPoint {};
INSTANTIATE_TEST_SUITE_P(Groups, CommPointToPointPeers, kPointToPointParams, point_to_point_name);

// Sizes from one element to past MPI's eager limit (a rendezvous transfer).
TEST_P(CommPointToPoint, RingPassesEachBufferToTheNextMember) {
  for (size_t count : {size_t{1}, size_t{1001}, size_t{1} << 17}) {
    std::vector<uint16_t> send = message(type, rank, 0, count), recv = unwritten(type, count);
    group.send_recv_async(send.data(), count, next, recv.data(), count, prev, type).wait();
    EXPECT_TRUE(recv == message(type, prev, 0, count)) << "count " << count;
  }
}

// Member 0 has every message to member 1 in flight at once; member 1 has every
// receive posted at once and waits for them last to first.
TEST_P(CommPointToPoint, MessagesBetweenOnePairArriveInIssueOrder) {
  constexpr int kMessages = 6;
  const size_t count = 20000;
  std::vector<std::vector<uint16_t>> buffers;
  std::vector<CommHandle> handles;
  for (int i = 0; i < kMessages && rank < 2; ++i) {
    buffers.push_back(rank == 0 ? message(type, 0, i, count) : unwritten(type, count));
    handles.push_back(rank == 0 ? group.send_async(buffers[i].data(), count, type, 1)
                                : group.recv_async(buffers[i].data(), count, type, 0));
  }
  for (auto handle = handles.rbegin(); handle != handles.rend(); ++handle) handle->wait();
  for (int i = 0; i < kMessages && rank == 1; ++i)
    EXPECT_TRUE(buffers[i] == message(type, 0, i, count)) << "message " << i;
}

// Separate sends to both neighbours and receives from both, all in flight,
// waited receives first and last to first. With two members both neighbours
// are the same member, so its two messages must match in issue order.
TEST_P(CommPointToPoint, HandlesWaitedOutOfIssueOrder) {
  const size_t count = size_t{1} << 16;
  std::vector<uint16_t> to_next = message(type, rank, 0, count),
                        to_prev = message(type, rank, 1, count);
  std::vector<uint16_t> from_prev = unwritten(type, count), from_next = unwritten(type, count);
  CommHandle sent_next = group.send_async(to_next.data(), count, type, next);
  CommHandle sent_prev = group.send_async(to_prev.data(), count, type, prev);
  CommHandle got_prev = group.recv_async(from_prev.data(), count, type, prev);
  CommHandle got_next = group.recv_async(from_next.data(), count, type, next);
  EXPECT_TRUE(got_prev.pending());
  got_next.wait();
  got_prev.wait();
  sent_prev.wait();
  sent_next.wait();
  EXPECT_TRUE(from_prev == message(type, prev, 0, count));
  EXPECT_TRUE(from_next == message(type, next, 1, count));
}

// Only the sender counts: a send_recv counts its send, a lone receive nothing.
TEST_P(CommPointToPoint, StatsCountTheBytesEachMemberSends) {
  const uint64_t ring_count = 7, extra_count = 5, element = wire_bytes(type);
  std::vector<uint16_t> send = message(type, rank, 0, ring_count),
                        recv = unwritten(type, ring_count);
  group.send_recv_async(send.data(), ring_count, next, recv.data(), ring_count, prev, type).wait();
  std::vector<uint16_t> extra = message(type, 0, 1, extra_count);
  if (rank == 0) group.send(extra.data(), extra_count, type, 1);
  if (rank == 1) group.recv(extra.data(), extra_count, type, 0);

  const uint64_t sent = ring_count * element + (rank == 0 ? extra_count * element : 0);
  const CommStats& s = group.stats();
  EXPECT_EQ(s.calls, rank == 0 ? 2u : 1u);
  EXPECT_EQ(s.p2p_sent, sent);
  EXPECT_EQ(s.payload_bytes, sent);
  EXPECT_EQ(s.sent_bytes, sent);
  EXPECT_EQ(s.all_reduce_sent + s.reduce_scatter_sent + s.all_gather_sent + s.broadcast_sent, 0u);
  // Summed over the members, every message is counted once.
  EXPECT_EQ(comm_world().all_reduce_sum(static_cast<double>(s.p2p_sent)),
            static_cast<double>((n * ring_count + extra_count) * element));
  CommStats total;
  total.add(s);
  total.add(s);
  EXPECT_EQ(total.p2p_sent, 2 * sent);
}

TEST_P(CommPointToPointPeers, RefusesPeersOutsideTheGroupAndItselfWithoutCountingThem) {
  std::vector<uint16_t> buffer = unwritten(type, 4), other = unwritten(type, 4);
  EXPECT_EQ(error_of([&] { group.send(buffer.data(), 4, type, n); }),
            "send: peer " + std::to_string(n) + " is outside the group of " + std::to_string(n));
  EXPECT_NE(
      error_of([&] { group.recv(buffer.data(), 4, type, -1); }).find("recv: peer -1 is outside"),
      std::string::npos);
  EXPECT_NE(error_of([&] { group.send(buffer.data(), 4, type, rank); }).find("is this member"),
            std::string::npos);
  EXPECT_NE(error_of([&] { group.recv(buffer.data(), 4, type, rank); }).find("is this member"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              group.send_recv_async(buffer.data(), 4, rank, other.data(), 4, prev, type);
            }).find("send_recv (send): peer"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              group.send_recv_async(nullptr, 0, -1, other.data(), 4, n, type);
            }).find("send_recv (recv): peer"),
            std::string::npos);
  EXPECT_EQ(group.stats().calls, 0u);
  EXPECT_TRUE(buffer == unwritten(type, 4));
  // An empty side has no message, so its peer is not used.
  group.send_recv_async(nullptr, 0, -1, nullptr, 0, n, type).wait();
  EXPECT_EQ(group.stats().calls, 1u);
  EXPECT_EQ(group.stats().p2p_sent, 0u);
}

TEST(CommWorld, PointToPointRejectsCountsBeyondIntMaxAndOverlappingBuffers) {
  Group& world = comm_world();
  if (world.size() < 2) GTEST_SKIP() << "needs two ranks";
  const int peer = (world.rank() + 1) % world.size();
  float dummy[2] = {};
  const size_t too_many = static_cast<size_t>(INT_MAX) + 1;
  const std::string named = std::to_string(too_many);
  EXPECT_NE(error_of([&] { world.send_async(dummy, too_many, WireType::f32, peer); }).find(named),
            std::string::npos);
  EXPECT_NE(error_of([&] { world.recv_async(dummy, too_many, WireType::f32, peer); }).find(named),
            std::string::npos);
  EXPECT_EQ(
      error_of([&] { world.send_recv_async(dummy, 2, peer, dummy + 1, 1, peer, WireType::f32); }),
      "send_recv: send and recv buffers overlap");
}

TEST(CommHandle, WaitRunsOnceAndClearsPending) {
  int runs = 0;
  CommHandle handle([&] { ++runs; });
  EXPECT_TRUE(handle.pending());
  handle.wait();
  handle.wait();
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(handle.pending());
  CommHandle empty;
  EXPECT_FALSE(empty.pending());
  empty.wait();
}

TEST(CommHandle, MovesTransferTheWaitAndAssignmentWaitsTheOldOne) {
  int runs_a = 0, runs_b = 0;
  {
    CommHandle a([&] { ++runs_a; });
    CommHandle moved(std::move(a));
    EXPECT_FALSE(a.pending());
    EXPECT_TRUE(moved.pending());
    CommHandle b([&] { ++runs_b; });
    moved = std::move(b);
    EXPECT_EQ(runs_a, 1);
    EXPECT_EQ(runs_b, 0);
  }
  EXPECT_EQ(runs_a, 1);
  EXPECT_EQ(runs_b, 1);
}

TEST(CommHandle, DestructorWaitsForTheCollective) {
  Group& world = comm_world();
  std::vector<float> data(1 << 16, 1.0f);
  { CommHandle unwaited = world.all_reduce_async(data.data(), data.size(), WireType::f32); }
  EXPECT_EQ(data.front(), static_cast<float>(world.size()));
  EXPECT_EQ(data.back(), static_cast<float>(world.size()));
}

}  // namespace
}  // namespace llm
