// `./train export` (see export_command.h).
#include "commands/export_command.h"

#include <cstdio>
#include <string>

namespace llm {

int run_export(const ExportArguments& arguments, const CommandLine&) {
  const ExportResult result = export_checkpoint(arguments);
  const std::string chat =
      result.chat_format.empty() ? "" : " (chat template: " + result.chat_format + ")";
  std::printf(
      "exported %s (%zu parameters, %s) to %s: model.safetensors, config.json, "
      "generation_config.json%s%s\n",
      result.checkpoint.c_str(), result.parameters, arguments.dtype.c_str(), arguments.out.c_str(),
      result.tokenizer ? ", the tokenizer, tokenizer_config.json" : " (no tokenizer in the run)",
      chat.c_str());
  return 0;
}

}  // namespace llm
