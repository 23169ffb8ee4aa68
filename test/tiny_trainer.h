// The tiny config as the single-process trainer tests run it (no metrics
// file, no resume, its own checkpoint folder) and its losses step by step.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "trainer/trainer.h"

namespace llm::tiny_trainer {

inline Config tiny(std::vector<std::string> overrides = {}) {
  overrides.push_back("checkpoint.dir=" +
                      (std::filesystem::temp_directory_path() / "llm_test_trainer").string());
  overrides.push_back("logging.metrics=false");
  overrides.push_back("checkpoint.resume=none");
  return config_load("configs/tiny.toml", overrides);
}

inline std::vector<float> losses_of(Trainer& trainer, int steps) {
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(trainer.train_step(s).loss);
  return losses;
}

}  // namespace llm::tiny_trainer
