// `./train generate` (see generate_command.h).
#include "commands/generate_command.h"

#include <cstdio>
#include <string>

namespace llm {

GenerateArguments::GenerateArguments() {
  sampling.max_new_tokens = 128;
  sampling.top_p = 0.95f;
}

int run_generate(const GenerateArguments& arguments, const CommandLine&) {
  LLM_CHECK(comm_world().size() == 1,
            "./train generate runs in one process; start it without mpirun");
  const GeneratedText out = generate_text(arguments);
  for (size_t i = 0; i < out.texts.size(); ++i) {
    if (out.texts.size() > 1) std::printf("--- sample %zu\n", i + 1);
    std::printf("%s\n", out.texts[i].c_str());
  }
  const std::string full =
      out.context_full ? "; stopped at the context of " + std::to_string(out.context) + " tokens"
                       : "";
  std::printf("%s: %d new tokens in %.2f s, %.1f tokens/s (%zu sample(s), prompt %d tokens%s)\n",
              out.source.c_str(), out.new_tokens, out.seconds, out.new_tokens / out.seconds,
              out.texts.size(), out.prompt_tokens, full.c_str());
  return 0;
}

}  // namespace llm
