// Recording a training step's schedule from the real engine and model (see
// step_trace.h).
#include "cost_models/step_trace.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "base/error.h"
#include "cost_models/memory_plan.h"
#include "model/backend.h"
#include "model/layout.h"
#include "parallel/pipeline_schedule.h"
#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"
#include "cost_models/recording_group.h"
#include "base/system.h"

namespace llm {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::reduce_scatter:
      return "reduce_scatter";
    case CollectiveOp::all_gather:
      return "all_gather";
  }
  return "?";
}

UnitKind unit_kind(int unit, int num_units) {
  if (unit == 0) return UnitKind::embed;
  return unit == num_units - 1 ? UnitKind::head : UnitKind::block;
}

namespace {

// The stand-in: dim 2, one head, the config's layer count and head tying, and
// an FFN width and vocabulary chosen so that the embedding, block and head
// units have pairwise different shards at shard group size S.
ModelConfig stand_in_model(const ModelConfig& real, int S) {
  ModelConfig m = real;
  m.dim = 2;
  m.n_heads = 1;
  m.n_kv_heads = 1;
  m.init_from = "";
  ModelConfig probe = m;
  probe.n_layers = 1;
  for (int ffn = 1;; ++ffn) {
    probe.ffn_dim = ffn;
    probe.vocab_size = 2;
    ParameterLayout layout = layout_build(probe);
    size_t block = unit_shard_elements(layout.units[1].numel, S);
    if (S > 1 && block < 2) continue;  // a block must differ from a tied head's 1
    for (int vocab = 2; vocab <= 8 * S + 64; ++vocab) {
      probe.vocab_size = vocab;
      layout = layout_build(probe);
      size_t embed = unit_shard_elements(layout.units[0].numel, S);
      size_t head = unit_shard_elements(layout.units[2].numel, S);
      if (embed != block && embed != head && head != block) {
        m.ffn_dim = ffn;
        m.vocab_size = vocab;
        return m;
      }
    }
  }
}

// Turns each call of the engine into trace entries. Shard sizes of the
// stand-in's unit kinds identify which kind a collective carried.
class Recorder {
 public:
  Recorder(StepTrace& trace, const ParameterLayout& stand_in, int shard_group) : trace_(trace) {
    const int n = static_cast<int>(stand_in.units.size());
    for (int u = 0; u < n; ++u) {
      if (stand_in.units[u].numel == 0) continue;  // another pipeline stage's
      size_t s = unit_shard_elements(stand_in.units[u].numel, shard_group);
      UnitKind kind = unit_kind(u, n);
      auto [it, inserted] = kind_by_shard_.emplace(s, kind);
      LLM_CHECK(inserted || it->second == kind,
                "step trace: stand-in units of two kinds share a shard of {} elements", s);
    }
  }

  int issue(CollectiveOp op, GroupRole group, size_t count, WireType type, bool scalar) {
    UnitKind kind = UnitKind::scalar;
    if (!scalar) {
      auto it = kind_by_shard_.find(count);
      LLM_CHECK(it != kind_by_shard_.end(),
                "step trace: a {} of {} elements matches no unit's shard (the engine's shard "
                "arithmetic changed?)",
                collective_op_name(op), count);
      kind = it->second;
    }
    trace_.collectives.push_back({op, group, kind, type});
    int id = static_cast<int>(trace_.collectives.size()) - 1;
    push({StepEvent::Type::issue, -1, Pass::forward, id});
    return id;
  }
  void wait(int id) { push({StepEvent::Type::wait, -1, Pass::forward, id}); }
  void compute(int unit, Pass pass) { push({StepEvent::Type::compute, unit, pass, -1}); }
  void optimizer() { push({StepEvent::Type::optimizer, -1, Pass::forward, -1}); }
  void gradient_final(int unit) {
    push({StepEvent::Type::gradient_final, unit, Pass::forward, -1});
  }
  // Events count from start() (not the engine's construction: with the
  // optimizer offloaded it gathers the initial compute copy) to stop().
  void start() { recording_ = true; }
  void stop() { recording_ = false; }

 private:
  void push(const StepEvent& event) {
    if (recording_) trace_.events.push_back(event);
  }
  StepTrace& trace_;
  std::map<size_t, UnitKind> kind_by_shard_;
  bool recording_ = false;
};

// The callbacks of a recording group in `role`: each collective becomes a
// trace entry, waited for where the engine waits on its handle.
RecordingGroup::OnCollective record_collectives(GroupRole role, Recorder& recorder) {
  return [&recorder, role](CollectiveOp op, size_t count, WireType type) {
    const int id = recorder.issue(op, role, count, type, /*scalar=*/false);
    Recorder* r = &recorder;
    return CommHandle([r, id] { r->wait(id); });
  };
}
RecordingGroup::OnScalarSum record_scalar_sums(GroupRole role, Recorder& recorder) {
  return [&recorder, role] {
    recorder.wait(
        recorder.issue(CollectiveOp::all_reduce, role, 1, WireType::f32, /*scalar=*/true));
  };
}
std::unique_ptr<RecordingGroup> recording_group(int size, GroupRole role, Recorder& recorder) {
  return std::make_unique<RecordingGroup>(size, record_collectives(role, recorder),
                                          record_scalar_sums(role, recorder));
}

// The pipeline group of stage `stage` of `stages`. Its messages move
// nothing and are not traced (pipeline_model.h sizes them); a receive zeroes
// its buffer so the stand-in's activations stay finite. Its loss sum is
// traced as a scalar on the world.
class RecordingPipeline : public RecordingGroup {
 public:
  RecordingPipeline(int stages, int stage, Recorder& recorder)
      : RecordingGroup(stages, record_collectives(GroupRole::world, recorder),
                       record_scalar_sums(GroupRole::world, recorder)),
        stage_(stage) {}
  int rank() const override { return stage_; }
  CommHandle send_async(const void*, size_t, WireType, int) override { return {}; }
  CommHandle recv_async(void* data, size_t count, WireType type, int) override {
    std::memset(data, 0, count * wire_bytes(type));
    return {};
  }
  CommHandle send_recv_async(const void*, size_t, int, void* recv, size_t recv_count, int,
                             WireType type) override {
    return recv_async(recv, recv_count, type, 0);
  }

 private:
  int stage_;
};

// Forwards to the engine and marks where each unit's compute happens: right
// before the release that ends its use in a pass (a nested acquire, the tied
// embedding inside the head, is part of the head's compute), or, for a unit
// whose backward takes no parameters (the embedding), before its gradient
// release.
class RecordingProvider : public UnitProvider {
 public:
  RecordingProvider(UnitProvider& engine, Recorder& recorder, int num_units)
      : engine_(engine),
        recorder_(recorder),
        held_(num_units, 0),
        nested_(num_units, false),
        computed_backward_(num_units, false) {}

  void begin_micro_batch() {
    std::fill(computed_backward_.begin(), computed_backward_.end(), false);
  }

  const void* acquire_params(int unit, Pass pass) override {
    bool others_held = std::any_of(held_.begin(), held_.end(), [](int h) { return h > 0; });
    if (held_[unit]++ == 0) nested_[unit] = others_held;
    return engine_.acquire_params(unit, pass);
  }
  void release_params(int unit, Pass pass) override {
    if (--held_[unit] == 0 && !nested_[unit]) {
      recorder_.compute(unit, pass);
      if (pass == Pass::backward) computed_backward_[unit] = true;
    }
    engine_.release_params(unit, pass);
  }
  float* acquire_grads(int unit) override { return engine_.acquire_grads(unit); }
  uint64_t params_version() const override { return engine_.params_version(); }
  void release_grads(int unit) override {
    if (!computed_backward_[unit]) {
      recorder_.compute(unit, Pass::backward);
      computed_backward_[unit] = true;
    }
    engine_.release_grads(unit);
  }

 private:
  UnitProvider& engine_;
  Recorder& recorder_;
  std::vector<int> held_;
  std::vector<bool> nested_, computed_backward_;
};

}  // namespace

StepTrace step_trace_record(const Config& config, int world, int stage) {
  LLM_CHECK(config.parallel.tensor_parallel == 1,
            "step trace: records data parallelism only (throughput_predict passes the data "
            "dimension), got parallel.tensor_parallel = {}",
            config.parallel.tensor_parallel);
  const int stages = config.parallel.pipeline_parallel;
  LLM_CHECK(stage >= 0 && stage < stages, "step trace: stage {} of {}", stage, stages);
  // The stand-in's ops are a few elements wide: a team of threads would only
  // fork and join (on a busy machine, waiting for descheduled threads).
  const ThreadLimit one_thread(1);
  const ShardingPlan plan = sharding_plan(config.parallel, world);
  StepTrace trace;
  trace.micro_batches = micro_batches_per_step(config.training, world);

  Config stand_in = config;
  stand_in.model = stand_in_model(config.model, plan.shard_group_size);
  stand_in.training.micro_batch_size = 1;
  stand_in.training.seq_len = 1;
  const ParameterLayout layout = layout_build(stand_in.model, {0, 1, stage, stages});
  const int num_units = static_cast<int>(layout.units.size());

  Recorder recorder(trace, layout, plan.shard_group_size);
  std::unique_ptr<RecordingGroup> world_group = recording_group(world, GroupRole::world, recorder);
  // The data-parallel ranks of one stage; the stage's pipeline group apart.
  ParallelConfig data_parallel = config.parallel;
  data_parallel.pipeline_parallel = 1;
  Topology topology(*world_group, data_parallel);
  topology.pipeline = std::make_unique<RecordingPipeline>(stages, stage, recorder);
  topology.shard = recording_group(plan.shard_group_size, GroupRole::shard, recorder);
  topology.replicate =
      recording_group(world / plan.shard_group_size, GroupRole::replicate, recorder);
  // One copy of this stage's state is one shard group (the norm's sum over
  // the stages is a scalar on it).
  topology.model_copy = recording_group(plan.shard_group_size, GroupRole::shard, recorder);
  const PipelineSchedule schedule = config.parallel.pipeline_schedule;
  const std::unique_ptr<Transformer> model = Transformer::create(
      stand_in.model, 1, 1, backend_cpu(), recompute_plan(stand_in.training), stand_in.precision(),
      ModelSplit{nullptr, topology.pipeline.get(),
                 pipeline_in_flight(schedule, stages, stage, trace.micro_batches)});
  ShardingEngine engine(model->layout(), stand_in, backend_cpu(), topology);
  engine.on_gradient_final([&](int unit) { recorder.gradient_final(unit); });
  RecordingProvider provider(engine, recorder, num_units);

  // The order of Trainer::train_step.
  const int32_t input = 0, target = 1;
  const int M = trace.micro_batches;
  recorder.start();
  engine.zero_grads();
  pipeline_step(
      schedule, *model, provider, M, 1, 1, 1.0f,
      [&](int) {
        return MicroBatchTokens{&input, &target};
      },
      [&](int micro) {
        provider.begin_micro_batch();
        engine.begin_micro_batch(micro == M - 1);
      });
  if (stages > 1) topology.pipeline->all_reduce_sum(0.0);  // the last stage's losses
  topology.world.all_reduce_sum(0.0);                      // the mean loss
  engine.grad_norm();
  recorder.optimizer();
  engine.optimizer_step({1e-3f, 1.0f, 1});
  recorder.stop();
  return trace;
}

}  // namespace llm
