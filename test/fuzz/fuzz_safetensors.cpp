// Fuzz target: a safetensors file (header JSON and tensor data), opened and
// every tensor read as f32, as init_from and export's checks do.
#include <vector>

#include "fuzz_support.h"
#include "interop/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  fuzz::reset_scratch();
  const std::string path = fuzz::write("model.safetensors", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const SafetensorsFile file = SafetensorsFile::open(path);
    std::vector<float> values(16);
    for (const std::string& name : file.names()) {
      const TensorInfo& info = file.info(name);
      file.read_f32(name, 0, std::min<size_t>(info.numel, values.size()), values.data());
    }
  });
  return 0;
}
