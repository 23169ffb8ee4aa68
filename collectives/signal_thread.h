// The thread that takes this program's asynchronous signals: the stop
// signals (stop_signal.h) and SIGQUIT (watchdog.h). Their handlers run on it,
// never on a thread that computes. Why: oneDNN's JIT GEMM kernels (gemm:jit,
// chosen where brgemm is not, e.g. on CPUs without AVX-512) point rsp into a
// heap workspace while they run, and the kernel writes a signal's frame just
// below rsp: over malloc's chunk headers, which glibc later reports as
// "corrupted size vs. prev_size" (uxlfoundation/oneDNN#4845, fixed upstream on
// the 3.11 branch; Debian 12 ships 2.6; docs/failure.md).
// How: signal_thread_start() blocks those signals in the calling thread, so in
// every thread created after it (threads inherit the mask: MPI's, OpenMP's,
// workers'), and starts one thread with them unblocked, asleep. The kernel
// delivers a signal sent to the process to a thread that does not block it,
// so a handler runs there, and a signal without one still has its default
// action (a SIGTERM before training starts ends the process as before).
// Invariant: called first in main, while the process has one thread; a
// forked child starts with the signals unblocked again.
#pragma once

namespace llm {

// Blocks the signals and starts the thread (once; later calls do nothing).
void signal_thread_start();

}  // namespace llm
