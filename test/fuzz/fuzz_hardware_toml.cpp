// Fuzz target: a hardware profile (cost_models/hardware/*.toml), parsed and
// validated, then its per-rank figures derived, as `./train scale` does.
#include "fuzz_support.h"
#include "cost_models/hardware_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  fuzz::expect_clean([&] {
    const HardwareProfile profile =
        hardware_parse(std::string(fuzz::as_text(data, size)), "fuzz.toml");
    profile.rank_memory_bytes(8);
    profile.rank_flops(Precision::bf16, 8);
  });
  return 0;
}
