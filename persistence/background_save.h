// Saves written while training goes on (checkpoint.async; docs/checkpoints.md,
// "Saving in the background"). At a save the step loop queues copies of this
// rank's share of the state into staging buffers the saver owns (page-locked
// on CUDA, allocated once), on the device's transfer queue behind the
// optimizer step that produced the state; the next step's forward and
// backward run while they copy, and its optimizer update waits for them
// (before_update). At the next step boundary the copies are done and a
// background thread writes and syncs the shard while the next steps run; once
// every rank's shard is durable, world rank 0's thread writes meta.json,
// renames the directory and moves `latest`.
// Invariants:
//  - The state is not overwritten before it is copied: an update waits for
//    the copies queued before it (before_update, on the device's queue), and
//    the write starts only once the host has seen them done.
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

#include "base/worker_thread.h"
#include "device/arena.h"
#include "persistence/checkpoint.h"

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
  // The engine and topology outlive the saver. Allocates the staging
  // buffers now, not in the first save's stall.
  BackgroundSaver(ShardingEngine& engine, Topology& topology);
  // Waits for the background thread's jobs and the queued copies; never
  // moves `latest` itself.
  ~BackgroundSaver();
  BackgroundSaver(const BackgroundSaver&) = delete;
  BackgroundSaver& operator=(const BackgroundSaver&) = delete;

  // Completes the save in flight (waiting for it), then queues the copies of
  // the state after `step` steps (and the trainer's `state`, kept in its
  // metadata); returns the completed save's report, if any. stall_seconds()
  // then holds the new save's stall.
  std::optional<SaveReport> start(const std::string& run_dir, int step, const Config& config,
                                  const TrainerState& state = {});
  // Right before an optimizer update: the device runs the update only after
  // the copies queued by start() (without blocking the host).
  void before_update();
  // At a step boundary: starts writing the copied state; when every rank's shard of the save in
  // flight is written, rank 0 commits it in the background; returns its report once `latest` names
  // it.
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
    std::vector<OwnedSlice> slices;  // the staged copies the write reads
    uint64_t job = 0;                // the last background job of this save
    bool writing = false;            // the write is queued (the copies were done)
    bool agreed = false;             // every rank's shard is written; rank 0 commits
  };

  // Every rank's shard is written: rank 0 queues the commit, the others are done.
  void agree();
  // Rank 0: the commit has run; rethrows its error, else reports.
  SaveReport complete();
  // Queues the copies of this rank's owned state into the staging buffers;
  // returns the slices as they will read from there.
  std::vector<OwnedSlice> queue_copies();
  // Waits (host) for the queued copies, then queues the shard's write.
  void start_write();

  ShardingEngine& engine_;
  Topology& topology_;
  // Per owned slice, in its memory's staging memory: params, m and v
  // (count floats each).
  std::vector<Arena> staging_;
  std::vector<std::array<float*, 3>> buffers_;
  // The memories whose transfer queues hold copies the host has not waited
  // for, with their marks; whether an update must still wait for them.
  std::vector<std::pair<const DeviceMemory*, uint64_t>> copies_;
  bool update_waits_ = false;
  std::unique_ptr<Flight> flight_;
  int started_step_ = -1;
  double stall_seconds_ = 0, waited_seconds_ = 0;
  // Last: its jobs read the members above. At normal priority: at the lowest
  // (WorkerThread's yielding) the step loop's threads starved the write on
  // the CPU backend, and the next save waited for it (docs/checkpoints.md).
  WorkerThread worker_;
};

}  // namespace llm
