// Runs a program as a child process, as a supervisor runs a launcher: its
// stdout and stderr pass through to ours line by line as they come, and the
// last bytes of both are kept for reading why it failed. A stop signal this
// process receives (stop_signal.h) is passed on to the child, which runs in
// a process group of its own, so a Ctrl-C at the terminal reaches it once.
// Invariant: returns only once the child has exited; its output is copied
// unchanged.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace llm {

struct ChildOutcome {
  int wait_status = 0;      // as waitpid() returned it
  std::string output_tail;  // the last bytes of stdout and stderr, interleaved as read
  int stop_signal = 0;      // the stop signal passed on to the child, 0 when none
};

// Runs argv[0] (looked up in PATH) with argv; an llm::Error when it cannot be
// started. Keeps at most `tail_bytes` of output.
ChildOutcome child_process_run(const std::vector<std::string>& argv, size_t tail_bytes);

}  // namespace llm
