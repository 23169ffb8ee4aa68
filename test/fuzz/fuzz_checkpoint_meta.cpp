// Fuzz target: a checkpoint's meta.json and the run directory's `latest`:
// the input is meta.json, and its first line is also written as `latest`.
// The checkpoint's config is read, then (for a model small enough to hold)
// its parameters, as resume, export and generate do; the shards are absent,
// so that read must fail cleanly, naming them.
#include "fuzz_support.h"
#include "model/layout.h"
#include "persistence/checkpoint.h"
#include "persistence/run_directory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  fuzz::reset_scratch();
  const std::string text(fuzz::as_text(data, size));
  fuzz::write("run/step_3/meta.json", text);
  fuzz::write("run/latest", text.substr(0, text.find('\n')));
  const std::string run = (fuzz::scratch() / "run").string();
  fuzz::expect_clean([&] { checkpoint_latest(run); });
  fuzz::expect_clean([&] {
    const std::string step = run + "/step_3";
    const Config config = checkpoint_read_config(step);
    const ParameterLayout layout = layout_build(config.model);
    if (layout.total_numel <= (1u << 20)) checkpoint_read_params(step, layout);
  });
  return 0;
}
