// Save and load sharded checkpoints (see checkpoint.h).
#include "persistence/checkpoint.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "persistence/meta_schema.h"
#include "persistence/run_directory.h"
#include "persistence/shard_file.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/progress.h"

namespace llm {

namespace fs = std::filesystem;
using nlohmann::json;

CheckpointSave checkpoint_save_begin(const std::string& run_dir, int step, const Config& config,
                                     ShardingEngine& engine, Topology& topology,
                                     const TrainerState& state) {
  LLM_CHECK(step >= 0, "checkpoint_save: step {} is negative", step);
  Group& world = topology.world;
  engine.settle();  // an offloaded optimizer's deferred work, applied on every rank
  CheckpointSave save;
  save.run_dir = run_dir;
  save.step = step;
  save.final_dir = (fs::path(run_dir) / checkpoint_step_name(step)).string();
  save.tmp_dir = (fs::path(run_dir) / fmt::format(".{}.tmp", checkpoint_step_name(step))).string();
  // One replica writes: its ranks together own every element exactly once,
  // each naming its file by its world rank.
  if (topology.checkpoint_writer()) save.shard_name = fmt::format("shard_{:05d}", world.rank());
  save.show_progress = world.rank() == 0;
  if (world.rank() == 0) {
    save.writers = topology.checkpoint_writers();
    save.policy = config.checkpoint;
    const TrainingConfig& t = config.training;
    save.meta = {{"format", kCheckpointFormat},
                 {"step", step},
                 {"world_size", world.size()},
                 {"mode", to_string(topology.plan.mode)},
                 {"shard_group_size", topology.plan.shard_group_size},
                 {"tensor_parallel", topology.tensor->size()},
                 {"pipeline_parallel", topology.pipeline->size()},
                 {"loader", {{"samples_consumed", static_cast<int64_t>(step) * t.batch_size}}},
                 {"rng",
                  {{"seed", t.seed},
                   {"note", "data order and initialization are pure functions of (seed, step)"}}},
                 {"config", config_to_toml(config)},
                 {"tensors", tensor_index(layout_build(config.model))}};
    if (!state.fp8_amax_history.empty()) save.meta["fp8_amax_history"] = state.fp8_amax_history;
    try {
      fs::remove_all(save.tmp_dir);  // the remains of an interrupted save
      fs::create_directories(save.tmp_dir);
    } catch (...) {
      checkpoint_save_discard(save);
      throw;
    }
  }
  world.barrier();
  return save;
}

void checkpoint_save_shard(const CheckpointSave& save, const std::vector<OwnedSlice>& slices,
                           const ParameterLayout& layout) {
  if (save.shard_name.empty()) return;
  const fs::path tmp_dir = save.tmp_dir;
  const size_t writers = save.writers.size();
  json shard =
      write_shard((tmp_dir / (save.shard_name + ".bin")).string(), slices, layout,
                  fmt::format("saving {}{}", checkpoint_step_name(save.step),
                              writers > 1 ? fmt::format(" (rank 0's shard of {})", writers) : ""),
                  save.show_progress);
  write_file_synced((tmp_dir / (save.shard_name + ".json")).string(), shard.dump());
}

void checkpoint_save_commit(const CheckpointSave& save) {
  const fs::path tmp_dir = save.tmp_dir;
  json shards = json::array();
  for (int r : save.writers) {
    fs::path index = tmp_dir / fmt::format("shard_{:05d}.json", r);
    shards.push_back(json::parse(read_file(index.string())));
    fs::remove(index);
  }
  json meta = save.meta;
  meta["shards"] = std::move(shards);
  write_file_synced((tmp_dir / "meta.json").string(), meta.dump(1));
  fsync_directory(tmp_dir.string());
  if (fs::exists(save.final_dir)) fs::remove_all(save.final_dir);
  fs::rename(tmp_dir, save.final_dir);
  fsync_directory(save.run_dir);
  write_file_atomically((fs::path(save.run_dir) / "latest").string(),
                        checkpoint_step_name(save.step) + "\n");
  checkpoint_prune(save.run_dir, save.policy, save.step);
}

void checkpoint_save_discard(const CheckpointSave& save) {
  // A failed save (a full disk, say) leaves nothing behind to trip the next start.
  std::error_code ignored;
  fs::remove_all(save.tmp_dir, ignored);
}

std::string checkpoint_save(const std::string& run_dir, int step, const Config& config,
                            ShardingEngine& engine, Topology& topology, const TrainerState& state) {
  Group& world = topology.world;
  const CheckpointSave save = checkpoint_save_begin(run_dir, step, config, engine, topology, state);
  try {
    checkpoint_save_shard(save, engine.owned_slices(), engine.layout());
    world.barrier();
    if (world.rank() == 0) checkpoint_save_commit(save);
  } catch (...) {
    checkpoint_save_discard(save);
    throw;
  }
  world.barrier();
  return save.final_dir;
}

int checkpoint_load(const std::string& path, ShardingEngine& engine, bool show_progress) {
  json meta = read_meta(path, &engine.layout());
  Progress progress(fmt::format("loading {}", path),
                    engine.load_elements(/*with_moments=*/true) * sizeof(float),
                    transfer_options(show_progress));
  CheckpointReader reader(path, meta, &progress);
  engine.load_state(reader, /*with_moments=*/true);
  return meta.at("step").get<int>();
}

TrainerState checkpoint_read_trainer_state(const std::string& path) {
  const json meta = read_meta(path, nullptr);
  TrainerState state;
  if (meta.contains("fp8_amax_history"))
    state.fp8_amax_history = meta["fp8_amax_history"].get<std::vector<std::vector<float>>>();
  return state;
}

Config checkpoint_read_config(const std::string& path) {
  json meta = read_meta(path, nullptr);
  return config_parse(meta.at("config").get<std::string>(), (fs::path(path) / "meta.json").string(),
                      {});
}

std::vector<float> checkpoint_read_params(const std::string& path, const ParameterLayout& layout) {
  json meta = read_meta(path, &layout);
  Progress progress(fmt::format("reading {}", path), layout.total_numel * sizeof(float),
                    transfer_options(/*enabled=*/true));
  CheckpointReader reader(path, meta, &progress);
  std::vector<float> params(layout.total_numel);
  size_t offset = 0;
  for (size_t u = 0; u < layout.units.size(); ++u) {
    reader.read(static_cast<int>(u), 0, layout.units[u].numel, params.data() + offset, nullptr,
                nullptr);
    offset += layout.units[u].numel;
  }
  return params;
}

}  // namespace llm
