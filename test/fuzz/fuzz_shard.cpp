// Fuzz target: a token shard (llm.c's header and tokens), opened, scanned
// against a vocabulary and read, as the data loader does.
#include <vector>

#include "data/shard.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  fuzz::reset_scratch();
  const std::string path = fuzz::write("train_000.bin", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const Shard shard = Shard::open(path);
    shard.check_tokens_below(512);
    std::vector<int32_t> tokens(static_cast<size_t>(std::min<int64_t>(shard.num_tokens(), 64)));
    shard.read(0, static_cast<int64_t>(tokens.size()), tokens.data(), 512);
  });
  return 0;
}
