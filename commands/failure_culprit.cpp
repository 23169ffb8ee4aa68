// The rank and host a failed job's output names (failure_culprit.h).
#include "commands/failure_culprit.h"

#include <regex>

namespace llm {

FailureCulprit failure_culprit(const std::string& output) {
  static const std::regex signal_death(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal)");
  static const std::regex by_rank[] = {
      std::regex(R"(never reached by: rank (\d+) \(no answer)"),
      std::regex(R"(never reached by: rank (\d+))"),
      std::regex(R"(other ranks not answering: (\d+))"),
      std::regex(R"((?:^|\n)rank (\d+): error:)"),
  };
  static const std::regex rank_error(R"((?:^|\n)rank \d+: error: ([^\n]*))");
  FailureCulprit culprit;
  std::smatch match;
  if (std::regex_search(output, match, rank_error)) culprit.error = match[1];
  if (std::regex_search(output, match, signal_death)) {
    culprit.rank = std::stoi(match[1]);
    culprit.host = match[2];
    return culprit;
  }
  for (const std::regex& pattern : by_rank) {
    if (std::regex_search(output, match, pattern)) {
      culprit.rank = std::stoi(match[1]);
      return culprit;
    }
  }
  return culprit;
}

}  // namespace llm
