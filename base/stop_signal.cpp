// The async-signal-safe flag behind stop_signal.h. The handler runs on the
// signal thread and the training loop reads the flag on the main thread, so
// it is a lock-free atomic (safe in a handler, and ordered across threads).
#include "base/stop_signal.h"

#include <atomic>

namespace llm {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_stop_signal(int signal) { g_stop_signal = signal; }

}  // namespace

void stop_signal_install() {
  for (int signal : kStopSignals) std::signal(signal, on_stop_signal);
}

bool stop_signal_received() { return g_stop_signal != 0; }

int stop_signal_last() { return g_stop_signal; }

}  // namespace llm
