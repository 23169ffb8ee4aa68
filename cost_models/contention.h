// The contention term: compute slowed while collectives run beside it.
// A collective's kernel holds `blocks` of the device's compute units from
// its start to its end (NCCL: one CUDA block per channel, each on its own SM,
// collective_model.h); compute that runs meanwhile gets the rest, so it
// progresses at (1 - held / units) of its full rate (0 when the collectives
// hold every unit). Why the whole SM: an NCCL block (512-640 threads) and a
// tensor-core GEMM block (up to 164 KiB of shared memory and most of the
// register file on an A100) do not fit on one SM together, so the GEMM's
// blocks run on the SMs NCCL leaves free.
// Not counted: HBM bandwidth the collective's copies take from memory-bound
// kernels, and compute slowing the collective in turn.
// Invariant: compute with no collective in flight beside it runs at its full
// rate, so the term is exactly zero when nothing overlaps (as under MPI,
// whose collectives progress only while the rank waits in them).
#pragma once

#include <vector>

namespace llm {

class ComputeTimeline {
 public:
  explicit ComputeTimeline(int compute_units) : units_(compute_units) {}

  // A collective that runs over [start, end) holding `blocks` units.
  void hold(double start, double end, int blocks);
  // Runs `seconds` of full-rate compute from `start`; returns when it ends.
  // Compute is one timeline: each run starts no earlier than the last began.
  double run(double start, double seconds);

  double contention_seconds() const { return contention_; }  // time added to compute
  double overlapped_seconds() const { return overlapped_; }  // compute time beside a collective
  // Length of the union of the held intervals up to `until`: how long any
  // collective was in flight.
  double in_flight_seconds(double until) const;

 private:
  struct Hold {
    double start, end;
    int blocks;
  };
  int units_;
  std::vector<Hold> holds_;   // every hold, for in_flight_seconds
  std::vector<Hold> active_;  // those not yet ended when compute last ran
  double contention_ = 0, overlapped_ = 0;
};

}  // namespace llm
