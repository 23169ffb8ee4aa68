// The host clock's timeline (device/timeline.h), and the choice by device.
#include "device/timeline.h"

#include <chrono>

namespace llm {
namespace {

// CPU ops run on the calling thread and are done when they return, so the
// time a mark is made is the time the work before it finished.
class HostTimeline final : public Timeline {
 public:
  void mark() override { marks_.push_back(Clock::now()); }
  void wait() override {}
  std::vector<double> intervals() override {
    std::vector<double> seconds;
    for (size_t i = 1; i < marks_.size(); ++i)
      seconds.push_back(std::chrono::duration<double>(marks_[i] - marks_[i - 1]).count());
    marks_.clear();  // keeps its capacity for the next series
    return seconds;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<Timeline> make_timeline(Device device) {
  if (device == Device::cuda) return make_cuda_timeline();
  return std::make_unique<HostTimeline>();
}

}  // namespace llm
