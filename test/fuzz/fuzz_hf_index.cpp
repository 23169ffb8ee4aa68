// Fuzz target: a sharded Hugging Face checkpoint's
// model.safetensors.index.json, opened for the tiny model's config beside
// it, as init_from does; the files it names are absent, so a well-formed
// index must fail cleanly, naming them.
#include "schema/config.h"
#include "fuzz_support.h"
#include "interop/hf_llama.h"
#include "model/layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  static const ModelConfig model =
      config_parse(
          "[model]\ndim = 16\nn_layers = 1\nn_heads = 2\nn_kv_heads = 1\nffn_dim = 32\n"
          "vocab_size = 64\n[data]\ntrain = 'x'\n",
          "fuzz.toml", {})
          .model;
  static const ParameterLayout layout = layout_build(model);
  fuzz::reset_scratch();
  const std::string index = fuzz::write("model.safetensors.index.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] { HfWeights::open(index, model, layout); });
  return 0;
}
