// Emulated CUDA graphs (graphs.h): stream capture, instantiation and launch.
// A capture is the list of work items its stream would have run, in order;
// an executable graph is a copy of that list, and a launch queues every item
// again on the launching stream, so a replay runs the captured kernels with
// the arguments they were captured with, reading and writing device memory as
// it is at the replay, as a GPU does.
// Invariants: work queued on a capturing stream never runs during the
// capture; a capture broken by a refused call (graphs.h) ends in
// cudaErrorStreamCaptureInvalidated and yields no graph; a non-relaxed
// capture ends on the thread that began it.
#include "cuda_emulation/graphs.h"

#include <map>
#include <mutex>
#include <thread>
#include <vector>

struct CUgraph_st {
  std::vector<cuda_emulation::Work> nodes;
};

struct CUgraphExec_st {
  std::vector<cuda_emulation::Work> nodes;
};

namespace cuda_emulation {

namespace {

struct Capture {
  cudaStreamCaptureMode mode;
  std::thread::id thread;  // the thread that began it
  std::vector<Work> nodes;
  bool invalidated = false;
};

struct Captures {
  std::mutex mutex;
  std::map<cudaStream_t, Capture> by_stream;
};
Captures& captures() {
  static Captures* c = new Captures();
  return *c;
}

}  // namespace

std::optional<cudaError_t> capture_work(cudaStream_t stream, Work& work) {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_stream.find(stream);
  if (it == c.by_stream.end()) return std::nullopt;
  if (it->second.invalidated) return cudaErrorStreamCaptureInvalidated;
  it->second.nodes.push_back(std::move(work));
  return cudaSuccess;
}

bool is_capturing(cudaStream_t stream) {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.by_stream.count(stream) > 0;
}

cudaError_t invalidate_capture(cudaStream_t stream, cudaError_t error) {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_stream.find(stream);
  if (it != c.by_stream.end()) it->second.invalidated = true;
  return error;
}

cudaError_t refuse_if_capturing(cudaStream_t stream) {
  return is_capturing(stream) ? invalidate_capture(stream, cudaErrorStreamCaptureUnsupported)
                              : cudaSuccess;
}

cudaError_t refuse_if_unsafe() {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  bool refused = false;
  for (auto& [stream, capture] : c.by_stream) {
    const bool applies = capture.mode == cudaStreamCaptureModeGlobal ||
                         (capture.mode == cudaStreamCaptureModeThreadLocal &&
                          capture.thread == std::this_thread::get_id());
    if (!applies) continue;
    capture.invalidated = true;
    refused = true;
  }
  return refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

}  // namespace cuda_emulation

using cuda_emulation::sticky_error;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return cuda_emulation::record_last_error(cudaErrorInvalidValue);
  // The legacy default stream cannot capture.
  if (!stream) return cuda_emulation::record_last_error(cudaErrorStreamCaptureUnsupported);
  if (cudaError_t error = sticky_error()) return error;
  cuda_emulation::Captures& c = cuda_emulation::captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  const bool begun =
      c.by_stream.emplace(stream, cuda_emulation::Capture{mode, std::this_thread::get_id(), {}})
          .second;
  return begun ? cudaSuccess : cuda_emulation::record_last_error(cudaErrorIllegalState);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!graph) return cuda_emulation::record_last_error(cudaErrorInvalidValue);
  *graph = nullptr;
  cuda_emulation::Capture capture;
  {
    cuda_emulation::Captures& c = cuda_emulation::captures();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.by_stream.find(stream);
    if (it == c.by_stream.end()) return cuda_emulation::record_last_error(cudaErrorIllegalState);
    if (it->second.mode != cudaStreamCaptureModeRelaxed &&
        it->second.thread != std::this_thread::get_id())
      return cuda_emulation::record_last_error(cudaErrorStreamCaptureWrongThread);
    capture = std::move(it->second);
    c.by_stream.erase(it);
  }
  if (capture.invalidated)
    return cuda_emulation::record_last_error(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st{std::move(capture.nodes)};
  return sticky_error();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return cuda_emulation::record_last_error(cudaErrorInvalidValue);
  cuda_emulation::Captures& c = cuda_emulation::captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_stream.find(stream);
  *status = it == c.by_stream.end()  ? cudaStreamCaptureStatusNone
            : it->second.invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return sticky_error();
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (!exec || !graph || flags != 0)
    return cuda_emulation::record_last_error(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return sticky_error();
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return cuda_emulation::record_last_error(cudaErrorInvalidResourceHandle);
  // Each node is queued as the captured call queued it: a replay onto a
  // capturing stream is captured in turn.
  for (const cuda_emulation::Work& node : exec->nodes) {
    cuda_emulation::Work copy = node;
    if (cudaError_t error = cuda_emulation::enqueue(stream, std::move(copy)))
      return cuda_emulation::record_last_error(error);
  }
  return cudaSuccess;
}

// The queues hold copies of the nodes, so a graph may go while its launches run.
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return cuda_emulation::record_last_error(cudaErrorInvalidResourceHandle);
  delete exec;
  return sticky_error();
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return cuda_emulation::record_last_error(cudaErrorInvalidResourceHandle);
  delete graph;
  return sticky_error();
}
