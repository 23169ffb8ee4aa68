// Sharded checkpoints: <run dir>/step_<N>/ holds meta.json (resolved config,
// step, world size, mode, data position, a global index of every tensor and
// of every saved record) and one shard file per writing rank with its owned
// slices of fp32 parameters and AdamW moments, each record checksummed.
// Invariants:
//  - Atomic: everything is written into <run dir>/.step_<N>.tmp/, fsynced, and
//    renamed to step_<N>/ only after every rank finished; `latest` (a file
//    naming the directory) is replaced atomically afterwards. An interrupted
//    save leaves only a .tmp directory, never chosen; a save that fails with
//    an error removes what it wrote, and checkpoint_remove_stale_temporaries
//    clears what a killed one left.
//  - Only directories named step_<N> (N a decimal step) are checkpoints; any
//    other entry of the run directory is left alone.
//  - meta.json is validated against its schema before anything is read from
//    it: every error names the file and the field.
//  - No rank ever holds the whole model: one replica's ranks each write their
//    own slices (ddp: rank 0 alone).
//  - The index is global (unit, element offset), so any world size and mode
//    can load any checkpoint, each rank reading only the records it needs.
// The parts: the shard files (shard_file.h), meta.json (meta_schema.h), the
// run directory (run_directory.h), the config diff on resume
// (config_diff.h) and saves written beside training (background_save.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schema/config.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"

namespace llm {

// The trainer's state beside the tensors, in meta.json (every rank holds the
// same; world rank 0's is written).
struct TrainerState {
  // FP8 delayed scaling's amax history (trainer/fp8_amax_history.h), oldest
  // step first; empty: none.
  std::vector<std::vector<float>> fp8_amax_history;
};

// Collective over the world. Saves the state after `step` optimizer steps,
// then prunes old checkpoints per checkpoint.keep_last / keep_every.
// Returns the checkpoint's directory. A slow save shows rank 0's shard
// being written on its terminal.
std::string checkpoint_save(const std::string& run_dir, int step, const Config& config,
                            ShardingEngine& engine, Topology& topology,
                            const TrainerState& state = {});

// One save, split into the phases a background save runs on different
// threads: checkpoint_save_begin (collective, on the step loop), then
// checkpoint_save_shard on every writer, then, once every writer finished,
// checkpoint_save_commit on world rank 0. checkpoint_save runs them in a row.
struct CheckpointSave {
  std::string run_dir;
  int step = 0;
  std::string tmp_dir, final_dir;
  std::string shard_name;  // "shard_<world rank>"; empty on ranks that write none
  bool show_progress = false;
  // World rank 0 only: meta.json without its "shards", the ranks whose
  // shards it lists, and the pruning policy.
  nlohmann::json meta;
  std::vector<int> writers;
  CheckpointConfig policy;
};

// Collective over the world: settles the engine's deferred work, creates the
// temporary directory of the state after `step` steps, and returns the save.
CheckpointSave checkpoint_save_begin(const std::string& run_dir, int step, const Config& config,
                                     ShardingEngine& engine, Topology& topology,
                                     const TrainerState& state = {});
// Local: writes this rank's shard of `slices` (a writer's; nothing on other
// ranks) and its index, synced, into the temporary directory.
void checkpoint_save_shard(const CheckpointSave& save, const std::vector<OwnedSlice>& slices,
                           const ParameterLayout& layout);
// Local, world rank 0, after every writer's checkpoint_save_shard: writes
// meta.json, renames the directory to step_<N>, moves `latest` to it and
// prunes. Touches nothing the step loop uses, so it may run on another thread.
void checkpoint_save_commit(const CheckpointSave& save);
// Removes what a failed save wrote (its temporary directory).
void checkpoint_save_discard(const CheckpointSave& save);

// Collective over the world. Loads parameters and moments from `path` into
// `engine` (any saved world size or mode) after checking its index against
// the engine's layout; returns the saved step. Errors name the file. With
// `show_progress` (rank 0), a slow load shows its bytes on the terminal.
int checkpoint_load(const std::string& path, ShardingEngine& engine, bool show_progress);

// The trainer state checkpoint `path` holds (validated; empty parts absent).
TrainerState checkpoint_read_trainer_state(const std::string& path);

// The resolved config a checkpoint was saved with (its model shape).
Config checkpoint_read_config(const std::string& path);

// Every unit's parameters, concatenated in unit order, read in one process
// without an engine (for export); verifies checksums like checkpoint_load,
// and shows a slow read on the terminal.
std::vector<float> checkpoint_read_params(const std::string& path, const ParameterLayout& layout);

}  // namespace llm
