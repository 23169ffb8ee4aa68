// Eager, captured or replayed segments of the model's device work
// (captured_segments.h).
#include "model/captured_segments.h"

#include "base/error.h"

namespace llm {

void CapturedSegments::enable(bool on) {
  LLM_CHECK(!on || graphs_,
            "training.cuda_graphs = true needs a backend with device graphs (CUDA)");
  if (!on) drop_graphs();
  on_ = on;
}

void CapturedSegments::drop_graphs() {
  for (auto& [key, graph] : captured_) graphs_->destroy(graph);
  captured_.clear();
  sightings_.clear();
  graphs_per_site_.clear();
}

void CapturedSegments::run(const SegmentKey& key, const std::function<void()>& work) {
  if (!on_) return work();
  if (graphs_->scratch_epoch() != epoch_) {
    drop_graphs();
    epoch_ = graphs_->scratch_epoch();
  }
  if (auto graph = captured_.find(key); graph != captured_.end()) {
    graphs_->launch(graph->second);
    return;
  }
  // The first sighting runs eagerly: it sizes scratch, builds library plans
  // and times GEMMs, which a capture may not do.
  if (sightings_[key]++ == 0 || graphs_per_site_[key.site] >= kGraphsPerSite) return work();
  graphs_->begin_capture();
  try {
    work();
  } catch (...) {
    try {
      graphs_->destroy(graphs_->end_capture());
    } catch (...) {
      // The capture is over either way; the first error is the one to report.
    }
    throw;
  }
  const DeviceGraph graph = graphs_->end_capture();
  sightings_.erase(key);
  captured_.emplace(key, graph);
  graphs_per_site_[key.site]++;
  graphs_->launch(graph);
}

}  // namespace llm
