// The block scheduler (block_scheduler.h): a pool of fibers per host thread,
// the sweeps that resume them in the chosen order (each fiber hands on to the
// next ready one itself), and the block and warp rendezvous they wait in.
// Invariant: a rendezvous releases its waiters only when every thread it
// needs has arrived from the same site; a sweep that resumes no thread while
// some have not ended is a deadlock, reported naming the waits.
#include "cuda_emulation/block_scheduler.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_emulation/fiber.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kFiberStackBytes = size_t{1} << 20;  // sanitizers' frames are larger
#else
constexpr size_t kFiberStackBytes = size_t{256} << 10;
#endif

namespace cuda_emulation {

thread_local const ThreadCoordinates* current_coordinates = nullptr;

namespace {

constexpr int kWarpSize = 32;

enum class State { ready, at_barrier, in_warp_operation, exited };

struct BlockRunner;

struct GpuThread {
  GpuThread(BlockRunner* runner_, int index_);
  BlockRunner* runner;
  int index;  // linear thread index in the block
  ThreadCoordinates coordinates{};
  State state = State::exited;
  FiberContext context;
};

struct WarpRendezvous {
  const char* what = nullptr;
  int waiting = 0;
  int exited = 0;
  void* arguments[kWarpSize] = {};
};

// One per host thread: the fibers and the state of the block it runs.
struct BlockRunner {
  FiberContext scheduler;
  std::vector<std::unique_ptr<GpuThread>> threads;  // grows to the largest block
  const Grid* grid = nullptr;
  int block_threads = 0;
  GpuThread* running = nullptr;
  void* dynamic_shared = nullptr;
  // The block barrier: its site, how many wait there, how many have ended.
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  int at_barrier = 0;
  int exited = 0;
  std::vector<WarpRendezvous> warps;
  std::string fault;  // set once; the grid is then abandoned

  ~BlockRunner() {
    // Fibers abandoned by a fault are dropped with their stacks.
    threads.clear();
  }

  void ensure_threads(int n) {
    while ((int)threads.size() < n)
      threads.push_back(std::make_unique<GpuThread>(this, (int)threads.size()));
  }

  // The first ready thread after thread index `after` in the scheduling
  // order, or null; a sweep starts after -1 (forward) or block_threads.
  GpuThread* next_ready(int after) const {
    if (schedule_order() == ScheduleOrder::forward) {
      for (int i = after + 1; i < block_threads; i++)
        if (threads[i]->state == State::ready) return threads[i].get();
    } else {
      for (int i = after - 1; i >= 0; i--)
        if (threads[i]->state == State::ready) return threads[i].get();
    }
    return nullptr;
  }

  // Switches from `thread`, now waiting or ended, straight to the sweep's
  // next ready thread (one switch, not two through the scheduler), or back
  // to the scheduler at the sweep's end or after a fault.
  void yield(GpuThread& thread) {
    GpuThread* next = fault.empty() ? next_ready(thread.index) : nullptr;
    if (!next) {
      running = nullptr;
      FiberContext::switch_to(thread.context, scheduler);
      return;
    }
    resume(next, thread.context);
  }

  void resume(GpuThread* thread, FiberContext& from) {
    running = thread;
    current_coordinates = &thread->coordinates;
    FiberContext::switch_to(from, thread->context);
  }

  [[noreturn]] void stop(GpuThread& thread, std::string why) {
    if (fault.empty()) fault = std::move(why);
    yield(thread);
    std::abort();  // an abandoned fiber is never resumed
  }
};

thread_local BlockRunner* this_thread_runner = nullptr;

BlockRunner& runner() {
  if (!this_thread_runner)
    this_thread_runner = new BlockRunner();  // lives as long as the host thread
  return *this_thread_runner;
}

void thread_main(void* argument) {
  auto* thread = static_cast<GpuThread*>(argument);
  thread->context.started();
  for (;;) {
    BlockRunner& r = *thread->runner;
    r.grid->thread();
    thread->state = State::exited;
    r.exited++;
    WarpRendezvous& warp = r.warps[thread->index / kWarpSize];
    warp.exited++;
    if (r.at_barrier > 0) {
      char why[256];
      std::snprintf(why, sizeof why,
                    "thread %d of the block ends while %d threads wait at __syncthreads (%s:%d)",
                    thread->index, r.at_barrier, r.barrier_file, r.barrier_line);
      r.stop(*thread, why);
    }
    if (warp.waiting > 0) {
      char why[256];
      std::snprintf(why, sizeof why, "lane %d of warp %d ends while %d lanes wait in %s",
                    thread->index % kWarpSize, thread->index / kWarpSize, warp.waiting, warp.what);
      r.stop(*thread, why);
    }
    r.yield(*thread);
  }
}

GpuThread::GpuThread(BlockRunner* runner_, int index_)
    : runner(runner_), index(index_), context(thread_main, this, kFiberStackBytes) {}

GpuThread& running_thread() {
  BlockRunner& r = runner();
  if (!r.running) {
    std::fprintf(stderr, "CUDA emulation: a device function was called outside a kernel\n");
    std::abort();
  }
  return *r.running;
}

uint3 coordinates_of(unsigned linear, dim3 shape) {
  return {linear % shape.x, linear / shape.x % shape.y, linear / (shape.x * shape.y)};
}

std::string describe_deadlock(const BlockRunner& r) {
  char why[256];
  if (r.at_barrier > 0) {
    std::snprintf(why, sizeof why,
                  "%d threads wait at __syncthreads (%s:%d) that %d ended threads never reach",
                  r.at_barrier, r.barrier_file, r.barrier_line, r.exited);
    return why;
  }
  for (size_t w = 0; w < r.warps.size(); w++) {
    if (r.warps[w].waiting == 0) continue;
    std::snprintf(why, sizeof why, "%d lanes of warp %zu wait in %s that other lanes never reach",
                  r.warps[w].waiting, w, r.warps[w].what);
    return why;
  }
  return "no thread can go on";
}

// Runs one block to its end, or until a fault.
void run_block(BlockRunner& r, unsigned block_linear) {
  const Grid& g = *r.grid;
  const int n = r.block_threads;
  const uint3 block_idx = coordinates_of(block_linear, g.grid);
  for (int i = 0; i < n; i++) {
    GpuThread& t = *r.threads[i];
    t.coordinates = {coordinates_of((unsigned)i, g.block), block_idx, g.block, g.grid};
    t.state = State::ready;
  }
  r.at_barrier = 0;
  r.exited = 0;
  for (WarpRendezvous& w : r.warps) w = WarpRendezvous{};
  if (r.dynamic_shared) std::memset(r.dynamic_shared, 0xFF, g.shared_bytes);  // NaN in f32 and bf16

  while (r.exited < n) {
    // A sweep: the first ready thread in the scheduling order, which hands
    // on to the next (BlockRunner::yield) until the last hands back here.
    GpuThread* first = r.next_ready(schedule_order() == ScheduleOrder::forward ? -1 : n);
    if (!first) {
      r.fault = describe_deadlock(r);
      return;
    }
    r.resume(first, r.scheduler);
    if (!r.fault.empty()) return;
  }
}

}  // namespace

ScheduleOrder schedule_order() {
  static const ScheduleOrder order = [] {
    const char* value = std::getenv("LLM_CUDA_EMULATION_ORDER");
    if (!value || !*value || std::strcmp(value, "forward") == 0) return ScheduleOrder::forward;
    if (std::strcmp(value, "reverse") == 0) return ScheduleOrder::reverse;
    std::fprintf(stderr, "CUDA emulation: LLM_CUDA_EMULATION_ORDER=%s: use forward or reverse\n",
                 value);
    std::exit(2);
  }();
  return order;
}

std::string run_grid(const Grid& grid) {
  BlockRunner& r = runner();
  const ScheduleOrder order = schedule_order();
  r.grid = &grid;
  r.block_threads = (int)(grid.block.x * grid.block.y * grid.block.z);
  r.ensure_threads(r.block_threads);
  r.warps.assign((r.block_threads + kWarpSize - 1) / kWarpSize, WarpRendezvous{});
  r.fault.clear();
  r.dynamic_shared = nullptr;
  if (grid.shared_bytes > 0 && posix_memalign(&r.dynamic_shared, 128, grid.shared_bytes) != 0) {
    return "dynamic shared memory could not be allocated";
  }
  const uint64_t blocks = (uint64_t)grid.grid.x * grid.grid.y * grid.grid.z;
  for (uint64_t b = 0; b < blocks && r.fault.empty(); b++) {
    const uint64_t block = order == ScheduleOrder::forward ? b : blocks - 1 - b;
    run_block(r, (unsigned)block);
    if (!r.fault.empty()) {
      const uint3 at = coordinates_of((unsigned)block, grid.grid);
      char where[96];
      std::snprintf(where, sizeof where, " (block %u,%u,%u)", at.x, at.y, at.z);
      r.fault += where;
    }
  }
  std::free(r.dynamic_shared);
  r.dynamic_shared = nullptr;
  current_coordinates = nullptr;
  std::string fault = std::move(r.fault);
  r.fault.clear();
  if (!fault.empty()) {
    // Abandoned fibers are mid-kernel: start the next grid from fresh ones.
    delete this_thread_runner;
    this_thread_runner = nullptr;
  }
  return fault;
}

void sync_block(const char* file, int line) {
  GpuThread& t = running_thread();
  BlockRunner& r = *t.runner;
  if (r.at_barrier == 0) {
    r.barrier_file = file;
    r.barrier_line = line;
  } else if (line != r.barrier_line ||
             (file != r.barrier_file && std::strcmp(file, r.barrier_file) != 0)) {
    char why[512];
    std::snprintf(why, sizeof why,
                  "threads of one block wait at different __syncthreads: %s:%d and %s:%d",
                  r.barrier_file, r.barrier_line, file, line);
    r.stop(t, why);
  }
  if (r.exited > 0) {
    char why[256];
    std::snprintf(why, sizeof why,
                  "__syncthreads (%s:%d) is reached after %d threads of the block ended", file,
                  line, r.exited);
    r.stop(t, why);
  }
  t.state = State::at_barrier;
  if (++r.at_barrier == r.block_threads) {
    for (int i = 0; i < r.block_threads; i++) r.threads[i]->state = State::ready;
    r.at_barrier = 0;
  }
  r.yield(t);
}

void sync_warp(const char* what, void* argument,
               void (*on_all_arrived)(void** arguments, int lanes)) {
  GpuThread& t = running_thread();
  BlockRunner& r = *t.runner;
  const int warp_index = t.index / kWarpSize, lane = t.index % kWarpSize;
  WarpRendezvous& warp = r.warps[warp_index];
  const int lanes = std::min(kWarpSize, r.block_threads - warp_index * kWarpSize);
  if (warp.waiting == 0) {
    warp.what = what;
  } else if (what != warp.what && std::strcmp(what, warp.what) != 0) {
    char why[256];
    std::snprintf(why, sizeof why, "lanes of warp %d meet in different operations: %s and %s",
                  warp_index, warp.what, what);
    r.stop(t, why);
  }
  if (warp.exited > 0) {
    char why[256];
    std::snprintf(why, sizeof why, "%s is reached after %d lanes of warp %d ended", what,
                  warp.exited, warp_index);
    r.stop(t, why);
  }
  warp.arguments[lane] = argument;
  t.state = State::in_warp_operation;
  if (++warp.waiting == lanes) {
    on_all_arrived(warp.arguments, lanes);
    for (int i = 0; i < lanes; i++) r.threads[warp_index * kWarpSize + i]->state = State::ready;
    warp.waiting = 0;
  }
  r.yield(t);
}

void* dynamic_shared_memory() { return running_thread().runner->dynamic_shared; }

void kernel_fault(const char* why) {
  GpuThread& t = running_thread();
  t.runner->stop(t, why);
}

void check_full_mask(unsigned mask, const char* what) {
  if (mask != 0xffffffffu) {
    char why[128];
    std::snprintf(why, sizeof why, "%s with mask 0x%x: the emulation supports whole warps only",
                  what, mask);
    kernel_fault(why);
  }
}

}  // namespace cuda_emulation
