// The throughput model's communication is the engine's: for every mode (and
// every hybrid group size), precision, reduce dtype, head tying and number
// of micro-batches, the calls, payload bytes and ring bytes sent per
// collective type that the model predicts for one step equal what the comm
// layer's CommStats count while the real Trainer runs steps on this world;
// with two pipeline stages, what the ranks of the stage it predicts for count
// (both schedules; the embedding's stage and the head's); and the pipeline
// stages' messages are what cost_models/pipeline_model.h says.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cost_models/hardware_profile.h"
#include "cost_models/pipeline_model.h"
#include "cost_models/throughput_model.h"
#include "trainer/trainer.h"
#include "parallel/comm.h"

namespace llm {
namespace {

constexpr int kSteps = 2;

// Sequences of 8: the data-parallel traffic is the parameters', whatever the
// length, and the pipeline's messages follow the length the prediction reads.
std::vector<std::string> overrides(const std::string& model, int micro_batch) {
  std::vector<std::string> o = {
      "training.batch_size=12",
      "training.seq_len=8",
      "training.micro_batch_size=" + std::to_string(micro_batch),
      "logging.metrics=false",
      "checkpoint.resume=none",
      "checkpoint.dir=" + (std::filesystem::temp_directory_path() / "llm_mpi_throughput").string()};
  if (model == "untied") {
    // Unit sizes no world size > 1 here divides, an untied LM head.
    for (const char* kv : {"model.dim=40", "model.n_heads=4", "model.n_kv_heads=1",
                           "model.ffn_dim=100", "model.tie_embeddings=false"}) {
      o.push_back(kv);
    }
  }
  return o;
}

// This rank's data-parallel traffic (shard and replicate groups) over
// kSteps steps, and its pipeline stage.
struct Measured {
  CommStats stats;
  int stage = 0;
};
Measured measured_stats(const Config& config) {
  Trainer trainer(config, comm_world());
  trainer.topology().shard->reset_stats();
  trainer.topology().replicate->reset_stats();
  for (int s = 0; s < kSteps; ++s) trainer.train_step(s);
  Measured m{trainer.topology().shard->stats(), trainer.topology().pipeline->rank()};
  m.stats.add(trainer.topology().replicate->stats());
  return m;
}

void expect_traffic_equal(const StepPrediction& predicted, const CommStats& real) {
  auto op = [&](CollectiveOp c) { return predicted.traffic[static_cast<int>(c)]; };
  EXPECT_EQ(kSteps * op(CollectiveOp::all_reduce).sent_bytes, real.all_reduce_sent);
  EXPECT_EQ(kSteps * op(CollectiveOp::reduce_scatter).sent_bytes, real.reduce_scatter_sent);
  EXPECT_EQ(kSteps * op(CollectiveOp::all_gather).sent_bytes, real.all_gather_sent);
  uint64_t calls = 0, payload = 0;
  for (const OpTraffic& t : predicted.traffic) {
    calls += t.calls;
    payload += t.payload_bytes;
  }
  EXPECT_EQ(kSteps * calls, real.calls);
  EXPECT_EQ(kSteps * payload, real.payload_bytes);
}

// ddp, zero1..3 and hybrid at every group size dividing the data-parallel size.
std::vector<std::vector<std::string>> every_mode(int data_parallel) {
  std::vector<std::vector<std::string>> modes = {{"parallel.mode=ddp"},
                                                 {"parallel.mode=zero1"},
                                                 {"parallel.mode=zero2"},
                                                 {"parallel.mode=zero3"}};
  for (int group = 1; group <= data_parallel; ++group) {
    if (data_parallel % group == 0) {
      modes.push_back(
          {"parallel.mode=hybrid", "parallel.shard_group_size=" + std::to_string(group)});
    }
  }
  return modes;
}

const std::vector<std::vector<std::string>> kPrecisions = {
    {"training.precision=fp32", "parallel.reduce_dtype=fp32"},
    {"training.precision=bf16", "parallel.reduce_dtype=bf16"},
    {"training.precision=bf16", "parallel.reduce_dtype=fp32", "training.recompute=full"}};

std::string name_of(const std::vector<std::string>& overrides) {
  std::string name;
  for (const std::string& kv : overrides) name += " " + kv;
  return name;
}

TEST(ThroughputModelTraffic, EqualsWhatTheEngineCounts) {
  const int n = comm_world().size();
  if (12 % n != 0) GTEST_SKIP() << "12 sequences do not split over " << n << " ranks";
  const HardwareProfile hw = hardware_load("cost_models/hardware/a100_80gb_roce.toml");
  for (const std::string model : {"tiny", "untied"}) {
    // One micro-batch per rank per step, and several (12 / n).
    for (int micro_batch : {12 / n, 1}) {
      for (const auto& mode : every_mode(n)) {
        for (const auto& precision : kPrecisions) {
          std::vector<std::string> o = overrides(model, micro_batch);
          o.insert(o.end(), mode.begin(), mode.end());
          o.insert(o.end(), precision.begin(), precision.end());
          SCOPED_TRACE(model + name_of(o));
          Config config = config_load("configs/tiny.toml", o);
          expect_traffic_equal(throughput_predict(config, n, hw), measured_stats(config).stats);
        }
      }
    }
  }
}

// Two stages: the model predicts the stage with the most compute, the head's
// (2 blocks: one each) or, with wider blocks and 3 layers, the embedding's
// (2 blocks against 1 and the LM head); every rank of it counts the
// prediction whatever the schedule.
TEST(ThroughputModelTraffic, PipelineStageEqualsWhatItsEngineCounts) {
  const int n = comm_world().size();
  if (n % 2 != 0 || 12 % (n / 2) != 0)
    GTEST_SKIP() << "two stages of 12 sequences do not split over " << n << " ranks";
  const int D = n / 2;
  const HardwareProfile hw = hardware_load("cost_models/hardware/a100_80gb_roce.toml");
  const std::vector<std::pair<std::vector<std::string>, int>> stages = {
      {{"model.n_layers=2"}, 1}, {{"model.n_layers=3", "model.ffn_dim=200"}, 0}};
  for (const auto& [layers, stage] : stages) {
    for (const char* schedule : {"1f1b", "gpipe"}) {
      for (int micro_batch : {12 / D, 1}) {
        for (const auto& mode : every_mode(D)) {
          for (const auto& precision : kPrecisions) {
            std::vector<std::string> o = overrides("untied", micro_batch);
            o.insert(o.end(), layers.begin(), layers.end());
            o.push_back("parallel.pipeline_parallel=2");
            o.push_back(std::string("parallel.pipeline_schedule=") + schedule);
            o.insert(o.end(), mode.begin(), mode.end());
            o.insert(o.end(), precision.begin(), precision.end());
            SCOPED_TRACE(name_of(o));
            Config config = config_load("configs/tiny.toml", o);
            const StepPrediction predicted = throughput_predict(config, n, hw);
            EXPECT_EQ(predicted.pipeline_stage, stage);
            const Measured real = measured_stats(config);
            if (real.stage == predicted.pipeline_stage) expect_traffic_equal(predicted, real.stats);
          }
        }
      }
    }
  }
}

// Every stage boundary carries one activation and one gradient per
// micro-batch, whatever the schedule; summed over the world's T x D pipeline
// groups.
TEST(ThroughputModelTraffic, PipelineMessagesEqualWhatTheStagesSend) {
  const int n = comm_world().size();
  if (n % 2 != 0) GTEST_SKIP() << "two stages need an even world, this is " << n;
  std::vector<std::vector<std::string>> meshes = {{"parallel.pipeline_parallel=2"}};
  if (n % 4 == 0) {
    meshes.push_back(
        {"parallel.pipeline_parallel=2", "parallel.tensor_parallel=2", "model.n_kv_heads=2"});
  }
  for (const auto& mesh : meshes) {
    for (const char* schedule : {"1f1b", "gpipe"}) {
      for (const char* precision : {"fp32", "bf16"}) {
        std::vector<std::string> o = overrides("untied", 1);
        o.insert(o.end(), mesh.begin(), mesh.end());
        o.push_back(std::string("parallel.pipeline_schedule=") + schedule);
        o.push_back(std::string("training.precision=") + precision);
        std::string name;
        for (const std::string& kv : o) name += " " + kv;
        SCOPED_TRACE(name);
        const Config config = config_load("configs/tiny.toml", o);
        Trainer trainer(config, comm_world());
        trainer.topology().pipeline->reset_stats();
        for (int s = 0; s < kSteps; ++s) trainer.train_step(s);
        const CommStats& mine = trainer.topology().pipeline->stats();
        const double sent = comm_world().all_reduce_sum(static_cast<double>(mine.p2p_sent));
        const double calls = comm_world().all_reduce_sum(static_cast<double>(mine.calls));
        const int pipelines = n / 2;
        const PipelineTraffic predicted =
            pipeline_step_traffic(config, trainer.accumulation_steps());
        EXPECT_GT(predicted.sent_bytes, 0u);
        EXPECT_EQ(sent, static_cast<double>(kSteps * pipelines * predicted.sent_bytes));
        EXPECT_EQ(calls, static_cast<double>(kSteps * pipelines * predicted.sends));
        EXPECT_EQ(mine.sent_bytes, mine.p2p_sent) << "nothing but point-to-point messages";
      }
    }
  }
}

}  // namespace
}  // namespace llm
