// `./train prepare` (see prepare_command.h).
#include "commands/prepare_command.h"

#include <algorithm>
#include <thread>

namespace llm {

PrepareArguments::PrepareArguments() {
  jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int run_prepare(const PrepareArguments& arguments, const CommandLine& line) {
  LLM_CHECK(arguments.tokenizer.empty() || !line.given("vocab-size"),
            "./train prepare: --vocab-size is for training a tokenizer; --tokenizer gives one");
  prepare_dataset(arguments);
  return 0;
}

}  // namespace llm
