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
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"

namespace llm {

// Collective over the world. Saves the state after `step` optimizer steps,
// then prunes old checkpoints per checkpoint.keep_last / keep_every.
// Returns the checkpoint's directory. A slow save shows rank 0's shard
// being written on its terminal.
std::string checkpoint_save(const std::string& run_dir, int step, Config& config,
                            ShardingEngine& engine, Topology& topology);

// The newest complete checkpoint of run_dir ("" when there is none).
std::string checkpoint_latest(const std::string& run_dir);

// The step directory `path` names: itself (it holds meta.json), or the
// `latest` of a run directory; refused, naming `command` and the path, when
// it is neither.
std::string checkpoint_step_directory(const std::string& path, const std::string& command);

// The tokenizer of the run that saved checkpoint `step_dir` (config `run`):
// the copy in its run directory (data/tokenizer.h's run_tokenizer_dir),
// else, for a run older than those copies, its data.tokenizer where that
// path still leads. Errors name `command`, the checkpoint and the path.
std::string checkpoint_tokenizer(const std::string& step_dir, const Config& run,
                                 const std::string& command);

// Collective over the world. Loads parameters and moments from `path` into
// `engine` (any saved world size or mode) after checking its index against
// the engine's layout; returns the saved step. Errors name the file. With
// `show_progress` (rank 0), a slow load shows its bytes on the terminal.
int checkpoint_load(const std::string& path, ShardingEngine& engine, bool show_progress);

// The resolved config a checkpoint was saved with (its model shape).
Config checkpoint_read_config(const std::string& path);

// Where the resolved config a checkpoint was saved with differs from
// `current`, each entry "table.key: <saved> -> <current>" (TOML values).
struct ConfigChanges {
  std::vector<std::string> model;     // [model] except init_from: a different model
  std::vector<std::string> schedule;  // [data] and the [training] keys that shape the trajectory
};
ConfigChanges checkpoint_config_changes(const std::string& path, Config& current);

// Removes what interrupted saves left in run_dir (.step_<N>.tmp/ and
// latest.tmp); returns the removed names. Call only while holding the run lock.
std::vector<std::string> checkpoint_remove_stale_temporaries(const std::string& run_dir);

// The step of a directory named step_<N> (N decimal, no sign), else -1.
int checkpoint_step_of(const std::string& directory_name);

// Every unit's parameters, concatenated in unit order, read in one process
// without an engine (for export); verifies checksums like checkpoint_load,
// and shows a slow read on the terminal.
std::vector<float> checkpoint_read_params(const std::string& path, const ParameterLayout& layout);

}  // namespace llm
