// WorkerThread: jobs run in submission order, numbered from 1; finished()
// answers without waiting, wait_for(job) waits for that job alone (not for
// later ones), and a job's exception reaches the next wait.
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <vector>

#include "base/worker_thread.h"

namespace llm {
namespace {

TEST(WorkerThread, JobsAreNumberedAndWaitedForOneByOne) {
  WorkerThread worker;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::vector<int> order;
  EXPECT_TRUE(worker.finished(0));  // job 0 is "none"
  const uint64_t first = worker.submit([&] { order.push_back(1); });
  const uint64_t blocked = worker.submit([&, open] {
    open.wait();
    order.push_back(2);
  });
  const uint64_t last = worker.submit([&] { order.push_back(3); });
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(blocked, 2u);
  EXPECT_EQ(last, 3u);
  worker.wait_for(first);  // returns although job 2 cannot finish yet
  EXPECT_TRUE(worker.finished(first));
  EXPECT_FALSE(worker.finished(blocked));
  EXPECT_FALSE(worker.finished(last));
  EXPECT_EQ(order, std::vector<int>{1});
  gate.set_value();
  worker.wait();
  EXPECT_TRUE(worker.finished(last));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(WorkerThread, AJobsExceptionReachesTheNextWaitAndSkipsTheRestOfTheBatch) {
  WorkerThread worker;
  bool ran_after = false;
  worker.submit([] { throw std::runtime_error("host update failed"); });
  const uint64_t after = worker.submit([&] { ran_after = true; });
  try {
    worker.wait_for(after);
    ADD_FAILURE() << "the job's exception was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "host update failed");
  }
  EXPECT_FALSE(ran_after);
  EXPECT_TRUE(worker.finished(after));
  // Reported once: the next batch runs and waits normally.
  bool ran = false;
  worker.wait_for(worker.submit([&] { ran = true; }));
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace llm
