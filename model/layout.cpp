// Builds the unit/tensor layout of a Llama-family model and its deterministic
// initialization.
#include "model/layout.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/rng.h"

namespace llm {
namespace {

class LayoutBuilder {
 public:
  explicit LayoutBuilder(ParameterLayout& layout) : layout_(layout) {}

  void begin_unit(const std::string& name) { layout_.units.push_back({name, 0, {}}); }

  void add(const std::string& name, std::vector<int64_t> shape) {
    UnitSpec& unit = layout_.units.back();
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    bool is_matrix = shape.size() == 2;
    layout_.tensors.push_back({name, static_cast<int>(layout_.units.size()) - 1, unit.numel,
                               std::move(shape), numel, is_matrix});
    unit.tensors.push_back(static_cast<int>(layout_.tensors.size()) - 1);
    unit.numel += numel;
    layout_.total_numel += numel;
  }

 private:
  ParameterLayout& layout_;
};

bool is_output_projection(const std::string& name) {
  auto ends_with = [&](const char* suffix) {
    std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with(".attn.wo") || ends_with(".mlp.w2");
}

}  // namespace

int ParameterLayout::find(const std::string& name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  LLM_FAIL("no parameter tensor named '{}'", name);
}

size_t ParameterLayout::max_unit_numel() const {
  size_t m = 0;
  for (const UnitSpec& u : units) m = std::max(m, u.numel);
  return m;
}

ParameterLayout layout_build(const ModelConfig& c) {
  ParameterLayout layout;
  LayoutBuilder b(layout);
  const int64_t head_dim = c.dim / c.n_heads;
  const int64_t qkv_rows = (c.n_heads + 2 * c.n_kv_heads) * head_dim;

  b.begin_unit("embed");
  b.add("embed.weight", {c.vocab_size, c.dim});
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = "layers." + std::to_string(l);
    b.begin_unit(p);
    b.add(p + ".attn_norm.weight", {c.dim});
    b.add(p + ".attn.wqkv", {qkv_rows, c.dim});
    b.add(p + ".attn.wo", {c.dim, c.n_heads * head_dim});
    b.add(p + ".mlp_norm.weight", {c.dim});
    b.add(p + ".mlp.w13", {2 * static_cast<int64_t>(c.ffn_dim), c.dim});
    b.add(p + ".mlp.w2", {c.dim, c.ffn_dim});
  }
  b.begin_unit("head");
  b.add("norm.weight", {c.dim});
  if (!c.tie_embeddings) b.add("lm_head.weight", {c.vocab_size, c.dim});
  return layout;
}

void layout_init_params(const ParameterLayout& layout, const ModelConfig& config, uint64_t seed,
                        int unit, size_t begin, size_t end, float* out) {
  const UnitSpec& u = layout.units.at(unit);
  LLM_CHECK(begin <= end && end <= u.numel, "init range [{}, {}) outside unit {} of {} elements",
            begin, end, u.name, u.numel);
  for (int ti : u.tensors) {
    const TensorSpec& t = layout.tensors[ti];
    size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    float* dst = out + (lo - begin);
    if (t.shape.size() == 1) {
      std::fill(dst, dst + (hi - lo), 1.0f);
      continue;
    }
    double std = config.init_std;
    if (is_output_projection(t.name)) std /= std::sqrt(2.0 * config.n_layers);
    uint64_t key = hash_mix(seed, static_cast<uint64_t>(ti));
    for (size_t i = lo; i < hi; ++i) {
      dst[i - lo] = static_cast<float>(std * normal_at(key, i - t.offset));
    }
  }
}

}  // namespace llm
