// FP8 delayed scaling's amax history (training.fp8_scaling = delayed;
// docs/training.md#fp8-linear-layers): per optimizer step, the largest
// magnitude each of the model's FP8 forward inputs reached (Transformer::
// fp8_step_amax, maximized over the world), the newest `length` steps kept; a
// step's scales come from each input's maximum over them (Transformer
// Engine's DelayedScaling with amax_compute_algo "max").
// Invariants: every rank holds the same history (the world maximum is exact
// in any order: maxima of magnitude bits, base/fp8.h), so every world size
// and parallel mode scales as the single process does; it is training state,
// saved in checkpoints and loaded at any world size.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "collectives/group.h"

namespace llm {

class Fp8AmaxHistory {
 public:
  // `inputs` amaxes per step, at most `length` steps.
  Fp8AmaxHistory(int length, size_t inputs) : length_(length), inputs_(inputs) {}

  bool empty() const { return steps_.empty(); }
  // Each input's largest amax over the kept steps (empty when no step is).
  std::vector<float> max() const;
  // One step's amaxes, the oldest step dropped beyond `length`.
  void push(std::vector<float> amax);
  // The kept steps, oldest first: what a checkpoint saves.
  std::vector<std::vector<float>> steps() const { return {steps_.begin(), steps_.end()}; }
  // Restores saved steps (oldest first), keeping the newest `length`; throws,
  // naming `source`, when a step holds another number of inputs than this
  // model's.
  void restore(const std::vector<std::vector<float>>& steps, const std::string& source);

 private:
  int length_;
  size_t inputs_;
  std::deque<std::vector<float>> steps_;
};

// Collective over `world` (host buffers): each input's largest amax over
// every rank's `local` (a rank's 0 where its stage or slice does not hold it).
std::vector<float> fp8_amax_world_max(Group& world, const std::vector<float>& local);

}  // namespace llm
