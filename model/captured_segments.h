// The model's device work between two unit boundaries (one block's forward,
// its recomputation and backward, the head, the loss, the embedding), run
// eagerly the first time a shape is seen and as a device graph after: the
// second sighting captures it, later ones replay it with one launch.
// Why unit boundaries: that is where the UnitProvider gathers, frees and
// reduces units (collectives the host orders with events and waits on), and
// where the model reads its losses back; none of that can be inside a graph,
// and between two boundaries there is only the model's own kernels.
// Invariants: a segment replays the kernels it captured, with the pointers and
// scalars they were captured with, so the key names every input that could
// change them (the site, the activation slot, B, T, dloss, and the unit
// buffers the provider handed out); a key seen with other buffers is another
// segment. Graphs captured before a scratch buffer moved are dropped
// (device_graphs.h's scratch_epoch). A site keeps at most kGraphsPerSite
// graphs (a provider that rotates buffers); beyond, its new keys run eagerly.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>

#include "device/device_graphs.h"

namespace llm {

struct SegmentKey {
  int site;  // which stretch of the model (the caller's numbering)
  int slot, B, T;
  float dloss;
  std::array<const void*, 4> buffers;  // unit parameters and gradients, unused ones null
  auto operator<=>(const SegmentKey&) const = default;
};

class CapturedSegments {
 public:
  static constexpr int kGraphsPerSite = 4;

  // `graphs` null: every segment runs eagerly.
  explicit CapturedSegments(const DeviceGraphs* graphs) : graphs_(graphs) {}
  ~CapturedSegments() { drop_graphs(); }
  CapturedSegments(const CapturedSegments&) = delete;
  CapturedSegments& operator=(const CapturedSegments&) = delete;

  // Off (the default) or on; refused on a backend without device graphs.
  void enable(bool on);
  bool enabled() const { return on_; }

  // Queues `work`'s device work: eagerly, by capturing it, or by replaying
  // the graph captured for `key`. `work` must queue the same kernels whenever
  // it is called with the same key, and must not wait for the device.
  void run(const SegmentKey& key, const std::function<void()>& work);

  // Graphs captured so far (tests).
  int graphs() const { return static_cast<int>(captured_.size()); }
  // Drops every graph and sighting: from now on a key's work is other
  // kernels (FP8 delayed scaling's first step with scales).
  void drop_graphs();

 private:
  const DeviceGraphs* graphs_;
  bool on_ = false;
  uint64_t epoch_ = 0;
  std::map<SegmentKey, int> sightings_;  // keys run eagerly once, not yet captured
  std::map<SegmentKey, DeviceGraph> captured_;
  std::map<int, int> graphs_per_site_;
};

}  // namespace llm
