// `./train supervise` (see supervise_command.h).
#include "commands/supervise_command.h"

namespace llm {

int run_supervise(const SuperviseArguments& arguments, const CommandLine& line) {
  return supervise_command(line.after_dashes, arguments);
}

}  // namespace llm
