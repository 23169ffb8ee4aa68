// A run directory's checkpoints: step_<N>/ directories (only those names;
// any other entry is left alone), the `latest` file naming the newest
// complete one, the temporaries an interrupted save leaves, and pruning by
// checkpoint.keep_last / keep_every.
#pragma once

#include <string>
#include <vector>

#include "schema/config.h"

namespace llm {

// "step_<N>".
std::string checkpoint_step_name(int step);

// The step of a directory named step_<N> (N decimal, no sign), else -1.
int checkpoint_step_of(const std::string& directory_name);

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

// Removes what interrupted saves left in run_dir (.step_<N>.tmp/ and
// latest.tmp); returns the removed names. Call only while holding the run lock.
std::vector<std::string> checkpoint_remove_stale_temporaries(const std::string& run_dir);

// Removes the checkpoints of run_dir that `policy` does not keep; `newest`
// is always kept.
void checkpoint_prune(const std::string& run_dir, const CheckpointConfig& policy, int newest);

}  // namespace llm
