// The signal thread behind signal_thread.h: a signal mask and one thread
// asleep with the signals unblocked.
#include "collectives/signal_thread.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/stop_signal.h"
#include "collectives/watchdog.h"

namespace llm {
namespace {

sigset_t routed_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : kStopSignals) sigaddset(&set, signal);
  sigaddset(&set, kDumpSignal);
  return set;
}

// A program this process forks and executes (OpenMPI's orted beside a
// singleton) takes signals as usual.
void unblock_in_child() {
  const sigset_t set = routed_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void take_signals() {
  const sigset_t set = routed_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  for (;;) pause();  // returns after each handler; the process ends around it
}

size_t thread_count() {
  std::error_code error;
  size_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", error), end; !error && it != end;
       it.increment(error)) {
    ++count;
  }
  return count;
}

}  // namespace

void signal_thread_start() {
  static bool started = false;
  if (started) return;
  // A thread that exists already would keep the signals unblocked.
  LLM_CHECK(thread_count() <= 1, "signal_thread_start: called with {} threads running, not 1",
            thread_count());
  const sigset_t set = routed_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  pthread_atfork(nullptr, nullptr, unblock_in_child);
  std::thread(take_signals).detach();
  started = true;
}

}  // namespace llm
