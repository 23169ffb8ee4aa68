// Which rank holds the others back: at each log line, every rank's busy time
// per step over the interval (its step time less the time it spent blocked
// waiting for other ranks, collectives/watchdog.h) is gathered, and the slowest
// rank is the busiest one. How far behind it is: its busy time over the
// (lower) median rank's, and the rate dispersion that implies for the
// throughput model. A collective over the world, called by every rank at the
// same steps (the log steps), on a host-buffer (MPI) group: on a GPU run the
// device group's buffers are device pointers.
#pragma once

#include "collectives/group.h"

namespace llm {

struct StragglerReport {
  int ranks = 0;               // 0: not measured (a world of one)
  int rank = 0;                // the slowest (the busiest)
  double busy_ms = 0;          // its busy time per step
  double behind_ms = 0;        // over the median rank's
  double behind_fraction = 0;  // behind_ms / the median rank's busy time
  // The spread of the ranks' rates that behind_fraction implies (a hardware
  // profile's device.rate_dispersion, cost_models/slowest_rank.h).
  double rate_dispersion = 0;
};

class StragglerMeter {
 public:
  // `world`: the whole world, as a host-buffer group.
  explicit StragglerMeter(Group& world) : world_(world) {}
  // A step's time, and how much of it this rank spent blocked on the others.
  void add(double step_seconds, double waited_seconds);
  // The interval since the previous take(); collective over the world.
  StragglerReport take();

 private:
  Group& world_;
  int steps_ = 0;
  double busy_seconds_ = 0;
};

}  // namespace llm
