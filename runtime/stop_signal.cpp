// The async-signal-safe flag behind stop_signal.h.
#include "runtime/stop_signal.h"

#include <csignal>
#include <initializer_list>

namespace llm {
namespace {

volatile std::sig_atomic_t g_stop_requested = 0;

void on_stop_signal(int) { g_stop_requested = 1; }

}  // namespace

void stop_signal_install() {
  // SIGUSR1 / SIGUSR2 too: mpirun forwards them to every rank, while it
  // answers SIGINT / SIGTERM by killing the ranks itself (docs/checkpoints.md).
  for (int signal : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) std::signal(signal, on_stop_signal);
}

bool stop_signal_received() { return g_stop_requested != 0; }

}  // namespace llm
