// The CUDA table of device graphs (device_graphs.h): stream capture of the
// compute stream, in the global mode, so that a call CUDA finds unsafe during
// a capture (an allocation, a host wait) fails on any thread instead of
// leaving a graph that replays something else.
// Invariant: a failed capture leaves the compute stream out of capture mode
// (the error is thrown after the capture has ended).
#include "device/cuda_runtime.cuh"
#include "device/device_graphs.h"

namespace llm {
namespace {

void begin_capture() {
  LLM_CUDA_CHECK(cudaStreamBeginCapture(cuda::compute_stream(), cudaStreamCaptureModeGlobal));
}

DeviceGraph end_capture() {
  cudaGraph_t graph = nullptr;
  LLM_CUDA_CHECK(cudaStreamEndCapture(cuda::compute_stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  LLM_CUDA_CHECK(instantiated);
  return exec;
}

void launch(DeviceGraph graph) {
  LLM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), cuda::compute_stream()));
}

void destroy(DeviceGraph graph) {
  if (graph)
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));  // at exit the context may be gone
}

}  // namespace

const DeviceGraphs& cuda_device_graphs() {
  static const DeviceGraphs graphs{begin_capture, end_capture, launch, destroy,
                                   cuda::scratch_epoch};
  return graphs;
}

}  // namespace llm
