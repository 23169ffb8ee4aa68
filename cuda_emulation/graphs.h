// What the emulated runtime (streams.cpp, runtime_api.cpp) asks of stream
// capture (graphs.cpp): whether a stream is capturing, where its work goes
// then, and which calls CUDA refuses during a capture.
// Invariants: a capturing stream runs nothing; its work becomes the
// capture's nodes, in order, replayed by every launch of the instantiated
// graph. A refused call returns CUDA's error and invalidates the capture it
// broke, so cudaStreamEndCapture then returns cudaErrorStreamCaptureInvalidated,
// as on a GPU. The emulation captures one stream: a fork into another stream
// is refused (cudaErrorStreamCaptureUnsupported), stricter than CUDA.
#pragma once

#include <optional>

#include "cuda_emulation/streams.h"

namespace cuda_emulation {

// When `stream` is capturing: `work` becomes the capture's next node and the
// result is what the call returns. Otherwise nothing (the work runs).
std::optional<cudaError_t> capture_work(cudaStream_t stream, Work& work);

bool is_capturing(cudaStream_t stream);

// A call that waits for `stream` on the host, or that CUDA cannot capture
// (a copy through pageable memory): cudaErrorStreamCaptureUnsupported,
// invalidating the capture, when the stream is capturing; else cudaSuccess.
cudaError_t refuse_if_capturing(cudaStream_t stream);

// `error` for a capture rule broken on `stream`: invalidates its capture.
cudaError_t invalidate_capture(cudaStream_t stream, cudaError_t error);

// A call CUDA calls potentially unsafe during capture (cudaMalloc, cudaFree,
// their host forms, cudaDeviceSynchronize): refused with
// cudaErrorStreamCaptureUnsupported while a global-mode capture runs on any
// thread or a thread-local one on this thread, invalidating those captures;
// relaxed captures allow it. cudaSuccess when allowed.
cudaError_t refuse_if_unsafe();

}  // namespace cuda_emulation
