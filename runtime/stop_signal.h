// SIGTERM / SIGINT / SIGUSR1 / SIGUSR2 handling for graceful stops: the handler only records the
// request; the training loop polls it between steps (all ranks agree through
// an all-reduce), saves a checkpoint and returns.
#pragma once

namespace llm {

// Installs the handlers (idempotent).
void stop_signal_install();
// True once one of those signals arrived in this process.
bool stop_signal_received();

}  // namespace llm
