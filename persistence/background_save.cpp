// Saves written while training goes on (see background_save.h).
#include "persistence/background_save.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/fault_hooks.h"
#include "device/device_memory.h"
#include "parallel/saved_state.h"

namespace llm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The test hook of docs/testing.md: LLM_FAULT_STALL_SAVE=R:S makes world
// rank R's background write of the checkpoint of step S sleep for an hour
// before it writes, a save in flight for a kill to land in.
void stall_save_for_tests(int world_rank, int step) {
  static const RankFault stall = rank_fault_from_env("LLM_FAULT_STALL_SAVE");
  if (stall.rank == world_rank && stall.value == step)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

size_t background_save_host_bytes(const ShardingEngine& engine, const Topology& topology) {
  if (!topology.checkpoint_writer()) return 0;
  size_t owned = 0;
  for (const OwnedSlice& s : engine.owned_slices()) owned += s.count;
  return owned * kSavedBytesPerElement;
}

BackgroundSaver::BackgroundSaver(ShardingEngine& engine, Topology& topology)
    : engine_(engine), topology_(topology) {
  if (!topology.checkpoint_writer()) return;
  for (const OwnedSlice& s : engine.owned_slices()) {
    Arena& arena = staging_.emplace_back(
        Arena::staging("checkpoint copy", 3 * align_up(s.count * sizeof(float)), *s.memory));
    buffers_.push_back(
        {arena.alloc<float>(s.count), arena.alloc<float>(s.count), arena.alloc<float>(s.count)});
  }
}

BackgroundSaver::~BackgroundSaver() {
  // The device must not copy into staging memory once it is freed. A failed
  // wait here is a failure already being reported (the run is unwinding).
  try {
    for (const auto& [memory, mark] : copies_) memory->wait_for_transfers(mark);
  } catch (const std::exception&) {
  }
}

std::vector<OwnedSlice> BackgroundSaver::queue_copies() {
  std::vector<OwnedSlice> slices = engine_.owned_slices();
  LLM_CHECK(slices.size() == buffers_.size(), "background save: {} owned slices, {} staged",
            slices.size(), buffers_.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    OwnedSlice& s = slices[i];
    const size_t bytes = s.count * sizeof(float);
    LLM_CHECK(3 * align_up(bytes) <= staging_[i].capacity(),
              "background save: slice {} grew to {} bytes", i, bytes);
    const float* sources[3] = {s.params, s.m, s.v};
    for (int part = 0; part < 3; ++part)
      s.memory->to_host_queued(buffers_[i][part], sources[part], bytes);
    const bool noted = std::any_of(copies_.begin(), copies_.end(),
                                   [&](const auto& copy) { return copy.first == s.memory; });
    if (!noted) copies_.push_back({s.memory, 0});
    s.params = buffers_[i][0];
    s.m = buffers_[i][1];
    s.v = buffers_[i][2];
    s.memory = &host_memory();
  }
  for (auto& [memory, mark] : copies_) mark = memory->transfer_mark();
  update_waits_ = !copies_.empty();
  return slices;
}

void BackgroundSaver::before_update() {
  if (!update_waits_) return;
  for (const auto& [memory, mark] : copies_) memory->device_waits_for_transfers();
  update_waits_ = false;
}

void BackgroundSaver::start_write() {
  for (const auto& [memory, mark] : copies_) memory->wait_for_transfers(mark);
  copies_.clear();
  update_waits_ = false;  // the copies are done: nothing left to wait for
  const int rank = topology_.world.rank();
  Flight* f = flight_.get();
  f->writing = true;
  f->job = worker_.submit([this, f, rank] {
    const auto written = Clock::now();
    try {
      stall_save_for_tests(rank, f->save.step);
      checkpoint_save_shard(f->save, f->slices, engine_.layout());
    } catch (...) {
      checkpoint_save_discard(f->save);
      throw;
    }
    f->report.write_seconds += seconds_since(written);
  });
}

std::optional<SaveReport> BackgroundSaver::start(const std::string& run_dir, int step,
                                                 const Config& config, const TrainerState& state) {
  const auto begin = Clock::now();
  // poll() completes a save as soon as every rank's part is done: one still
  // here is being written on some rank.
  if (flight_ && topology_.world.rank() == 0) {
    spdlog::info("step_{}: the save of step_{} is still in flight; waiting for it", step,
                 flight_->save.step);
  }
  std::optional<SaveReport> previous = finish();
  waited_seconds_ = seconds_since(begin);

  auto flight = std::make_unique<Flight>();
  flight->save = checkpoint_save_begin(run_dir, step, config, engine_, topology_, state);
  flight->save.show_progress = false;  // the step lines own the terminal
  if (!flight->save.shard_name.empty()) flight->slices = queue_copies();
  started_step_ = step;
  stall_seconds_ = seconds_since(begin);
  flight->report = {step, flight->save.final_dir, stall_seconds_, waited_seconds_, 0};
  flight_ = std::move(flight);
  return previous;
}

std::optional<SaveReport> BackgroundSaver::poll() {
  if (!flight_) return std::nullopt;
  if (!flight_->writing) start_write();
  if (!flight_->agreed) {
    const bool written = worker_.finished(flight_->job);
    if (written) worker_.wait_for(flight_->job);  // rethrows a failed write
    Group& world = topology_.world;
    if (world.all_reduce_sum(written ? 1.0 : 0.0) < world.size()) return std::nullopt;
    agree();
    if (!flight_) return std::nullopt;
  }
  if (!worker_.finished(flight_->job)) return std::nullopt;
  return complete();
}

std::optional<SaveReport> BackgroundSaver::finish() {
  if (!flight_) return std::nullopt;
  if (!flight_->writing) start_write();
  if (!flight_->agreed) {
    worker_.wait_for(flight_->job);  // rethrows a failed write
    topology_.world.barrier();       // every rank's shard is written
    agree();
    if (!flight_) return std::nullopt;
  }
  return complete();
}

void BackgroundSaver::agree() {
  if (topology_.world.rank() != 0) {
    flight_.reset();
    return;
  }
  flight_->agreed = true;
  Flight* f = flight_.get();
  flight_->job = worker_.submit([f] {
    const auto committed = Clock::now();
    try {
      checkpoint_save_commit(f->save);
    } catch (...) {
      checkpoint_save_discard(f->save);
      throw;
    }
    f->report.write_seconds += seconds_since(committed);
  });
}

SaveReport BackgroundSaver::complete() {
  worker_.wait_for(flight_->job);  // rethrows a failed commit
  SaveReport report = flight_->report;
  flight_.reset();
  return report;
}

}  // namespace llm
