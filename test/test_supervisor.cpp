// The supervisor's parts (`./train supervise`,
// docs/failure.md#a-job-that-comes-back-train-supervise): what each exit
// status means for a relaunch, the launcher's command line read and
// rewritten, the rank and host a failed job's output names, the
// restarts.jsonl record, and the hosts of an elastic job. The whole loop
// runs in supervise_test.sh and supervise_elastic_test.sh.
#include <sys/wait.h>

#include <csignal>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "commands/failure_culprit.h"
#include "commands/host_pool.h"
#include "commands/launch_command.h"
#include "commands/restart_log.h"
#include "base/exit_status.h"
#include "base/file_io.h"
#include "test/error_of.h"
#include "test/temp_dir.h"
#include "test/tensorboard_reader.h"

namespace llm {
namespace {

using test_support::error_of;
using test_support::TempDir;

// waitpid()'s encodings (Linux): an exit status in bits 8-15, a signal in 0-6.
int exited_with(int status) { return status << 8; }
int killed_by(int signal) { return signal; }

TEST(JobEnding, OnlyWhatTheInputCausedIsNeverRestarted) {
  ASSERT_TRUE(WIFEXITED(exited_with(75)) && WEXITSTATUS(exited_with(75)) == 75);
  ASSERT_TRUE(WIFSIGNALED(killed_by(SIGKILL)) && WTERMSIG(killed_by(SIGKILL)) == SIGKILL);
  EXPECT_TRUE(classify_job_ending(exited_with(0)).finished);
  for (int permanent : {kExitError, kExitUsage, 126, 127}) {
    const JobEnding ending = classify_job_ending(exited_with(permanent));
    EXPECT_FALSE(ending.finished || ending.restartable) << permanent;
    EXPECT_EQ(ending.exit_status, permanent);
  }
  for (int restartable : {kExitRestartable, 128 + SIGKILL, 3}) {
    EXPECT_TRUE(classify_job_ending(exited_with(restartable)).restartable) << restartable;
  }
  const JobEnding killed = classify_job_ending(killed_by(SIGKILL));
  EXPECT_TRUE(killed.restartable);
  EXPECT_EQ(killed.exit_status, 128 + SIGKILL);
  EXPECT_CONTAINS(killed.why, "signal 9");
  EXPECT_CONTAINS(classify_job_ending(exited_with(137)).why, "signal 9");
}

TEST(LaunchCommand, ReadsTheTrainersConfigAndTheLaunchersHosts) {
  const LaunchCommand command = launch_command_read(
      {"mpirun", "-np", "4", "--hostfile", "hosts", "--oversubscribe", "./train", "--config",
       "configs/tiny.toml", "--training.steps=60", "--checkpoint.dir", "runs/a"});
  EXPECT_EQ(command.config, "configs/tiny.toml");
  EXPECT_EQ(command.overrides,
            (std::vector<std::string>{"training.steps=60", "checkpoint.dir=runs/a"}));
  EXPECT_EQ(command.world_size, 4);
  EXPECT_EQ(command.hostfile, "hosts");
  EXPECT_EQ(launch_command_with_hosts(command, 2, "runs/a/hostfile"),
            (std::vector<std::string>{"mpirun", "-np", "2", "--hostfile", "runs/a/hostfile",
                                      "--oversubscribe", "./train", "--config", "configs/tiny.toml",
                                      "--training.steps=60", "--checkpoint.dir", "runs/a"}));
  const LaunchCommand alone = launch_command_read({"./train", "--config=tiny"});
  EXPECT_EQ(alone.config, "tiny");
  EXPECT_EQ(alone.world_size, 0);
  EXPECT_CONTAINS(error_of([&] { launch_command_with_hosts(alone, 1, "h"); }), "-np");
  EXPECT_CONTAINS(error_of([] {
                    launch_command_read({"mpirun", "-np", "2", "./train"});
                  }),
                  "no --config FILE");
  EXPECT_CONTAINS(error_of([] {
                    launch_command_read({"mpirun", "-np", "four", "./train", "--config", "t"});
                  }),
                  "--np: expected an integer, got 'four'");
  EXPECT_CONTAINS(error_of([] {
                    launch_command_read({"./train", "--config", "tiny", "--bench-steps", "3"});
                  }),
                  "--bench-steps");
}

TEST(FailureCulprit, NamesTheRankAndHostTheJobsOutputNames) {
  const FailureCulprit killed = failure_culprit(
      "step 7 | loss 5.1\n"
      "mpirun noticed that process rank 2 with PID 812 on node hostb exited on signal 9 "
      "(Killed).\n");
  EXPECT_EQ(killed.rank, 2);
  EXPECT_EQ(killed.host, "hostb");
  // The watchdog's lines: the member that never answered, not the rank reporting.
  const FailureCulprit stalled = failure_culprit(
      "rank 0: error: watchdog: all_reduce_sum #5 on group world (8 B f64) did not complete in "
      "6.0 s (parallel.timeout 6 s); never reached by: rank 1 (at #4, waiting 6.0 s)\n"
      "rank 2: error: watchdog: all_gather #1999 on group tensor (16.00 KiB f32) did not "
      "complete in 6.0 s; never reached by: rank 3 (no answer: stopped, hung outside a "
      "collective, or its host is lost)\n");
  EXPECT_EQ(stalled.rank, 3);
  EXPECT_EQ(stalled.host, "");
  EXPECT_EQ(stalled.error.substr(0, 30), "watchdog: all_reduce_sum #5 on");
  const FailureCulprit nccl = failure_culprit(
      "x\nrank 1: error: NCCL error: ncclAllReduce (all_reduce #118 on group 'replicate') "
      "failed: unhandled system error\nrank 0: error: watchdog: ...\n");
  EXPECT_EQ(nccl.rank, 1);
  EXPECT_EQ(nccl.error,
            "NCCL error: ncclAllReduce (all_reduce #118 on group 'replicate') failed: unhandled "
            "system error");
  EXPECT_EQ(failure_culprit("Segmentation fault\n").rank, -1);
}

TEST(RestartLog, AppendsOneLinePerRestart) {
  TempDir dir("restart_log_");
  RestartRecord record;
  record.restart = 1;
  record.why = "exit status 75";
  record.error = "NCCL error: ncclAllReduce (all_reduce #3 on group 'world') failed: x";
  record.exit_status = 75;
  record.rank = 3;
  record.host = "hostb";
  record.resumed_from_step = 20;
  record.time_lost_seconds = 4.5;
  restart_log_write(dir.str(), dir.file("tensorboard"), record);
  record.restart = 2;
  record.resumed_from_step = 30;
  record.hosts_set_aside = {"hostb"};
  restart_log_write(dir.str(), dir.file("tensorboard"), record);
  const std::string text = read_file(dir.file("restarts.jsonl"));
  const auto newline = text.find('\n');
  const nlohmann::json first = nlohmann::json::parse(text.substr(0, newline));
  const nlohmann::json second = nlohmann::json::parse(text.substr(newline + 1));
  EXPECT_EQ(first["restart"], 1);
  EXPECT_EQ(first["rank"], 3);
  EXPECT_EQ(first["error"], record.error);
  EXPECT_EQ(first["host"], "hostb");
  EXPECT_EQ(first["step"], 20);
  EXPECT_EQ(second["hosts_set_aside"], nlohmann::json::array({"hostb"}));
  // TensorBoard: the numbers at the step resumed from, a file per restart.
  EXPECT_EQ(test_support::event_files(dir.file("tensorboard")).size(), 2u);
  auto series = test_support::scalar_series(dir.file("tensorboard"));
  EXPECT_EQ(series["restart/restart"], (std::map<int64_t, float>{{20, 1.0f}, {30, 2.0f}}));
  EXPECT_EQ(series["restart/time_lost_seconds"][20], 4.5f);
  EXPECT_EQ(series["restart/rank"][30], 3.0f);
}

TEST(HostPool, HostfilesAndPlacementBySlot) {
  TempDir dir("host_pool_");
  write_file_synced(dir.file("hosts"),
                    "# the cluster\nhosta slots=2\n\nhostb slots=3 max_slots=4\n");
  const std::vector<Host> hosts = hostfile_read(dir.file("hosts"));
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(total_slots(hosts), 5);
  EXPECT_EQ(host_of_rank(hosts, 1), "hosta");
  EXPECT_EQ(host_of_rank(hosts, 2), "hostb");
  EXPECT_EQ(host_of_rank(hosts, 5), "");
  hostfile_write(dir.file("copy"), hosts);
  EXPECT_EQ(read_file(dir.file("copy")), "hosta slots=2\nhostb slots=3\n");
  write_file_synced(dir.file("bad"), "hosta slots=2\nhostb slots=two\n");
  EXPECT_CONTAINS(error_of([&] { hostfile_read(dir.file("bad")); }), "bad:2: expected slots=N");
  // 4, 2 and 1 divide a global batch of 4; 3 does not.
  EXPECT_EQ(largest_fitting_world(3, [](int world) { return 4 % world == 0; }), 2);
}

std::vector<std::string> names(const std::vector<Host>& hosts) {
  std::vector<std::string> out;
  for (const Host& host : hosts) out.push_back(host.name);
  return out;
}

TEST(HostPool, AHostFailingAgainIsSetAsideThenTriedAgain) {
  HostPool pool({{"hosta", 2}, {"hostb", 2}}, /*set_aside_after=*/2, /*retry_after=*/2);
  auto any = [](const std::vector<Host>& hosts) { return !hosts.empty(); };
  using Names = std::vector<std::string>;
  pool.record_failure("hostb");
  EXPECT_EQ(names(pool.next_launch(any)), (Names{"hosta", "hostb"}));  // once is not enough
  pool.record_failure("hosta");  // another host: hostb's run is broken
  pool.record_failure("hostb");
  EXPECT_EQ(names(pool.next_launch(any)), (Names{"hosta", "hostb"}));
  pool.record_failure("hostb");  // twice in a row
  EXPECT_EQ(names(pool.next_launch(any)), (Names{"hosta"}));
  EXPECT_EQ(pool.set_aside(), (Names{"hostb"}));
  EXPECT_EQ(names(pool.next_launch(any)), (Names{"hosta"}));  // sits out 2 launches
  EXPECT_EQ(names(pool.next_launch(any)), (Names{"hosta", "hostb"}));
  EXPECT_TRUE(pool.set_aside().empty());
  // Never set aside when the hosts left cannot run the job.
  pool.record_failure("hosta");
  pool.record_failure("hosta");
  auto needs_four_slots = [](const std::vector<Host>& hosts) { return total_slots(hosts) >= 4; };
  EXPECT_EQ(names(pool.next_launch(needs_four_slots)), (Names{"hosta", "hostb"}));
}

}  // namespace
}  // namespace llm
