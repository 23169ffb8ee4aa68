// Fuzz target: a checkpoint's shard records, under a real checkpoint's
// meta.json (test/fuzz/data/checkpoint: one step of a model of 5k
// parameters, whose shard seeds the corpus): every parameter is read back
// through the records, their CRCs and the index, as resume and export do.
#include "fuzz_support.h"
#include "model/layout.h"
#include "persistence/checkpoint.h"
#include "base/file_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  static const std::string meta = read_file("test/fuzz/data/checkpoint/meta.json");
  fuzz::reset_scratch();
  fuzz::write("run/step_1/meta.json", meta);
  fuzz::write("run/step_1/shard_00000.bin", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const std::string step = (fuzz::scratch() / "run/step_1").string();
    const Config config = checkpoint_read_config(step);
    checkpoint_read_params(step, layout_build(config.model));
  });
  return 0;
}
