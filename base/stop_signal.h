// SIGTERM / SIGINT / SIGUSR1 / SIGUSR2 handling for graceful stops: the handler only records the
// request; the training loop polls it between steps (all ranks agree through
// an all-reduce), saves a checkpoint and returns. The handler runs on the
// signal thread (signal_thread.h), never on a thread that computes.
#pragma once

#include <array>
#include <csignal>

namespace llm {

// SIGUSR1 / SIGUSR2 too: mpirun forwards them to every rank, while it
// answers SIGINT / SIGTERM by killing the ranks itself (docs/checkpoints.md).
inline constexpr std::array<int, 4> kStopSignals = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2};

// Installs the handlers (idempotent).
void stop_signal_install();
// True once one of those signals arrived in this process.
bool stop_signal_received();
// The last of them that arrived (0 when none): what a supervisor passes on
// to the job it runs.
int stop_signal_last();

}  // namespace llm
