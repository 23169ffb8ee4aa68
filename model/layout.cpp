// Builds the unit/tensor layout of a Llama-family model and its deterministic
// initialization.
#include "model/layout.h"

#include "model/block.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/rng.h"

namespace llm {
namespace {

class LayoutBuilder {
 public:
  explicit LayoutBuilder(ParameterLayout& layout) : layout_(layout) {}

  // Starts a unit; the tensors added to a unit that is not `held` (another
  // pipeline stage's) only count toward its whole-model size and indices.
  void begin_unit(const std::string& name, bool held) {
    layout_.units.push_back({name, 0, {}, 0});
    held_ = held;
  }

  // A tensor of `shape` whose elements map onto the whole model's tensor by
  // `runs` (empty: it is the whole tensor, global_shape == shape). Returns
  // its offset in the unit (meaningful where the unit is held).
  size_t add(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> global_shape,
             std::vector<SliceRun> runs) {
    UnitSpec& unit = layout_.units.back();
    const size_t offset = unit.numel;
    const int global_index = layout_.global_tensor_count++;
    size_t global_numel = 1;
    for (int64_t d : global_shape) global_numel *= static_cast<size_t>(d);
    const size_t global_offset = unit.global_numel;
    unit.global_numel += global_numel;
    if (!held_) return offset;
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    const bool whole = runs.empty();
    if (whole) runs = {{0, 0, numel, 1, numel}};
    TensorSpec t;
    t.name = name;
    t.unit = static_cast<int>(layout_.units.size()) - 1;
    t.offset = unit.numel;
    t.shape = std::move(shape);
    t.numel = numel;
    t.weight_decay = global_shape.size() == 2;  // matrices decay, gains and biases do not
    // Units are the whole model's on every rank; offsets in the whole unit
    // add up global shapes.
    t.global_index = global_index;
    t.global_unit = t.unit;
    t.global_offset = global_offset;
    t.global_shape = std::move(global_shape);
    t.runs = std::move(runs);
    t.replicated = whole && layout_.slice.tp_size > 1;
    layout_.tensors.push_back(std::move(t));
    unit.tensors.push_back(static_cast<int>(layout_.tensors.size()) - 1);
    unit.numel += numel;
    layout_.total_numel += numel;
    return offset;
  }
  // Sets how the tensor just added (when its unit is held) starts.
  void mark_init(TensorInit init, bool output_projection) {
    if (!held_) return;
    layout_.tensors.back().init = init;
    layout_.tensors.back().output_projection = output_projection;
  }
  size_t add_whole(const std::string& name, std::vector<int64_t> shape) {
    return add(name, shape, shape, {});
  }
  // Rows [begin, begin + count) of each (begin, count) of a (rows, cols)
  // matrix, or entries of a (rows) vector when cols is 0, stacked in that order.
  size_t add_rows(const std::string& name, int64_t rows, int64_t cols,
                  std::vector<std::pair<int64_t, int64_t>> ranges) {
    const int64_t width = cols > 0 ? cols : 1;  // elements per row
    std::vector<SliceRun> runs;
    int64_t local_rows = 0;
    for (auto [begin, count] : ranges) {
      const size_t length = static_cast<size_t>(count * width);
      runs.push_back({static_cast<size_t>(local_rows * width), static_cast<size_t>(begin * width),
                      length, 1, length});
      local_rows += count;
    }
    if (cols == 0) return add(name, {local_rows}, {rows}, std::move(runs));
    return add(name, {local_rows, cols}, {rows, cols}, std::move(runs));
  }
  // Columns [begin, begin + count) of a (rows, cols) matrix.
  size_t add_columns(const std::string& name, int64_t rows, int64_t cols, int64_t begin,
                     int64_t count) {
    return add(name, {rows, count}, {rows, cols},
               {{0, static_cast<size_t>(begin), static_cast<size_t>(count),
                 static_cast<size_t>(rows), static_cast<size_t>(cols)}});
  }

 private:
  ParameterLayout& layout_;
  bool held_ = true;
};

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

LayerRange pipeline_stage_layers(int n_layers, int stages, int stage) {
  LLM_CHECK(stages >= 1 && stages <= n_layers && stage >= 0 && stage < stages,
            "layout: pipeline stage {} of {} over {} blocks", stage, stages, n_layers);
  const int base = n_layers / stages, extra = n_layers % stages;
  const int begin = stage * base + std::min(stage, extra);
  return {begin, begin + base + (stage < extra ? 1 : 0)};
}

ParameterLayout layout_build(const ModelConfig& c, ModelSlice slice) {
  LLM_CHECK(slice.tp_size >= 1 && slice.tp_rank >= 0 && slice.tp_rank < slice.tp_size &&
                c.n_heads % slice.tp_size == 0 && c.n_kv_heads % slice.tp_size == 0 &&
                c.ffn_dim % slice.tp_size == 0 && c.vocab_size % slice.tp_size == 0,
            "layout: tensor-parallel rank {} of {} does not split the model's heads ({}, {} kv), "
            "ffn_dim ({}) and vocabulary ({}) evenly",
            slice.tp_rank, slice.tp_size, c.n_heads, c.n_kv_heads, c.ffn_dim, c.vocab_size);
  ParameterLayout layout;
  layout.slice = slice;
  layout.layers = pipeline_stage_layers(c.n_layers, slice.pp_size, slice.pp_rank);
  LayoutBuilder b(layout);
  const int64_t T = slice.tp_size, t = slice.tp_rank;
  const int64_t C = c.dim, V = c.vocab_size, v = V / T;  // v: this rank's vocabulary rows

  b.begin_unit("embed", slice.first_stage());
  b.add_rows("embed.weight", V, C, {{t * v, v}});
  const std::vector<BlockTensorSpec> specs = block_tensors(c);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string unit = "layers." + std::to_string(l);
    const bool held = l >= layout.layers.begin && l < layout.layers.end;
    b.begin_unit(unit, held);
    BlockTensors block;
    for (const BlockTensorSpec& spec : specs) {
      const std::string name = unit + "." + spec.name;
      const int64_t rows = spec.rows(), columns = spec.columns;
      size_t offset = 0;
      switch (spec.split) {
        case TensorParallelSplit::replicated:
          offset = spec.matrix() ? b.add_whole(name, {rows, columns}) : b.add_whole(name, {rows});
          break;
        case TensorParallelSplit::rows: {  // this rank's share of every part, stacked
          std::vector<std::pair<int64_t, int64_t>> ranges;
          int64_t part_begin = 0;
          for (const TensorPart& part : spec.parts) {
            ranges.push_back({part_begin + t * (part.rows / T), part.rows / T});
            part_begin += part.rows;
          }
          offset = b.add_rows(name, rows, columns, std::move(ranges));
          break;
        }
        case TensorParallelSplit::columns:
          offset = b.add_columns(name, rows, columns, t * (columns / T), columns / T);
          break;
      }
      b.mark_init(spec.init, spec.output_projection);
      block.offsets.push_back(offset);
    }
    if (held) layout.block = block;
  }
  b.begin_unit("head", slice.last_stage());
  b.add_whole("norm.weight", {C});
  b.mark_init(TensorInit::ones, false);
  if (!c.tie_embeddings) b.add_rows("lm_head.weight", V, C, {{t * v, v}});
  return layout;
}

std::vector<GlobalRun> layout_global_runs(const ParameterLayout& layout, int unit, size_t begin,
                                          size_t count) {
  const UnitSpec& u = layout.units.at(unit);
  LLM_CHECK(begin + count <= u.numel, "layout: range [{}, {}) outside unit {} of {} elements",
            begin, begin + count, u.name, u.numel);
  std::vector<GlobalRun> out;
  for (int ti : u.tensors) {
    const TensorSpec& t = layout.tensors[ti];
    if (begin + count <= t.offset || begin >= t.offset + t.numel) continue;
    // The range, relative to the tensor.
    const size_t lo = std::max(begin, t.offset) - t.offset;
    const size_t end = std::min(begin + count, t.offset + t.numel) - t.offset;
    for (const SliceRun& r : t.runs) {
      const size_t a = std::max(lo, r.local), b = std::min(end, r.local + r.repeats * r.length);
      if (a >= b) continue;
      // Blocks [i0, i1) of the run, entered at offset0 and left at offset1.
      size_t i0 = (a - r.local) / r.length, offset0 = (a - r.local) % r.length;
      const size_t i1 = (b - r.local) / r.length, offset1 = (b - r.local) % r.length;
      auto emit = [&](size_t block, size_t from, size_t length, size_t repeats) {
        out.push_back({ti, t.global_unit,
                       t.global_offset + r.global + block * r.global_stride + from, length, repeats,
                       r.global_stride, t.offset + r.local + block * r.length + from - begin,
                       t.replicated});
      };
      if (i0 == i1) {  // inside one block
        emit(i0, offset0, offset1 - offset0, 1);
        continue;
      }
      if (offset0 > 0) emit(i0++, offset0, r.length - offset0, 1);
      if (i1 > i0) emit(i0, 0, r.length, i1 - i0);
      if (offset1 > 0) emit(i1, 0, offset1, 1);
    }
  }
  return out;
}

void layout_init_params(const ParameterLayout& layout, const ModelConfig& config, uint64_t seed,
                        int unit, size_t begin, size_t end, float* out) {
  const UnitSpec& u = layout.units.at(unit);
  LLM_CHECK(begin <= end && end <= u.numel, "init range [{}, {}) outside unit {} of {} elements",
            begin, end, u.name, u.numel);
  for (const GlobalRun& run : layout_global_runs(layout, unit, begin, end - begin)) {
    const TensorSpec& t = layout.tensors[run.tensor];
    float* dst = out + run.local;
    const size_t n = run.length * run.repeats;
    if (t.init != TensorInit::normal) {
      std::fill(dst, dst + n, t.init == TensorInit::ones ? 1.0f : 0.0f);
      continue;
    }
    double std = config.init_std;
    if (t.output_projection) std /= std::sqrt(2.0 * config.n_layers);
    const uint64_t key = hash_mix(seed, static_cast<uint64_t>(t.global_index));
    // Each value is a function of its index alone, so the threads' split
    // cannot change a bit (a 1B model's 1e9 values took ~70 s on one core).
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; ++j) {
      const size_t i = j / run.length, k = j % run.length;
      dst[j] = static_cast<float>(std *
                                  normal_at(key, run.begin - t.global_offset + i * run.stride + k));
    }
  }
}

}  // namespace llm
