// The async-signal-safe flag behind stop_signal.h.
#include "runtime/stop_signal.h"

#include <csignal>

namespace llm {
namespace {

volatile std::sig_atomic_t g_stop_requested = 0;

void on_stop_signal(int) { g_stop_requested = 1; }

}  // namespace

void stop_signal_install() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
}

bool stop_signal_received() { return g_stop_requested != 0; }

}  // namespace llm
