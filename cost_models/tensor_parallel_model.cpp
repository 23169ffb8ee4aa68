// Tensor-parallel collectives of a step, recorded (see tensor_parallel_model.h).
#include "cost_models/tensor_parallel_model.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "collectives/group.h"
#include "model/backend.h"
#include "model/block.h"
#include "parallel/pipeline_schedule.h"
#include "model/tensor_payload.h"
#include "model/transformer.h"
#include "cost_models/recording_group.h"
#include "base/system.h"

namespace llm {
namespace {

constexpr int kStandInHeadDim = 4;  // C_s = 4 T: its n x C rows (4 T) and 2N pairs (2 T) differ

// Zeroed parameters and gradients for every unit (fp32-sized, so a bf16
// compute copy fits too), and which unit's pass is running: the outermost
// unit whose parameters are held (a tied head holds the embedding's inside
// its own), else the outermost whose gradients alone are held (the
// embedding's backward), else the unit whose parameters were released last
// (the loss after the head's forward).
class RecordingUnits : public UnitProvider {
 public:
  explicit RecordingUnits(const ParameterLayout& layout) {
    for (const UnitSpec& u : layout.units) {
      params_.emplace_back(u.numel, 0.0f);
      grads_.emplace_back(u.numel, 0.0f);
    }
  }
  const void* acquire_params(int unit, Pass pass) override {
    params_held_.push_back({unit, pass});
    return params_.at(unit).data();
  }
  void release_params(int unit, Pass pass) override {
    drop(params_held_, {unit, pass});
    last_released_ = {unit, pass};
  }
  float* acquire_grads(int unit) override {
    grads_held_.push_back({unit, Pass::backward});
    return grads_.at(unit).data();
  }
  void release_grads(int unit) override { drop(grads_held_, {unit, Pass::backward}); }
  uint64_t params_version() const override { return 0; }  // zeros throughout
  // [2 * unit + pass] of the running pass.
  int running() const {
    const std::pair<int, Pass> p = !params_held_.empty()  ? params_held_.front()
                                   : !grads_held_.empty() ? grads_held_.front()
                                                          : last_released_;
    LLM_CHECK(p.first >= 0, "tensor-parallel recording: a collective before any unit's pass");
    return 2 * p.first + (p.second == Pass::backward);
  }

 private:
  using Held = std::vector<std::pair<int, Pass>>;
  static void drop(Held& held, std::pair<int, Pass> entry) {
    auto it = std::find(held.rbegin(), held.rend(), entry);
    LLM_CHECK(it != held.rend(), "tensor-parallel recording: unit {} released, not held",
              entry.first);
    held.erase(std::next(it).base());
  }
  std::vector<std::vector<float>> params_, grads_;
  Held params_held_, grads_held_;
  std::pair<int, Pass> last_released_{-1, Pass::forward};
};

}  // namespace

std::vector<std::vector<TensorCollective>> tensor_parallel_collectives(const Config& config) {
  const int T = config.parallel.tensor_parallel;
  const int units = config.model.n_layers + 2;
  std::vector<std::vector<TensorCollective>> out(2 * units);
  if (T == 1) return out;

  Config stand_in = config;
  ModelConfig& m = stand_in.model;
  m.n_heads = m.n_kv_heads = T;
  m.dim = kStandInHeadDim * T;
  m.head_dim = kStandInHeadDim;
  m.ffn_dim = m.vocab_size = T;
  stand_in.training.micro_batch_size = 1;
  stand_in.training.seq_len = T;  // one row per rank
  const size_t stand_in_rows_c = static_cast<size_t>(m.dim), stand_in_pairs = 2 * T;
  const size_t N = static_cast<size_t>(config.training.micro_batch_size) * config.training.seq_len;
  const size_t C = config.model.dim;
  const size_t stand_in_gains = static_cast<size_t>(replicated_gains(m).width);
  const size_t real_gains = static_cast<size_t>(replicated_gains(config.model).width);
  const size_t loss_rows = static_cast<size_t>(
      loss_chunk_rows(config.model, static_cast<int>(N), T,
                      stores_bf16(config.precision()) ? sizeof(Bf16) : sizeof(float),
                      config.training.loss_chunk_tokens));

  RecordingUnits* running = nullptr;
  RecordingGroup* recording_group = nullptr;
  RecordingGroup tensor(
      T,
      [&](CollectiveOp op, size_t count, WireType type) {
        // Sized by its tag (model/tensor_payload.h); the stand-in's count
        // must be what that tag means, so a mistagged call fails here.
        const auto payload = static_cast<TensorPayload>(recording_group->tag());
        recording_group->set_tag(static_cast<int>(TensorPayload::untagged));
        size_t expected = 0;
        std::vector<size_t> real;  // the real model's collectives for this one
        switch (payload) {
          case TensorPayload::activation_rows:
            expected = stand_in_rows_c, real = {N / T * C};
            break;
          case TensorPayload::block_gain_grads:  // a block's replicated gains' gradients
            expected = stand_in_gains, real = {real_gains};
            break;
          case TensorPayload::final_norm_grads:
            expected = static_cast<size_t>(m.dim), real = {C};
            break;
          case TensorPayload::loss_parts:  // the stand-in's one chunk: one per chunk of rows
            expected = stand_in_pairs;
            for (size_t row = 0; row < N; row += loss_rows)
              real.push_back(2 * std::min(loss_rows, N - row));
            break;
          case TensorPayload::untagged:
          case TensorPayload::logits_row:  // sampling only, never in a step
            LLM_FAIL(
                "tensor-parallel recording: a {} of {} elements that a training step should "
                "not issue untagged (model/tensor_payload.h)",
                collective_op_name(op), count);
        }
        LLM_CHECK(
            count == expected,
            "tensor-parallel recording: a {} tagged {} has {} elements, not the stand-in's {}",
            collective_op_name(op), static_cast<int>(payload), count, expected);
        for (size_t count_real : real)
          out[running->running()].push_back({op, count_real, wire_bytes(type)});
        return CommHandle();
      },
      [] {});  // scalar sums carry no traffic CommStats counts
  recording_group = &tensor;
  // The stand-in's ops are a few elements wide (as in step_trace.cpp).
  const ThreadLimit one_thread(1);
  const std::unique_ptr<Transformer> model =
      Transformer::create(m, 1, T, backend_cpu(), recompute_plan(stand_in.training),
                          stand_in.precision(), ModelSplit{&tensor, nullptr, 1});
  RecordingUnits recording(model->layout());
  running = &recording;
  const std::vector<int32_t> tokens(T, 0);
  pipeline_step(
      config.parallel.pipeline_schedule, *model, recording, 1, 1, T, 1.0f,
      [&](int) {
        return MicroBatchTokens{tokens.data(), tokens.data()};
      },
      [](int) {});
  return out;
}

void tensor_parallel_step_traffic(const Config& config, int micro_batches, OpTraffic traffic[3]) {
  const int T = config.parallel.tensor_parallel;
  for (const std::vector<TensorCollective>& unit_pass : tensor_parallel_collectives(config)) {
    for (const TensorCollective& c : unit_pass) {
      const uint64_t bytes = static_cast<uint64_t>(c.count) * c.element_bytes;
      const Traffic one = c.op == CollectiveOp::all_reduce ? all_reduce_traffic(bytes, T)
                                                           : chunked_traffic(bytes, T);
      OpTraffic& x = traffic[static_cast<int>(c.op)];
      x.calls += micro_batches;
      x.payload_bytes += one.payload * micro_batches;
      x.sent_bytes += one.sent * micro_batches;
    }
  }
}

}  // namespace llm
