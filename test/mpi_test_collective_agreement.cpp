// The collectives' agreement check (parallel/collective_agreement.h): members
// that issued the same collectives pass; members whose collectives differ in
// a way the transport does not notice (an all-gather of 4 f32 on some ranks
// and of 8 bf16 on one: the same 16 bytes for MPI) are found, with the group,
// the collective and each member's version named, identically on every rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/collective_agreement.h"
#include "parallel/comm.h"
#include "collectives/watchdog.h"

namespace llm {
namespace {

TEST(CollectiveFingerprint, FollowsOrderSizeAndType) {
  const CollectiveSignature reduce{"all_reduce", 64, "f32", 1}, gather{"all_gather", 64, "f32", 2};
  auto of = [](std::vector<CollectiveSignature> signatures) {
    uint64_t h = 0;
    for (const CollectiveSignature& s : signatures) h = collective_fingerprint(h, s);
    return h;
  };
  EXPECT_NE(of({reduce, gather}), of({gather, reduce}));
  EXPECT_NE(of({reduce}), of({{"all_reduce", 60, "f32", 1}}));
  EXPECT_NE(of({reduce}), of({{"all_reduce", 64, "bf16", 1}}));
  // The position is the sequence itself, not part of a signature.
  EXPECT_EQ(of({reduce}), of({{"all_reduce", 64, "f32", 7}}));
}

class CollectiveAgreement : public testing::Test {
 protected:
  void SetUp() override {
    if (comm_world().size() < 2) GTEST_SKIP() << "needs two ranks or more";
    // Whatever earlier tests left unchecked is the same on every rank.
    ASSERT_EQ(collective_disagreement(comm_world()), "");
    group_ = comm_world().split(0, comm_world().rank());
    group_->set_label("agreement_test");
  }
  std::unique_ptr<Group> group_;
};

TEST_F(CollectiveAgreement, MembersThatIssuedTheSameCollectivesPass) {
  std::vector<float> values(5, 1.0f);
  group_->all_reduce(values.data(), values.size(), WireType::f32);
  EXPECT_EQ(values[0], static_cast<float>(comm_world().size()));
  EXPECT_EQ(collective_disagreement(comm_world()), "");
  group_->all_reduce(values.data(), values.size(), WireType::f32);
  EXPECT_EQ(collective_disagreement(comm_world()), "");
}

TEST_F(CollectiveAgreement, NamesTheFirstCollectiveTheMembersIssuedDifferently) {
  const int size = comm_world().size();
  std::vector<float> values(3, 1.0f);
  group_->all_reduce(values.data(), values.size(), WireType::f32);  // agreed: #1
  // #2: rank 1 passes 8 bf16 where the others pass 4 f32; MPI moves 16 bytes
  // a rank either way and notices nothing.
  std::vector<float> send(4, 2.0f), recv(4 * static_cast<size_t>(size));
  const bool odd_one = comm_world().rank() == 1;
  group_->all_gather(send.data(), recv.data(), odd_one ? 8 : 4,
                     odd_one ? WireType::bf16 : WireType::f32);
  const std::string message = collective_disagreement(comm_world());
  // The other ranks, as the message lists them: "rank 0", "ranks 0 and 2",
  // "ranks 0, 2 and 3", "ranks 0 and 2-4"; an all-gather records its whole
  // output, 16 bytes from each member.
  std::string others = size == 2   ? std::string("rank 0")
                       : size == 4 ? std::string("ranks 0, 2 and 3")
                                   : std::string("ranks 0 and 2");
  if (size > 4) others += fmt::format("-{}", size - 1);
  const std::string bytes = fmt::format("{} bytes", 16 * size);
  EXPECT_NE(message.find("collectives disagree on group 'agreement_test' (mpi, world ranks "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(others + ": all_gather #2 of " + bytes + " (f32)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("rank 1: all_gather #2 of " + bytes + " (bf16)"), std::string::npos)
      << message;
  // Every rank reached the same verdict and words.
  std::vector<float> length{static_cast<float>(message.size())};
  comm_world().all_reduce(length.data(), 1, WireType::f32);
  EXPECT_EQ(length[0], static_cast<float>(message.size() * size));
  // Once the group is gone, what remains agrees.
  group_.reset();
  EXPECT_EQ(collective_disagreement(comm_world()), "");
}

}  // namespace
}  // namespace llm
