// The tables beside [model] and [training]: [data], [parallel], [offload],
// [zenflow], [checkpoint], [logging] (config.h's precedence and rules apply).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "schema/key_rules.h"
#include "schema/key_types.h"

namespace llm {

// data.reset_positions: whether RoPE positions restart at each document of a
// packed sequence; auto follows data.document_masking.
enum class ResetPositions { automatic, on, off };
inline constexpr EnumName<ResetPositions> kResetPositionsNames[] = {
    {"auto", ResetPositions::automatic},
    {"true", ResetPositions::on},
    {"false", ResetPositions::off}};
constexpr std::span<const EnumName<ResetPositions>> enum_names(ResetPositions) {
  return kResetPositionsNames;
}

struct DataConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::changes_trajectory;
  std::string train = "";
  std::string val = "";
  std::string tokenizer = "";
  bool document_masking = false;
  ResetPositions reset_positions = ResetPositions::automatic;

  // Whether RoPE positions restart at each document start.
  bool resets_positions() const {
    return reset_positions == ResetPositions::automatic ? document_masking
                                                        : reset_positions == ResetPositions::on;
  }

  template <class V>
  void visit_fields(V&& v) {
    v("train", train, "training shards: a path or glob of llm.c .bin files");
    v("val", val, "validation shards: a path or glob (empty = no validation)");
    v("tokenizer", tokenizer,
      "the tokenizer prepare used, any kind it takes (optional): samples, document masking, "
      "export");
    v("document_masking", document_masking,
      "attention stays inside each document of a packed sequence (documents start at the "
      "tokenizer's BOS, or after its EOS where it has none; needs data.tokenizer), and no "
      "target crosses a boundary");
    v("reset_positions", reset_positions,
      "RoPE positions restart at each document start: auto (= document_masking) | true | false");
  }
};

struct ParallelConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::same_trajectory;
  ParallelMode mode = ParallelMode::ddp;
  int shard_group_size = 0;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  PipelineSchedule pipeline_schedule = PipelineSchedule::one_f_one_b;

  Precision reduce_dtype = Precision::fp32;
  CommBackend comm = CommBackend::automatic;
  std::string timeout = "10min";
  int flight_recorder_entries = 2000;
  std::string memory_per_rank = "";

  template <class V>
  void visit_fields(V&& v) {
    v("mode", mode, "ddp | zero1 | zero2 | zero3 (alias fsdp) | hybrid");
    v("comm", comm,
      "auto | mpi | nccl: nccl needs training.device = cuda; mpi on a GPU stages buffers through "
      "host memory (several ranks may then share one GPU); auto = nccl on cuda, mpi on cpu");
    v("reduce_dtype", reduce_dtype, "fp32 | bf16: the type gradients are reduced in",
      OnResume::changes_trajectory);
    v("shard_group_size", shard_group_size, "ranks per shard group for hybrid (0 = mode default)",
      kNonNegative);
    v("tensor_parallel", tensor_parallel,
      "T: ranks each layer is split across (Megatron-style, with sequence parallelism); "
      "consecutive ranks; the data-parallel mode applies over world / T",
      at_least(1));
    v("pipeline_parallel", pipeline_parallel,
      "P: pipeline stages, each a run of consecutive blocks (the embedding on the first, the LM "
      "head on the last); the data-parallel mode applies over world / (T x P)");
    v("pipeline_schedule", pipeline_schedule,
      "1f1b | gpipe: the order a stage runs its micro-batches in (same results; 1f1b holds at "
      "most P micro-batches' activations, gpipe all of them)");
    v("timeout", timeout,
      "a collective or message not done within this (e.g. 90s, 10min, 1h) ends the job with "
      "exit status 75, naming the ranks that never reached it (docs/failure.md)");
    v("flight_recorder_entries", flight_recorder_entries,
      "the last N collectives and messages each rank records, written as JSON under the run "
      "directory when the job fails (docs/failure.md)",
      at_least(1));
    v("memory_per_rank", memory_per_rank,
      "memory one rank may use (e.g. 70GiB: its GPU's, or on cpu its share of the host's); '' = "
      "only what a rank finds free at start. A world whose plan needs more is refused, at the "
      "launch and by `./train supervise` before a relaunch on fewer hosts (docs/failure.md)");
  }
};

// ZeRO-Offload: the optimizer's state on the host (docs/offload.md).
struct OffloadConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::same_trajectory;
  OffloadTarget optimizer = OffloadTarget::none;
  bool delayed_update = false;

  template <class V>
  void visit_fields(V&& v) {
    v("optimizer", optimizer,
      "none | cpu: fp32 master weights and AdamW moments of this rank's shard live in host memory "
      "and a host worker thread updates them");
    v("delayed_update", delayed_update,
      "cpu offload: step N's host update runs during step N+1's forward and backward, which "
      "therefore sees the parameters of step N-1 (one-step-stale, as DeepSpeed's)",
      OnResume::changes_trajectory);
  }
};

// ZenFlow: the important columns updated on the device every step, the rest
// accumulated on the host and applied every update_interval steps.
// update_interval = "auto" starts here (DeepSpeed's default) and adapts.
inline constexpr int kZenFlowAutoUpdateIntervalStart = 4;
struct ZenFlowConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::changes_trajectory;
  bool enabled = false;
  double topk_ratio = 0.05;
  SelectStrategy select_strategy = SelectStrategy::automatic;
  AutoCount select_interval{};
  AutoCount update_interval{kZenFlowAutoUpdateIntervalStart};
  int full_warm_up_rounds = 0;
  bool overlap_step = true;

  template <class V>
  void visit_fields(V&& v) {
    v("enabled", enabled, "ZenFlow (implies offload.optimizer = cpu)");
    v("topk_ratio", topk_ratio,
      "fraction of each weight matrix's columns, by gradient norm, updated on the device every "
      "step",
      Range{0, 1, true, false});
    v("select_strategy", select_strategy,
      "auto (= step) | step (select every select_interval steps) | epoch (at each epoch's start)");
    v("select_interval", select_interval,
      "steps between selections, a multiple of update_interval, or auto (= update_interval)");
    v("update_interval", update_interval,
      "steps between host updates of the other columns, or auto (adapted so the host update "
      "hides behind the device's steps)");
    v("full_warm_up_rounds", full_warm_up_rounds,
      "first steps that update every element (plain offloaded AdamW)", kNonNegative);
    v("overlap_step", overlap_step,
      "the host update runs during the next step's forward and backward (its result is seen one "
      "step later)");
  }
};

struct CheckpointConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::same_trajectory;
  std::string dir = "";
  int interval = 0;
  bool save_final = true;
  bool async = true;
  int keep_last = 3;
  int keep_every = 0;
  std::string resume = "auto";

  template <class V>
  void visit_fields(V&& v) {
    v("dir", dir, "run directory (default checkpoints/<config name>)");
    v("interval", interval, "save every this many steps (0 = no periodic saves)", kNonNegative);
    v("save_final", save_final, "save after the last step (and on SIGTERM / SIGINT)");
    v("async", async,
      "copy the state to host memory at the step boundary and write it in a background thread "
      "while training goes on (docs/checkpoints.md); saved blocking when the copy would not fit "
      "in free host memory");
    v("keep_last", keep_last, "keep the newest this many checkpoints (0 = keep all)", kNonNegative);
    v("keep_every", keep_every,
      "also keep forever every checkpoint whose step is a multiple of this", kNonNegative);
    v("resume", resume, "auto (continue from <run dir>/latest if present) | none | a step_N path");
  }
};

struct LoggingConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::same_trajectory;
  int log_interval = 1;
  bool metrics = true;
  SwitchOrPath tensorboard;
  double peak_tflops = 0;

  template <class V>
  void visit_fields(V&& v) {
    v("log_interval", log_interval,
      "steps between log lines; each shows the interval's mean loss and throughput", kPositive);
    v("peak_tflops", peak_tflops,
      "one rank's peak TFLOP/s, for the log's MFU (0 = on the CPU this machine's measured sgemm "
      "rate per rank, on a GPU no MFU; H100 SXM dense bf16: 989)",
      kNonNegative);
    v("metrics", metrics, "append per-step metrics to <run dir>/metrics.jsonl");
    v("tensorboard", tensorboard,
      "also write the metrics records as TensorBoard event files: true (in <run dir>/tensorboard) "
      "or a directory");
  }
};

}  // namespace llm
