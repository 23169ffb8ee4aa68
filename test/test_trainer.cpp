// The training loop on the tiny data set made by the build: bit-identical
// repeats, gradient accumulation equivalence, the LR schedule, the memory
// refusal for a model that cannot fit, and sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/log.h"
#include "test/temp_dir.h"
#include "parallel/comm.h"
#include "data/tokenizer.h"
#include "base/file_io.h"
#include "commands/export.h"
#include "trainer/step_meter.h"
#include "test/tiny_trainer.h"
#include "trainer/trainer.h"
#include "model/optimizer.h"
#include "test/error_of.h"

namespace llm {
namespace {

using tiny_trainer::losses_of;
using tiny_trainer::tiny;

using test_support::error_of;

TEST(Trainer, SameSeedSameConfigGivesIdenticalBits) {
  Trainer a(tiny(), comm_world()), b(tiny(), comm_world());
  std::vector<float> la = losses_of(a, 4), lb = losses_of(b, 4);
  EXPECT_EQ(la, lb);  // exact: same kernels, same order, same data
  std::vector<float> pa = a.engine().gather_all_params(), pb = b.engine().gather_all_params();
  EXPECT_EQ(0, std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)));
  Trainer c(tiny({"training.seed=1"}), comm_world());
  EXPECT_NE(losses_of(c, 4), la);
}

// Without a GPU (or without the CUDA backend) a cuda run stops before
// allocating anything, with one line naming the config and the reason.
TEST(Trainer, CudaDeviceWithoutAGpuIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  std::string message;
  try {
    Trainer trainer(tiny({"training.device=cuda"}), comm_world());
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("configs/tiny.toml: training.device = cuda but this"), std::string::npos)
      << message;
}

TEST(Trainer, LossFallsOnTinyData) {
  Trainer trainer(tiny(), comm_world());
  float before = trainer.evaluate();
  EXPECT_NEAR(before, std::log(512.0f), 0.3f);  // untrained: about ln(vocab)
  losses_of(trainer, 40);
  EXPECT_LT(trainer.evaluate(), before - 0.8f);
}

// Same global batch as one micro-batch of 8 or as 4 accumulated micro-batches
// of 2: the gradient is the same sum in another order, so fp32 agreement.
TEST(Trainer, GradientAccumulationMatchesOneBigMicroBatch) {
  Trainer whole(tiny({"training.micro_batch_size=8"}), comm_world());
  Trainer accumulated(tiny({"training.micro_batch_size=2"}), comm_world());
  ASSERT_EQ(whole.accumulation_steps(), 1);
  ASSERT_EQ(accumulated.accumulation_steps(), 4);
  for (int s = 0; s < 3; ++s) {
    StepResult a = whole.train_step(s), b = accumulated.train_step(s);
    EXPECT_NEAR(a.loss, b.loss, 1e-5f);
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-4f * a.grad_norm);
  }
  std::vector<float> pa = whole.engine().gather_all_params();
  std::vector<float> pb = accumulated.engine().gather_all_params();
  for (size_t i = 0; i < pa.size(); ++i) ASSERT_NEAR(pa[i], pb[i], 1e-5f) << i;
}

TEST(Trainer, EvaluationIsTheMeanOverTheFirstValidationSequences) {
  Trainer trainer(tiny({"training.eval_sequences=3", "training.micro_batch_size=2"}), comm_world());
  float whole = trainer.evaluate();  // micro-batches of 2 + 1 sequences
  Trainer one_by_one(
      tiny({"training.eval_sequences=3", "training.micro_batch_size=1", "training.batch_size=8"}),
      comm_world());
  EXPECT_NEAR(one_by_one.evaluate(), whole, 1e-5f);
}

TEST(Trainer, SampleDecodesGeneratedText) {
  Trainer trainer(tiny(), comm_world());
  losses_of(trainer, 5);
  std::string text = trainer.sample(20);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, trainer.sample(20));  // seeded sampling is reproducible
}

// The refusal depends on the budget the test sets, not on this host's RAM:
// llama8b in ddp and fp32 needs 16 bytes per parameter (~120 GiB) before
// activations.
TEST(Trainer, RefusesAModelThatCannotFitBeforeAllocating) {
  Config config = config_load("configs/llama8b.toml", {"training.device=cpu"});
  ShardingPlan ddp = sharding_plan(config.parallel, 1);
  MemoryPlan plan = memory_plan(config, ddp);
  const size_t n = layout_build(config.model).total_numel;
  EXPECT_GT(n, 8.00e9);  // Llama 3 8B: 8.03B parameters
  EXPECT_LT(n, 8.06e9);
  EXPECT_GE(plan.state.params, n * sizeof(float));
  const size_t gib = size_t{1} << 30;
  std::string message = error_of([&] {
    check_memory_fits(config, ddp, {64 * gib, "the test's limit has"});
  });
  EXPECT_NE(message.find("llama8b.toml: needs"), std::string::npos) << message;
  EXPECT_NE(message.find("but the test's limit has 64.00 GiB available per rank"),
            std::string::npos)
      << message;
  EXPECT_NO_THROW(check_memory_fits(config, ddp, {plan.total(), "exactly enough"}));
  EXPECT_THROW(check_memory_fits(config, ddp, {plan.total() - 1, "one byte short"}), Error);
}

// bf16 compute follows the fp32 loss curve over 300 steps of the tiny model.
// Measured: 50-step window means agree within 0.01, single steps within 0.04,
// validation within 0.005; asserted with about 2x margin. At step 1 the
// gradient norms agree to ~4e-5. (At the default lr 3e-3 a loss spike can send
// either run into a slightly different basin, so the curves stay apart by
// ~0.1 after it: chaos, not bias, hence the calmer lr here.)
TEST(Trainer, Bf16FollowsTheFp32LossCurve) {
  const int steps = 300, window = 50;
  std::vector<std::string> shape = {"training.steps=300", "training.lr=1e-3",
                                    "training.eval_interval=0"};
  std::vector<std::string> bf16 = shape;
  bf16.push_back("training.precision=bf16");
  Trainer fp32_run(tiny(shape), comm_world()), bf16_run(tiny(bf16), comm_world());
  double window_diff = 0, worst_window = 0, worst_step = 0;
  for (int s = 0; s < steps; ++s) {
    double d = fp32_run.train_step(s).loss - bf16_run.train_step(s).loss;
    worst_step = std::max(worst_step, std::abs(d));
    window_diff += d;
    if ((s + 1) % window == 0) {
      worst_window = std::max(worst_window, std::abs(window_diff / window));
      window_diff = 0;
    }
  }
  EXPECT_LT(worst_window, 0.02);
  EXPECT_LT(worst_step, 0.1);
  float fp32_val = fp32_run.evaluate(), bf16_val = bf16_run.evaluate();
  EXPECT_NEAR(bf16_val, fp32_val, 0.01f);
  EXPECT_LT(bf16_val, std::log(512.0f) - 1.5f);  // and it learned
  // Activations in bf16 take about half the bytes (statistics stay fp32).
  EXPECT_LT(bf16_run.model().activation_bytes().total,
            0.55 * fp32_run.model().activation_bytes().total);
}

// fp8 (the block matmuls on e4m3 / e5m2 copies, docs/training.md) follows
// the bf16 loss curve over 300 steps of the tiny model, with bf16's test's
// settings. The bound comes from the target: the final loss within 1%
// of bf16's; each matmul operand is rounded to 3 (gradients 2) mantissa bits,
// a relative error of at most 2^-4 (2^-3) per element, but the errors are
// unbiased and average out over each dot product, so the curve moves by a
// small fraction of that. Measured (2026-11-26): 50-step window means within
// 0.011, single steps within 0.035, validation 4.4135 against 4.4103 (0.07%);
// asserted: bf16's own bounds against fp32 (0.02, 0.1) and the 1%.
TEST(Trainer, Fp8FollowsTheBf16LossCurve) {
  const int steps = 300, window = 50;
  std::vector<std::string> bf16 = {"training.steps=300", "training.lr=1e-3",
                                   "training.eval_interval=0", "training.precision=bf16"};
  std::vector<std::string> fp8 = bf16;
  fp8.back() = "training.precision=fp8";
  Trainer bf16_run(tiny(bf16), comm_world()), fp8_run(tiny(fp8), comm_world());
  double window_diff = 0, worst_window = 0, worst_step = 0;
  for (int s = 0; s < steps; ++s) {
    double d = bf16_run.train_step(s).loss - fp8_run.train_step(s).loss;
    worst_step = std::max(worst_step, std::abs(d));
    window_diff += d;
    if ((s + 1) % window == 0) {
      worst_window = std::max(worst_window, std::abs(window_diff / window));
      window_diff = 0;
    }
  }
  RecordProperty("worst_window", std::to_string(worst_window));
  RecordProperty("worst_step", std::to_string(worst_step));
  EXPECT_LT(worst_window, 0.02);
  EXPECT_LT(worst_step, 0.1);
  const float bf16_val = bf16_run.evaluate(), fp8_val = fp8_run.evaluate();
  RecordProperty("validation", std::to_string(bf16_val) + " vs " + std::to_string(fp8_val));
  EXPECT_LT(std::abs(fp8_val - bf16_val), 0.01 * bf16_val);  // the 1%
  EXPECT_LT(fp8_val, std::log(512.0f) - 1.5f);               // and it learned
  // The FP8 copies of one matmul's operands are all fp8 adds.
  EXPECT_EQ(
      fp8_run.model().activation_bytes().total,
      bf16_run.model().activation_bytes().total + fp8_run.model().activation_bytes().fp8_copies);
}

TEST(Schedule, WarmupThenCosineToTheFloor) {
  TrainingConfig t;
  t.steps = 110;
  t.warmup_steps = 10;
  t.lr = 1.0;
  t.min_lr_ratio = 0.1;
  EXPECT_FLOAT_EQ(lr_at_step(t, 0), 0.1f);
  EXPECT_FLOAT_EQ(lr_at_step(t, 9), 1.0f);
  EXPECT_FLOAT_EQ(lr_at_step(t, 10), 1.0f);
  EXPECT_NEAR(lr_at_step(t, 10 + 99 / 2), 0.55f, 0.01f);
  EXPECT_FLOAT_EQ(lr_at_step(t, 109), 0.1f);
  t.lr_schedule = LrSchedule::linear;
  EXPECT_NEAR(lr_at_step(t, 10 + 99 / 2), 0.55f, 0.01f);
  EXPECT_FLOAT_EQ(lr_at_step(t, 109), 0.1f);
  t.lr_schedule = LrSchedule::constant;
  EXPECT_FLOAT_EQ(lr_at_step(t, 109), 1.0f);
}

TEST(Schedule, ClippingScalesOnlyAboveTheThreshold) {
  EXPECT_FLOAT_EQ(clip_scale(0.5f, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clip_scale(4.0f, 1.0f), 0.25f);
  EXPECT_FLOAT_EQ(clip_scale(4.0f, 0.0f), 1.0f);  // off
}

// Tokenizer problems used to surface only at the end-of-run sample.
TEST(Trainer, MissingOrGarbageTokenizerIsAnErrorAtStart) {
  test_support::TempDir dir("llm_test_trainer_tok_");
  const std::string missing = dir.file("missing.model");
  std::string message =
      error_of([&] { Trainer t(tiny({"data.tokenizer=" + missing}), comm_world()); });
  EXPECT_NE(message.find(missing), std::string::npos) << message;
  const std::string garbage = dir.file("garbage.model");
  std::ofstream(garbage) << "not a sentencepiece model";
  message = error_of([&] { Trainer t(tiny({"data.tokenizer=" + garbage}), comm_world()); });
  EXPECT_NE(message.find(garbage), std::string::npos) << message;
  message = error_of([&] {
    Trainer t(tiny({"data.tokenizer=", "training.sample_tokens=10"}), comm_world());
  });
  EXPECT_NE(message.find("training.sample_tokens = 10 needs data.tokenizer"), std::string::npos)
      << message;
}

// A full disk used to go unnoticed (exit 0, the file cut mid-line).
TEST(Metrics, WriteToAFullDiskIsAnErrorNamingTheFile) {
  MetricsLog log("/dev/full", 0);
  const std::string message = error_of([&] { log.write({{"step", 1}, {"loss", 2.5}}); });
  EXPECT_NE(message.find("/dev/full: cannot write the metrics file"), std::string::npos) << message;
}

// A run killed after step 6 but saved at step 4 re-runs steps 5 and 6 when
// resumed: the metrics file still holds one line per step, the newer ones,
// each with its rate and memory; each start names the commit built.
TEST(Metrics, ResumedRunLeavesOneLinePerStep) {
  test_support::TempDir dir("llm_test_trainer_metrics_");
  auto run = [&](std::vector<std::string> overrides) {
    for (const char* o : {"training.steps=6", "training.eval_interval=0",
                          "training.eval_sequences=0", "logging.metrics=true"}) {
      overrides.push_back(o);
    }
    overrides.push_back("checkpoint.dir=" + dir.str());
    Trainer trainer(config_load("configs/tiny.toml", overrides), comm_world());
    trainer.run();
  };
  run({"checkpoint.resume=none", "checkpoint.interval=4", "checkpoint.save_final=false"});
  {  // as a crash leaves it: a line cut in the middle
    std::ofstream(dir.file("metrics.jsonl"), std::ios::app) << "{\"step\": 7, \"lo";
  }
  run({"checkpoint.resume=auto"});
  std::map<int, int> loss_lines;
  int resumed_events = 0, starts = 0;
  std::ifstream in(dir.file("metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);  // every line complete
    if (record.contains("loss")) {
      const int step = record["step"].get<int>();
      ++loss_lines[step];
      // tiny's 8-sequence batch of 32-token sequences
      EXPECT_EQ(record["tokens_seen"].get<double>(), step * 8.0 * 32) << line;
      EXPECT_GT(record["epochs"].get<double>(), 0) << line;
      // The step's own rate (on the CPU against the measured sgemm peak) and
      // the device's memory: the arenas within what is resident, at most the peak.
      EXPECT_GT(record["flops_per_rank"].get<double>(), 0) << line;
      EXPECT_GT(record["mfu"].get<double>(), 0) << line;
      const auto allocated = record["mem_allocated_bytes"].get<size_t>();
      const auto reserved = record["mem_reserved_bytes"].get<size_t>();
      EXPECT_GT(allocated, 0u) << line;
      EXPECT_LE(allocated, reserved) << line;
      EXPECT_LE(reserved, record["mem_peak_bytes"].get<size_t>()) << line;
    }
    if (record.value("event", "") == "start") {
      EXPECT_FALSE(record["commit"].get<std::string>().empty()) << line;
      EXPECT_EQ(record["world_size"], 1);
      EXPECT_EQ(record["mode"], "ddp");
      EXPECT_EQ(record["step"], starts++ == 0 ? 0 : 4) << "each (re)start is marked";
    }
    if (record.value("event", "") == "resumed") {
      ++resumed_events;
      EXPECT_EQ(record["step"], 4);
    }
  }
  EXPECT_EQ(loss_lines, (std::map<int, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}));
  EXPECT_EQ(resumed_events, 1);
  EXPECT_EQ(starts, 2);
}

// ./train export of a run directory follows its `latest`, and writes next to
// the weights what transformers reads: the run's tokenizer with its special
// pieces and the generation ids. A non-empty output is refused untouched
// unless forced.
TEST(Export, RunDirectoryBecomesAHuggingFaceDirectory) {
  namespace fs = std::filesystem;
  test_support::TempDir dir("llm_test_export_");
  Trainer trainer(
      config_load("configs/tiny.toml", {"checkpoint.dir=" + dir.file("run"),
                                        "checkpoint.resume=none", "logging.metrics=false"}),
      comm_world());
  trainer.train_step(0);
  const std::string saved = trainer.save_checkpoint(1);
  const fs::path out = dir.file("hf");
  const ExportResult result = export_checkpoint({dir.file("run"), out.string()});
  EXPECT_EQ(fs::path(result.checkpoint), fs::path(saved));
  EXPECT_TRUE(result.tokenizer);
  EXPECT_EQ(result.parameters, trainer.model().layout().total_numel);
  for (const char* file : {"model.safetensors", "config.json", "generation_config.json",
                           "tokenizer.model", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  EXPECT_EQ(read_file((out / "tokenizer.model").string()), read_file("data/tiny/tokenizer.model"));
  const Tokenizer tokenizer = Tokenizer::load("data/tiny/tokenizer.model");
  const auto json = [&](const char* file) {
    return nlohmann::json::parse(read_file((out / file).string()));
  };
  const nlohmann::json tokenizer_config = json("tokenizer_config.json");
  EXPECT_EQ(tokenizer_config["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(tokenizer_config["bos_token"], tokenizer.piece(tokenizer.bos_id()));
  EXPECT_EQ(tokenizer_config["eos_token"], tokenizer.piece(tokenizer.eos_id()));
  EXPECT_EQ(tokenizer_config["pad_token"], tokenizer.piece(tokenizer.eos_id()));
  EXPECT_EQ(tokenizer_config["added_tokens_decoder"][std::to_string(tokenizer.bos_id())]["content"],
            tokenizer.piece(tokenizer.bos_id()));
  EXPECT_FALSE(tokenizer_config.contains("chat_template")) << "no chat tokens, no chat template";
  EXPECT_EQ(json("generation_config.json")["eos_token_id"], tokenizer.eos_id());
  EXPECT_EQ(json("config.json")["bos_token_id"], tokenizer.bos_id());

  const fs::path occupied = dir.file("occupied");
  fs::create_directories(occupied);
  write_file_atomically((occupied / "notes.txt").string(), "mine");
  const std::string message = error_of([&] { export_checkpoint({saved, occupied.string()}); });
  EXPECT_NE(message.find("is not empty; pass --force"), std::string::npos) << message;
  EXPECT_EQ(std::distance(fs::directory_iterator(occupied), fs::directory_iterator()), 1)
      << "nothing written";
  export_checkpoint({saved, out.string(), "bfloat16", /*force=*/true});
  EXPECT_EQ(json("config.json")["torch_dtype"], "bfloat16");
}

// Running a finished run's command again says so in one line and trains
// nothing (re-running `make demo`), after a resume line saying the config is
// unchanged.
TEST(Resume, AFinishedRunSaysSoAndDoesNothing) {
  test_support::TempDir dir("llm_test_finished_");
  const std::vector<std::string> overrides = {"training.steps=2", "training.eval_interval=0",
                                              "training.eval_sequences=0", "logging.metrics=false",
                                              "checkpoint.dir=" + dir.str()};
  Trainer(config_load("configs/tiny.toml", overrides), comm_world()).run();
  Trainer again(config_load("configs/tiny.toml", overrides), comm_world());
  EXPECT_EQ(again.start_step(), 2);
  testing::internal::CaptureStdout();
  again.run();
  spdlog::default_logger()->flush();
  const std::string log = testing::internal::GetCapturedStdout();
  EXPECT_NE(log.find("at step 2 (loaded in"), std::string::npos) << log;
  EXPECT_NE(log.find("config unchanged"), std::string::npos) << log;
  EXPECT_NE(log.find("is already trained to step 2 of 2: nothing to do"), std::string::npos) << log;
  EXPECT_EQ(log.find("trained steps"), std::string::npos) << log;
}

// A model vocabulary larger than the tokenizer's is legal but wasteful: the
// trainer says so, naming both sizes.
TEST(Trainer, AVocabularyLargerThanTheTokenizerIsNamed) {
  testing::internal::CaptureStdout();
  Trainer trainer(
      config_load("configs/tiny.toml",
                  {"model.vocab_size=1024", "logging.metrics=false", "checkpoint.resume=none"}),
      comm_world());
  spdlog::default_logger()->flush();
  const std::string log = testing::internal::GetCapturedStdout();
  EXPECT_NE(log.find("model.vocab_size is 1024 but the tokenizer data/tiny/tokenizer.model has 512 "
                     "pieces"),
            std::string::npos)
      << log;
}

// A log line's figures are the interval's: the mean loss of its steps, the
// tokens and FLOPs over their summed time, MFU against the peak (none
// without one), and the meter starts afresh after each line.
TEST(StepMeter, ReportsTheIntervalNotItsLastStep) {
  StepMeter meter(/*flops_per_step=*/6e9, /*tokens_per_step=*/1000, /*ranks=*/2,
                  /*peak_flops_per_rank=*/1e10);
  meter.add(3.0, 0.5, 0.1);
  meter.add(2.0, 1.0, 0.2);
  meter.add(1.0, 1.5, 0.0);
  StepInterval i = meter.take();
  EXPECT_EQ(i.steps, 3);
  EXPECT_DOUBLE_EQ(i.mean_loss, 2.0);
  EXPECT_DOUBLE_EQ(i.tokens_per_s, 3000 / 3.0);
  EXPECT_DOUBLE_EQ(i.ms_per_step, 1000.0);
  EXPECT_DOUBLE_EQ(i.flops_per_rank, 3 * 6e9 / 3.0 / 2);
  EXPECT_DOUBLE_EQ(i.mfu, 0.3);
  EXPECT_DOUBLE_EQ(i.pipeline_wait, 0.1);
  meter.add(5.0, 2.0, 0.0);
  EXPECT_DOUBLE_EQ(meter.take().mean_loss, 5.0);
  EXPECT_TRUE(std::isnan(StepMeter(1, 1, 1, 0).take().mfu)) << "no peak, no MFU";
}

}  // namespace
}  // namespace llm
