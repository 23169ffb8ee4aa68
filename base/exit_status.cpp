// The exit statuses' meaning for a relaunch (exit_status.h).
#include "base/exit_status.h"

#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <string>

namespace llm {

JobEnding classify_job_ending(int wait_status) {
  JobEnding ending;
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    ending.restartable = true;
    ending.exit_status = 128 + signal;
    ending.why =
        std::string("killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return ending;
  }
  const int status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : kExitError;
  ending.exit_status = status;
  const std::string code = "exit status " + std::to_string(status);
  if (status == kExitSuccess) {
    ending.finished = true;
    ending.why = code;
  } else if (status == kExitError || status == kExitUsage) {
    ending.why = code + " (an error of the input or the run's consistency)";
  } else if (status == 126 || status == 127) {
    ending.why = code + " (the launcher could not run the command)";
  } else if (status == kExitRestartable) {
    ending.restartable = true;
    ending.why = code + " (a rank stalled or was lost, or the network failed)";
  } else if (status > 128) {
    ending.restartable = true;
    ending.why = code + " (a rank killed by signal " + std::to_string(status - 128) + ", " +
                 strsignal(status - 128) + ")";
  } else {
    ending.restartable = true;
    ending.why = code + " (the launcher's own failure)";
  }
  return ending;
}

}  // namespace llm
