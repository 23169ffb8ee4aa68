// training.cuda_graphs against eager launches, on the tiny config (world of
// one): the same bits over several steps of four micro-batches each, and in
// evaluation, whose last micro-batch is ragged (5 sequences in batches of 2),
// so its shape runs eagerly once and is captured as a graph of its own the
// second time; FP8 delayed scaling's graphs of its first step (current
// scaling's kernels) are dropped at the second. Skips where there is no CUDA
// device.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "test/gpu_test_support.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

struct Outcome {
  std::vector<float> losses, grad_norms, val_losses, params;
  int graphs = 0;
};

// Three steps (a graph segment runs eagerly on step 1, is captured on step 2
// and replayed from step 3), then two evaluations.
Outcome run(std::vector<std::string> overrides) {
  for (const char* o : {"training.device=cuda", "logging.metrics=false", "checkpoint.resume=none",
                        "training.eval_sequences=5"})
    overrides.push_back(o);
  overrides.push_back("checkpoint.dir=" +
                      (std::filesystem::temp_directory_path() / "llm_gpu_test_graphs").string());
  Trainer trainer(config_load("configs/tiny.toml", overrides), comm_world());
  Outcome out;
  for (int step = 0; step < 3; ++step) {
    const StepResult r = trainer.train_step(step);
    out.losses.push_back(r.loss);
    out.grad_norms.push_back(r.grad_norm);
  }
  for (int eval = 0; eval < 2; ++eval) out.val_losses.push_back(trainer.evaluate());
  out.params = trainer.engine().gather_all_params();
  out.graphs = trainer.model().device_graphs();
  return out;
}

TEST(GpuCudaGraphs, StepsAndEvaluationGiveTheEagerBits) {
  LLM_SKIP_WITHOUT_GPU();
  // zero3 gathers each unit into a rotating pool: the segments are keyed by
  // the buffers they were handed, as ddp's fixed ones are. fp8: the row
  // amaxes one segment leaves for the next (a block's backward reads the
  // residual gradient's, written by the head's or the next block's).
  for (std::vector<std::string> variant : std::vector<std::vector<std::string>>{
           {"training.precision=fp32"},
           {"training.precision=bf16"},
           {"training.precision=fp8"},
           {"training.precision=fp32", "parallel.mode=zero3"},
           {"training.precision=fp8", "training.fp8_scaling=delayed"}}) {
    SCOPED_TRACE(variant.back());
    const Outcome eager = run(variant);
    variant.push_back("training.cuda_graphs=true");
    const Outcome graphs = run(variant);
    EXPECT_EQ(eager.graphs, 0);
    EXPECT_GT(graphs.graphs, 0) << "nothing was captured";
    EXPECT_EQ(graphs.losses, eager.losses);
    EXPECT_EQ(graphs.grad_norms, eager.grad_norms);
    EXPECT_EQ(graphs.val_losses, eager.val_losses);
    ASSERT_EQ(graphs.params.size(), eager.params.size());
    EXPECT_EQ(0, std::memcmp(graphs.params.data(), eager.params.data(),
                             eager.params.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace llm
