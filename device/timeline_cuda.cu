// The CUDA timeline (device/timeline.h): a pool of timing events, recorded
// in turn on the compute stream and read back with cudaEventElapsedTime
// between neighbours.
// Invariant: events_[0, used_) hold this series' marks in order; every event
// is created once, on the device current at its first mark, and destroyed
// with the timeline.
#include <vector>

#include "device/cuda_runtime.cuh"
#include "device/timeline.h"

namespace llm {
namespace {

class CudaTimeline final : public Timeline {
 public:
  ~CudaTimeline() override {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);  // at exit the context may be gone
  }

  void mark() override {
    if (used_ == events_.size()) {
      cudaEvent_t event = nullptr;
      LLM_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
    LLM_CUDA_CHECK(cudaEventRecord(events_[used_++], cuda::compute_stream()));
  }

  void wait() override {
    if (used_ > 0) cuda::wait_for_event(events_[used_ - 1]);
  }

  std::vector<double> intervals() override {
    wait();  // the last mark done, every earlier one on the stream is too
    std::vector<double> seconds;
    for (size_t i = 1; i < used_; ++i) {
      float milliseconds = 0;
      LLM_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, events_[i - 1], events_[i]));
      seconds.push_back(milliseconds * 1e-3);
    }
    used_ = 0;
    return seconds;
  }

 private:
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
};

}  // namespace

std::unique_ptr<Timeline> make_cuda_timeline() { return std::make_unique<CudaTimeline>(); }

}  // namespace llm
