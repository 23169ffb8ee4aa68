// The throughput model's communication is the engine's: for every mode (and
// every hybrid group size), precision, reduce dtype, head tying and number
// of micro-batches, the calls, payload bytes and ring bytes sent per
// collective type that the model predicts for one step equal what the comm
// layer's CommStats count while the real Trainer runs steps on this world;
// and the pipeline stages' messages are what planning/pipeline_model.h says.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "planning/hardware_profile.h"
#include "planning/pipeline_model.h"
#include "planning/throughput_model.h"
#include "trainer/trainer.h"
#include "parallel/comm.h"

namespace llm {
namespace {

constexpr int kSteps = 2;

std::vector<std::string> overrides(const std::string& model, int micro_batch) {
  std::vector<std::string> o = {
      "training.batch_size=12", "training.micro_batch_size=" + std::to_string(micro_batch),
      "logging.metrics=false", "checkpoint.resume=none",
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

CommStats measured_stats(const Config& config) {
  Trainer trainer(config, comm_world());
  trainer.topology().shard->reset_stats();
  trainer.topology().replicate->reset_stats();
  for (int s = 0; s < kSteps; ++s) trainer.train_step(s);
  CommStats stats = trainer.topology().shard->stats();
  stats.add(trainer.topology().replicate->stats());
  return stats;
}

TEST(ThroughputModelTraffic, EqualsWhatTheEngineCounts) {
  const int n = comm_world().size();
  if (12 % n != 0) GTEST_SKIP() << "12 sequences do not split over " << n << " ranks";
  const HardwareProfile hw = hardware_load("planning/hardware/a100_80gb_roce.toml");
  std::vector<std::vector<std::string>> modes = {
      {"parallel.mode=ddp"}, {"parallel.mode=zero1"}, {"parallel.mode=zero2"}, {"parallel.mode=zero3"}};
  for (int group = 1; group <= n; ++group) {
    if (n % group == 0) {
      modes.push_back({"parallel.mode=hybrid", "parallel.shard_group_size=" + std::to_string(group)});
    }
  }
  const std::vector<std::vector<std::string>> precisions = {
      {"training.precision=fp32", "parallel.reduce_dtype=fp32"},
      {"training.precision=bf16", "parallel.reduce_dtype=bf16"},
      {"training.precision=bf16", "parallel.reduce_dtype=fp32", "training.activation_checkpointing=full"}};
  for (const std::string model : {"tiny", "untied"}) {
    // One micro-batch per rank per step, and several (12 / n).
    for (int micro_batch : {12 / n, 1}) {
      for (const auto& mode : modes) {
        for (const auto& precision : precisions) {
          std::vector<std::string> o = overrides(model, micro_batch);
          o.insert(o.end(), mode.begin(), mode.end());
          o.insert(o.end(), precision.begin(), precision.end());
          std::string name = model + " micro-batch " + std::to_string(micro_batch);
          for (const std::string& kv : o) name += " " + kv;
          SCOPED_TRACE(name);
          Config config = config_load("configs/tiny.toml", o);
          const StepPrediction predicted = throughput_predict(config, n, hw);
          const CommStats real = measured_stats(config);
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
    meshes.push_back({"parallel.pipeline_parallel=2", "parallel.tensor_parallel=2", "model.n_kv_heads=2"});
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
        const PipelineTraffic predicted = pipeline_step_traffic(config, trainer.accumulation_steps());
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
