// Saves written while training goes on (checkpoint.async; docs/checkpoints.md,
// "Saving in the background"). At a save the step loop copies this rank's
// share of the state into host buffers the saver owns and hands them to a
// background thread, which writes and syncs the shard while the next steps
// run; once every rank's shard is durable, world rank 0's thread writes
// meta.json, renames the directory and moves `latest`.
// Invariants:
//  - At most one save in flight: a save that finds the previous one still
//    being written waits for it, and reports how long it waited.
//  - `latest` moves only after every writer's shard is synced: the ranks
//    agree on it by a collective on the step loop's thread (poll), never on
//    the background thread.
//  - Every method is collective over the world and called by every rank at
//    the same steps, so the ranks issue the same collectives.
//  - A failure of the background thread is rethrown on the step loop's
//    thread by the next poll, start or finish; its temporary directory is
//    removed, and `latest` stays where it was.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "persistence/checkpoint.h"
#include "base/worker_thread.h"

namespace llm {

// A save, once `latest` names it (reported on world rank 0 only).
struct SaveReport {
  int step = 0;
  std::string dir;
  double stall_seconds = 0;   // the step loop's time in start(): waiting, then copying
  double waited_seconds = 0;  // of which waiting for the save before it
  double write_seconds = 0;   // rank 0's background work: its shard, meta.json, the rename
};

// The host bytes a background save of this rank's state holds (its share of
// fp32 parameters and both moments; 0 on ranks that write no shard).
size_t background_save_host_bytes(const ShardingEngine& engine, const Topology& topology);

class BackgroundSaver {
 public:
  // The engine and topology outlive the saver. Allocates the host buffers
  // now, not in the first save's stall.
  BackgroundSaver(ShardingEngine& engine, Topology& topology);
  // Waits for the background thread's jobs; never moves `latest` itself.
  ~BackgroundSaver();
  BackgroundSaver(const BackgroundSaver&) = delete;
  BackgroundSaver& operator=(const BackgroundSaver&) = delete;

  // Completes the save in flight (waiting for it), then copies the state
  // after `step` steps aside and starts writing it; returns the completed
  // save's report, if any. stall_seconds() then holds the new save's stall.
  std::optional<SaveReport> start(const std::string& run_dir, int step, const Config& config,
                                  const TrainerState& state = {});
  // At a step boundary: when every rank's shard of the save in flight is
  // written, rank 0 commits it in the background; returns its report once
  // `latest` names it.
  std::optional<SaveReport> poll();
  // Waits for the save in flight to be written and committed (the end of a
  // run, a stop signal); returns its report.
  std::optional<SaveReport> finish();

  // The save started last: its step, stall and wait.
  int started_step() const { return started_step_; }
  double stall_seconds() const { return stall_seconds_; }
  double waited_seconds() const { return waited_seconds_; }

 private:
  struct Flight {
    CheckpointSave save;
    SaveReport report;
    uint64_t job = 0;     // the last background job of this save
    bool agreed = false;  // every rank's shard is written; rank 0 commits
  };

  // Every rank's shard is written: rank 0 queues the commit, the others are done.
  void agree();
  // Rank 0: the commit has run; rethrows its error, else reports.
  SaveReport complete();
  // This rank's owned state, copied into buffers_.
  std::vector<OwnedSlice> copy_state();

  ShardingEngine& engine_;
  Topology& topology_;
  std::vector<std::array<std::vector<float>, 3>> buffers_;  // params, m, v per owned slice
  std::unique_ptr<Flight> flight_;
  int started_step_ = -1;
  double stall_seconds_ = 0, waited_seconds_ = 0;
  // Last: its jobs read the members above. At normal priority: at the lowest
  // (WorkerThread's yielding) the step loop's threads starved the write on
  // the CPU backend, and the next save waited for it (docs/checkpoints.md).
  WorkerThread worker_;
};

}  // namespace llm
