// Emulated streams and events (streams.h): a stream is a host thread that
// runs its queue in order; an event is the count of its records and how far
// they have run, so waits and synchronizes are real synchronization between
// host threads, and a missing wait between two streams is a visible race.
// Invariants: cudaStreamWaitEvent and cudaEventSynchronize wait for the
// record made before the call, never a later one (as CUDA captures it);
// once the sticky error is set no queued work runs any more; work queued on
// a capturing stream goes to its capture (graphs.h) instead, and no host may
// wait on that stream or on an event recorded in the capture.
#include "cuda_emulation/streams.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda_emulation/graphs.h"

struct CUstream_st {
  int index = 0;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<cuda_emulation::Work> queue;
  uint64_t queued = 0, finished = 0;
};

struct CUevent_st {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0;  // records made so far
  uint64_t reached = 0;   // the latest record its stream has run
  std::chrono::steady_clock::time_point reached_at{};
  bool timing = true;
  bool captured = false;  // last recorded in a capturing stream: no host may wait on it
};

namespace cuda_emulation {

namespace {

std::mutex sticky_mutex;
cudaError_t sticky = cudaSuccess;
std::string sticky_message;

// Every stream made, never destroyed while the process runs: a worker may
// still be finishing when cudaStreamDestroy is called, and the project makes
// a handful at start-up.
struct StreamRegistry {
  std::mutex mutex;
  std::vector<CUstream_st*> streams;
};
StreamRegistry& registry() {
  static StreamRegistry* r = new StreamRegistry();
  return *r;
}

void run_worker(CUstream_st* stream) {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(stream->mutex);
      stream->changed.wait(lock, [&] { return !stream->queue.empty(); });
      work = std::move(stream->queue.front());
      stream->queue.pop_front();
    }
    if (sticky_error() == cudaSuccess) {
      try {
        work();
      } catch (const std::exception& e) {
        fail(cudaErrorLaunchFailure, e.what());
      }
    }
    work = nullptr;  // what it captured goes before the stream counts it done
    {
      std::lock_guard<std::mutex> lock(stream->mutex);
      stream->finished++;
    }
    stream->changed.notify_all();
  }
}

CUstream_st* make_stream() {
  auto* stream = new CUstream_st();
  {
    StreamRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    stream->index = (int)r.streams.size();
    r.streams.push_back(stream);
  }
  std::thread(run_worker, stream).detach();
  return stream;
}

CUstream_st* resolve(cudaStream_t stream) {
  if (stream) return stream;
  static CUstream_st* default_stream = make_stream();  // index 0 when made first
  return default_stream;
}

void wait_until_finished(CUstream_st* stream, uint64_t count) {
  std::unique_lock<std::mutex> lock(stream->mutex);
  stream->changed.wait(lock, [&] { return stream->finished >= count; });
}

}  // namespace

cudaError_t enqueue(cudaStream_t stream, Work work) {
  if (cudaError_t error = sticky_error()) return error;
  if (std::optional<cudaError_t> captured = capture_work(stream, work)) return *captured;
  CUstream_st* s = resolve(stream);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->queue.push_back(std::move(work));
    s->queued++;
  }
  s->changed.notify_all();
  return cudaSuccess;
}

void fail(cudaError_t error, const std::string& message) {
  std::lock_guard<std::mutex> lock(sticky_mutex);
  std::fprintf(stderr, "CUDA emulation: %s\n", message.c_str());
  if (sticky != cudaSuccess) return;
  sticky = error;
  sticky_message = message;
}

cudaError_t sticky_error() {
  std::lock_guard<std::mutex> lock(sticky_mutex);
  return sticky;
}

std::string sticky_error_message() {
  std::lock_guard<std::mutex> lock(sticky_mutex);
  return sticky_message;
}

int stream_index(cudaStream_t stream) { return resolve(stream)->index; }

void wait_for_all_streams() {
  std::vector<CUstream_st*> streams;
  {
    StreamRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    streams = r.streams;
  }
  for (CUstream_st* s : streams) {
    uint64_t queued;
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      queued = s->queued;
    }
    wait_until_finished(s, queued);
  }
}

}  // namespace cuda_emulation

using cuda_emulation::sticky_error;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream || (flags & ~cudaStreamNonBlocking)) return cudaErrorInvalidValue;
  *stream = cuda_emulation::make_stream();
  return sticky_error();
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  // Its worker finishes what is queued; the stream object stays (see StreamRegistry).
  return stream ? sticky_error() : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t refused = cuda_emulation::refuse_if_capturing(stream))
    return cuda_emulation::record_last_error(refused);
  CUstream_st* s = cuda_emulation::resolve(stream);
  uint64_t queued;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    queued = s->queued;
  }
  cuda_emulation::wait_until_finished(s, queued);
  return sticky_error();
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t refused = cuda_emulation::refuse_if_unsafe())
    return cuda_emulation::record_last_error(refused);
  cuda_emulation::wait_for_all_streams();
  return sticky_error();
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event || (flags & ~cudaEventDisableTiming)) return cudaErrorInvalidValue;
  *event = new CUevent_st();
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return sticky_error();
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  // A stream may still have to run its record or a wait on it: it is freed
  // once both have run (CUDA too defers the release to then).
  cuda_emulation::wait_for_all_streams();
  delete event;
  return sticky_error();
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return cudaErrorInvalidResourceHandle;
  // In a capture the record is a node of the graph; on one stream, which is
  // all the emulation captures, it orders nothing the stream does not.
  cuda_emulation::Work nothing = [] {};
  if (std::optional<cudaError_t> captured = cuda_emulation::capture_work(stream, nothing)) {
    std::lock_guard<std::mutex> lock(event->mutex);
    event->captured = true;
    return *captured;
  }
  uint64_t record;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    record = ++event->recorded;
    event->captured = false;
  }
  return cuda_emulation::enqueue(stream, [event, record] {
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      if (record > event->reached) {
        event->reached = record;
        event->reached_at = std::chrono::steady_clock::now();
      }
    }
    event->changed.notify_all();
  });
}

namespace {
bool recorded_in_capture(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->captured;
}
// The record made before now, and a wait until its stream has run it.
uint64_t latest_record(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->recorded;
}
void wait_for_record(cudaEvent_t event, uint64_t record) {
  // After a failure the record may never run (queued work is skipped): the
  // wait then ends with the sticky error, checked every few milliseconds.
  std::unique_lock<std::mutex> lock(event->mutex);
  while (event->reached < record && sticky_error() == cudaSuccess)
    event->changed.wait_for(lock, std::chrono::milliseconds(20));
}
}  // namespace

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (!event) return cudaErrorInvalidResourceHandle;
  if (flags != 0) return cudaErrorInvalidValue;
  if (recorded_in_capture(event)) {
    // Within its own capture the wait orders nothing more; from another
    // stream it would fork the capture there, which CUDA allows and the
    // emulation (capturing one stream) refuses.
    return cuda_emulation::is_capturing(stream) ? sticky_error()
                                                : cudaErrorStreamCaptureUnsupported;
  }
  const uint64_t record = latest_record(event);
  if (record == 0) return sticky_error();  // never recorded: nothing to wait for
  // A capture may not depend on work outside it.
  if (cuda_emulation::is_capturing(stream))
    return cuda_emulation::invalidate_capture(stream, cudaErrorStreamCaptureIsolation);
  return cuda_emulation::enqueue(stream, [event, record] { wait_for_record(event, record); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  if (recorded_in_capture(event)) return cudaErrorCapturedEvent;
  wait_for_record(event, latest_record(event));
  return sticky_error();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  if (cudaError_t error = sticky_error()) return error;
  std::lock_guard<std::mutex> lock(event->mutex);
  if (event->captured) return cudaErrorCapturedEvent;
  return event->reached >= event->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  if (!milliseconds || !start || !end) return cudaErrorInvalidResourceHandle;
  if (!start->timing || !end->timing) return cudaErrorInvalidResourceHandle;
  if (recorded_in_capture(start) || recorded_in_capture(end)) return cudaErrorCapturedEvent;
  std::lock_guard<std::mutex> lock_start(start->mutex);
  if (start == end) {
    *milliseconds = 0.0f;
    return sticky_error();
  }
  std::lock_guard<std::mutex> lock_end(end->mutex);
  if (start->recorded == 0 || end->recorded == 0) return cudaErrorInvalidResourceHandle;
  if (start->reached < start->recorded || end->reached < end->recorded) return cudaErrorNotReady;
  *milliseconds =
      std::chrono::duration<float, std::milli>(end->reached_at - start->reached_at).count();
  return sticky_error();
}
