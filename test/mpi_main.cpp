// GoogleTest main for suites that run under mpirun (every rank runs every
// test, in the same order). Rank 0 prints gtest's usual report; other ranks
// print only their failures, prefixed with their rank. After each test the
// ranks exchange a failure flag (with raw MPI, independent of the code under
// test) and rank 0 fails the test naming the ranks that failed it.
// Invariant: the process exits non-zero on every rank if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "parallel/comm.h"

namespace {

// Replaces the default printer on ranks other than 0.
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
};

// Collects every rank's verdict on each test; rank 0 turns a failure on
// another rank into a failure of that test.
class CrossRankVerdict : public testing::EmptyTestEventListener {
 public:
  explicit CrossRankVerdict(int rank) : rank_(rank) {}
  void OnTestEnd(const testing::TestInfo& test) override {
    int failed = test.result()->Failed() ? 1 : 0;
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<int> failed_by_rank(size);
    MPI_Allgather(&failed, 1, MPI_INT, failed_by_rank.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    std::string others;
    for (int r = 1; r < size; ++r) {
      if (!failed_by_rank[r]) continue;
      others += ' ';
      others += std::to_string(r);
    }
    if (!others.empty())
      ADD_FAILURE() << "failed on rank(s)" << others << " (see their [rank N] lines)";
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int rank = llm::comm_world().rank();
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  // Appended last, so its OnTestEnd runs before the printer's (gtest calls
  // end events in reverse order) and the added failure is reported.
  listeners.Append(new CrossRankVerdict(rank));
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}
