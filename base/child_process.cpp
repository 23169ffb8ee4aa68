// A child process with its output passed through and its tail kept
// (child_process.h).
#include "base/child_process.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "base/error.h"
#include "base/stop_signal.h"

namespace llm {
namespace {

// Copies what `from` has to `to` and the tail; false at its end.
bool pass_through(int from, int to, std::string& tail, size_t tail_bytes) {
  char buffer[65536];
  const ssize_t got = read(from, buffer, sizeof(buffer));
  if (got < 0 && errno == EINTR) return true;
  if (got <= 0) return false;
  for (ssize_t done = 0; done < got;) {
    const ssize_t put = write(to, buffer + done, static_cast<size_t>(got - done));
    if (put < 0 && errno != EINTR) break;  // our own output is gone; keep reading
    if (put > 0) done += put;
  }
  tail.append(buffer, static_cast<size_t>(got));
  if (tail.size() > tail_bytes) tail.erase(0, tail.size() - tail_bytes);
  return true;
}

}  // namespace

ChildOutcome child_process_run(const std::vector<std::string>& argv, size_t tail_bytes) {
  LLM_CHECK(!argv.empty(), "no command to run");
  int out_pipe[2], err_pipe[2];
  LLM_CHECK(pipe(out_pipe) == 0 && pipe(err_pipe) == 0, "pipe: {}", std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  LLM_CHECK(pid >= 0, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    execvp(args[0], args.data());
    const std::string message = "error: cannot run " + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  ChildOutcome outcome;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  const int targets[2] = {STDOUT_FILENO, STDERR_FILENO};
  int open_pipes = 2;
  // A process the child started (a launcher's daemon) may hold the pipes
  // after the child exits: its output is read for a moment more, not waited for.
  bool exited = false;
  auto drained_by = std::chrono::steady_clock::time_point::max();
  while (open_pipes > 0 && std::chrono::steady_clock::now() < drained_by) {
    if (!exited && waitpid(pid, &outcome.wait_status, WNOHANG) == pid) {
      exited = true;
      drained_by = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    }
    // The signal is polled: its handler runs on the signal thread.
    if (stop_signal_received() && outcome.stop_signal != stop_signal_last()) {
      outcome.stop_signal = stop_signal_last();
      kill(pid, outcome.stop_signal);
    }
    if (poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (!pass_through(fds[i].fd, targets[i], outcome.output_tail, tail_bytes)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  while (!exited && waitpid(pid, &outcome.wait_status, 0) < 0 && errno == EINTR) {
  }
  return outcome;
}

}  // namespace llm
