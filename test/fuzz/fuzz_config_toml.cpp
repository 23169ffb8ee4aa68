// Fuzz target: a train config as TOML plus --key=value overrides, through
// parsing and validation (config_parse), as `./train --config` reads them.
// The input is the TOML, then optionally a line "--", then one override per
// line.
#include <vector>

#include "schema/config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  const std::string text(fuzz::as_text(data, size));
  const size_t split = text.find("\n--\n");
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    size_t at = split + 4;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      overrides.push_back(text.substr(at, end - at));
      at = end + 1;
    }
  }
  fuzz::expect_clean([&] {
    Config config = config_parse(text.substr(0, split), "fuzz.toml", overrides);
    config_parse(config_to_toml(config), "dumped.toml", {});  // what a run directory keeps
  });
  return 0;
}
