// The watchdog's tracking of device operations (collectives/watchdog.h), with
// stand-in completion flags instead of CUDA events: a tracked operation is
// retired once its flag says the device ran it, a host wait on device work
// expires on the oldest tracked operation past the timeout, and a device that
// never finishes with nothing tracked expires as group "device". The expiry
// handler throws here (the real one takes the job down), so each test sees
// what the job's one line would name.
#include <gtest/gtest.h>

#include <future>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "collectives/watchdog.h"

namespace llm {
namespace {

struct Expired {
  std::string op, group;
  uint64_t seq;
  bool collective;
  double waited;
};

class WatchdogTracking : public testing::Test {
 protected:
  void SetUp() override {
    saved_ = watchdog_set_handlers(
        {nullptr, [](const OpRecord& op, const GroupTrace& trace, double waited) {
           throw Expired{op.op, trace.label, op.seq, op.collective, waited};
         }});
    watchdog_configure({kTimeout, "", 16});
    trace_.label = "data";
    trace_.transport = "nccl";
    trace_.world_ranks = {0, 1};
    watchdog_register(&trace_);
  }
  void TearDown() override {
    watchdog_unregister(&trace_);
    watchdog_set_handlers(saved_);
    watchdog_configure({});
  }

  // Issues an operation and tracks it; the returned flag is its completion.
  std::shared_ptr<bool> track(const char* op, int peer = -1) {
    auto done = std::make_shared<bool>(false);
    watchdog_track(trace_, watchdog_issue(trace_, op, 64, "f32", peer), [done] { return *done; });
    return done;
  }

  static constexpr double kTimeout = 0.05;
  GroupTrace trace_;
  WatchdogHandlers saved_;
};

TEST_F(WatchdogTracking, RetiresWhatTheDeviceRanAndRecordsItsEnd) {
  auto first = track("all_reduce"), second = track("all_gather");
  EXPECT_EQ(watchdog_tracked_count(), 2u);
  *first = true;
  // The device finishes its work 30 ms in (within the timeout); the wait
  // retires the finished operation on the way (it checks every 10 ms).
  const double until = watchdog_clock() + 0.03;
  watchdog_wait_device("a test wait", [&] { return watchdog_clock() > until; });
  EXPECT_EQ(watchdog_tracked_count(), 1u);
  EXPECT_EQ(trace_.collectives_entered, 2u);
  EXPECT_EQ(trace_.collectives_completed, 1u);
  *second = true;
  track("broadcast");  // tracking retires the finished front
  EXPECT_EQ(watchdog_tracked_count(), 1u);
  EXPECT_EQ(trace_.collectives_completed, 2u);

  const auto dump = nlohmann::json::parse(flight_recorder_json("test"));
  ASSERT_EQ(dump["entries"].size(), 3u);
  EXPECT_EQ(dump["entries"][0]["op"], "all_reduce");
  EXPECT_EQ(dump["entries"][0]["stream"], "nccl");
  EXPECT_TRUE(dump["entries"][0]["ended"].is_number());
  EXPECT_TRUE(dump["entries"][1]["ended"].is_number());
  EXPECT_TRUE(dump["entries"][2]["ended"].is_null());  // still on the device
}

TEST_F(WatchdogTracking, AHostWaitExpiresOnTheOldestPendingOperation) {
  auto finished = track("all_reduce");
  auto stuck = track("reduce_scatter");
  track("recv", /*peer=*/1);
  *finished = true;
  try {
    watchdog_wait_device("a test wait", [] { return false; });
    FAIL() << "the wait did not expire";
  } catch (const Expired& e) {
    EXPECT_EQ(e.op, "reduce_scatter");
    EXPECT_EQ(e.group, "data");
    EXPECT_EQ(e.seq, 2u);
    EXPECT_TRUE(e.collective);
    EXPECT_GT(e.waited, kTimeout);
    EXPECT_LT(e.waited, kTimeout + 1.0);  // polled every 10 ms; 1 s is a loaded machine's slack
  }
  EXPECT_FALSE(watchdog_current_wait().waiting);  // the expired wait is over
}

TEST_F(WatchdogTracking, PeersAreToldTheOperationTheDeviceIsStuckBehind) {
  track("all_gather");
  CurrentWait seen;
  try {
    watchdog_wait_device("a test wait", [&] {
      seen = watchdog_current_wait();
      return false;
    });
  } catch (const Expired&) {
  }
  ASSERT_TRUE(seen.waiting);
  EXPECT_STREQ(seen.op.op, "all_gather");
  EXPECT_EQ(seen.op.group, "data");
}

TEST_F(WatchdogTracking, ADeviceHungWithNothingTrackedExpiresAsGroupDevice) {
  try {
    watchdog_wait_device("a test wait", [] { return false; });
    FAIL() << "the wait did not expire";
  } catch (const Expired& e) {
    EXPECT_EQ(e.op, "a test wait");
    EXPECT_EQ(e.group, "device");
    EXPECT_GT(e.waited, kTimeout);
  }
}

TEST_F(WatchdogTracking, AnMpiWaitAlsoExpiresOnAStuckDeviceOperation) {
  track("all_reduce");
  // Older than the host collective by more than the 10 ms between checks of
  // the tracked operations, so it is the first past the timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  GroupTrace host;
  host.label = "data/host";
  host.world_ranks = {0, 1};
  const OpRecord& op = watchdog_issue(host, "all_reduce_sum", 8, "f64");
  try {
    watchdog_wait(host, op, [] { return false; });
    FAIL() << "the wait did not expire";
  } catch (const Expired& e) {
    EXPECT_EQ(e.group, "data");
    EXPECT_EQ(e.op, "all_reduce");
  }
}

TEST_F(WatchdogTracking, AGroupGoneDropsItsTrackedOperations) {
  GroupTrace other;
  other.label = "tensor";
  other.world_ranks = {0, 1};
  watchdog_register(&other);
  watchdog_track(other, watchdog_issue(other, "all_gather", 4, "f32"), [] { return false; });
  track("all_reduce");
  EXPECT_EQ(watchdog_tracked_count(), 2u);
  watchdog_unregister(&other);
  EXPECT_EQ(watchdog_tracked_count(), 1u);
}

TEST(WatchdogAbortHooks, RunOnceInOrderAndCanBeRemoved) {
  std::string ran;
  int first = 0, second = 0;
  watchdog_add_abort_hook(&first, [&] { ran += "a"; });
  watchdog_add_abort_hook(&second, [&] { ran += "b"; });
  watchdog_add_abort_hook(&first, [&] { ran += "c"; });
  watchdog_remove_abort_hooks(&second);
  watchdog_run_abort_hooks();
  watchdog_run_abort_hooks();  // re-entered: nothing runs twice
  EXPECT_EQ(ran, "ac");
}

// A hook that does not return (ncclCommAbort waiting on a stopped peer) is
// left behind after its time: the job still goes down, at once after it.
TEST(WatchdogAbortHooks, AHookThatHangsIsLeftBehindInTime) {
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  int owner = 0;
  watchdog_add_abort_hook(&owner, [released] { released.wait(); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(watchdog_run_abort_hooks(0.3));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 10.0);  // far from hanging, even on a loaded machine
  release->set_value();     // lets the abandoned thread finish
  watchdog_add_abort_hook(&owner, [] {});
  EXPECT_TRUE(watchdog_run_abort_hooks(10.0));
}

// Started early (the watchdog's farewell runs beside them), the hooks run at
// once, and their seconds count from the start, not from the wait.
TEST(WatchdogAbortHooks, StartedHooksRunAtOnceAndTheirTimeCountsFromTheStart) {
  auto ran = std::make_shared<std::atomic<bool>>(false);
  int owner = 0;
  watchdog_add_abort_hook(&owner, [ran] { ran->store(true); });
  watchdog_start_abort_hooks();
  for (int i = 0; i < 2000 && !ran->load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(ran->load());  // before anyone waited on them
  EXPECT_TRUE(watchdog_run_abort_hooks(10.0));

  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  watchdog_add_abort_hook(&owner, [released] { released.wait(); });
  watchdog_start_abort_hooks();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(watchdog_run_abort_hooks(1.5));  // its 1.5 s ended 0.5 s ago
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 1.0);  // counted from the wait, it would be 1.5 s at least
  release->set_value();
}

}  // namespace
}  // namespace llm
