// Typed configuration: one struct per TOML table, each field with a default and
// a one-line doc, listed once in that table's visit_fields(). Parsing, CLI
// overrides (--section.key=value), validation and dumping all walk the same
// lists, so a key exists in exactly one place. A key with fixed choices is an
// enum with one name table: strings are parsed once, here, never compared later.
// Precedence: CLI override > TOML file > imported (the model keys of
// model.init_from's config.json, which must agree with any set above) >
// struct default. Config records which keys the file sets and which were
// imported, so an error names where a value came from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "schema/key_rules.h"
#include "device/device.h"
#include "base/error.h"

namespace llm {

// --- keys with a fixed set of choices ------------------------------------------
// Each such enum has one name table, found by the overload enum_names(E{}).
// Parsing accepts every name in it; the first name of a value is its canonical
// name (to_string, the dumped config), later ones are aliases.
template <class E>
struct EnumName {
  const char* name;
  E value;
};

// Storage type of compute parameters, activations and their gradients (master
// weights, moments, weight-gradient accumulation and statistics stay fp32);
// also the type gradients are reduced in (parallel.reduce_dtype: fp32 or
// bf16). fp8 stores in bf16 too, and runs the block matmuls on FP8 copies
// (docs/training.md#fp8-linear-layers).
enum class Precision { fp32, bf16, fp8 };
inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {"fp32", Precision::fp32}, {"bf16", Precision::bf16}, {"fp8", Precision::fp8}};
constexpr std::span<const EnumName<Precision>> enum_names(Precision) { return kPrecisionNames; }
// Whether compute parameters and activations are bf16 (bf16 and fp8).
constexpr bool stores_bf16(Precision precision) { return precision != Precision::fp32; }

// training.recompute: what a block keeps for its backward.
enum class Recompute { none, selective, full };
inline constexpr EnumName<Recompute> kRecomputeNames[] = {
    {"none", Recompute::none}, {"selective", Recompute::selective}, {"full", Recompute::full}};
constexpr std::span<const EnumName<Recompute>> enum_names(Recompute) { return kRecomputeNames; }

// The order a pipeline stage runs its micro-batches in: 1F1B (one forward,
// one backward in the steady state; at most P micro-batches in flight) or
// GPipe (every forward, then every backward; the simple reference).
enum class PipelineSchedule { one_f_one_b, gpipe };
inline constexpr EnumName<PipelineSchedule> kPipelineScheduleNames[] = {
    {"1f1b", PipelineSchedule::one_f_one_b}, {"gpipe", PipelineSchedule::gpipe}};
constexpr std::span<const EnumName<PipelineSchedule>> enum_names(PipelineSchedule) {
  return kPipelineScheduleNames;
}

// training.lr_schedule: the decay after warmup.
enum class LrSchedule { cosine, linear, constant };
inline constexpr EnumName<LrSchedule> kLrScheduleNames[] = {{"cosine", LrSchedule::cosine},
                                                            {"linear", LrSchedule::linear},
                                                            {"constant", LrSchedule::constant}};
constexpr std::span<const EnumName<LrSchedule>> enum_names(LrSchedule) { return kLrScheduleNames; }

// training.device (Device lives in device/device.h).
inline constexpr EnumName<Device> kDeviceNames[] = {{"cpu", Device::cpu}, {"cuda", Device::cuda}};
constexpr std::span<const EnumName<Device>> enum_names(Device) { return kDeviceNames; }

// training.attention (AttentionKernel lives in device/device.h).
inline constexpr EnumName<AttentionKernel> kAttentionKernelNames[] = {
    {"auto", AttentionKernel::automatic},
    {"cudnn", AttentionKernel::cudnn},
    {"flash", AttentionKernel::flash}};
constexpr std::span<const EnumName<AttentionKernel>> enum_names(AttentionKernel) {
  return kAttentionKernelNames;
}

// parallel.mode: the sharding preset (parallel/topology.h); fsdp is zero3.
enum class ParallelMode { ddp, zero1, zero2, zero3, hybrid };
inline constexpr EnumName<ParallelMode> kParallelModeNames[] = {
    {"ddp", ParallelMode::ddp},     {"zero1", ParallelMode::zero1},
    {"zero2", ParallelMode::zero2}, {"zero3", ParallelMode::zero3},
    {"fsdp", ParallelMode::zero3},  {"hybrid", ParallelMode::hybrid}};
constexpr std::span<const EnumName<ParallelMode>> enum_names(ParallelMode) {
  return kParallelModeNames;
}

// parallel.comm: the collective transport; automatic ("auto") picks by device.
enum class CommBackend { automatic, mpi, nccl };
inline constexpr EnumName<CommBackend> kCommBackendNames[] = {
    {"auto", CommBackend::automatic}, {"mpi", CommBackend::mpi}, {"nccl", CommBackend::nccl}};
constexpr std::span<const EnumName<CommBackend>> enum_names(CommBackend) {
  return kCommBackendNames;
}

// offload.optimizer: where the fp32 masters and AdamW moments live and who
// updates them (the device, or a host worker thread).
enum class OffloadTarget { none, cpu };
inline constexpr EnumName<OffloadTarget> kOffloadTargetNames[] = {{"none", OffloadTarget::none},
                                                                  {"cpu", OffloadTarget::cpu}};
constexpr std::span<const EnumName<OffloadTarget>> enum_names(OffloadTarget) {
  return kOffloadTargetNames;
}

// zenflow.select_strategy: when the important columns are chosen again.
enum class SelectStrategy { automatic, step, epoch };
inline constexpr EnumName<SelectStrategy> kSelectStrategyNames[] = {
    {"auto", SelectStrategy::automatic},
    {"step", SelectStrategy::step},
    {"epoch", SelectStrategy::epoch}};
constexpr std::span<const EnumName<SelectStrategy>> enum_names(SelectStrategy) {
  return kSelectStrategyNames;
}

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  enum_names(e);
};

// The canonical name of `value`.
template <NamedEnum E>
const char* to_string(E value) {
  for (const EnumName<E>& entry : enum_names(E{})) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// "a, b or c": the accepted names, for error messages.
template <NamedEnum E>
std::string enum_choices() {
  std::string choices;
  auto names = enum_names(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) choices += i + 1 == names.size() ? " or " : ", ";
    choices += names[i].name;
  }
  return choices;
}

}  // namespace llm

// Named enums print by name in fmt / spdlog messages, as "{}" or with a
// left-aligned width "{:<N}" (tables). Any other spec is a compile error.
// Not derived from formatter<string_view>: with fmt 9, GCC 12 reports a false
// -Wstringop-overflow in its fill parsing at -O3.
template <class E>
requires llm::NamedEnum<E>
struct fmt::formatter<E> {
  int width = 0;
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == '<') ++it;
    while (it != ctx.end() && *it >= '0' && *it <= '9') width = width * 10 + (*it++ - '0');
    return it;
  }
  auto format(E value, fmt::format_context& ctx) const {
    const std::string_view name = llm::to_string(value);
    auto out = std::copy(name.begin(), name.end(), ctx.out());
    for (int pad = width - static_cast<int>(name.size()); pad > 0; --pad) *out++ = ' ';
    return out;
  }
};

namespace llm {

// `text` as a value of E, else an llm::Error naming `key` and the choices.
template <NamedEnum E>
E parse_enum(std::string_view text, const std::string& key) {
  for (const EnumName<E>& entry : enum_names(E{})) {
    if (text == entry.name) return entry.value;
  }
  LLM_FAIL("{}: expected {}, got '{}'", key, enum_choices<E>(), text);
}

// A count of steps that may also be "auto" (chosen, or adapted, by the
// trainer): a positive integer, or 0 for auto; written "auto" in TOML and
// on the command line.
struct AutoCount {
  int value = 0;
  bool automatic() const { return value == 0; }
  bool operator==(const AutoCount&) const = default;
};

// A switch that may also say where: false (off), true (on, in its default
// place) or a path (on, there); written as such in TOML and on the command
// line (any other text is the path).
struct SwitchOrPath {
  bool on = false;
  std::string path;  // empty: the default place
  bool operator==(const SwitchOrPath&) const = default;
};

struct ModelConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::changes_model;
  int dim = 256;
  int n_layers = 4;
  int n_heads = 4;
  int n_kv_heads = 4;
  int head_dim = 0;  // 0: dim / n_heads (resolved_head_dim)
  int ffn_dim = 768;
  int vocab_size = 512;
  double rope_theta = 10000.0;
  double rope_scaling_factor = 1.0;  // 1: no scaling
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int rope_original_context = 8192;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  bool qk_norm = false;
  bool qkv_bias = false;
  double init_std = 0.02;
  std::string init_from = "";

  // The head dim every shape uses: head_dim, or dim / n_heads when it is 0.
  int resolved_head_dim() const { return head_dim > 0 ? head_dim : dim / n_heads; }

  template <class V>
  void visit_fields(V&& v) {
    v("dim", dim, "hidden size (width of the residual stream)", kPositive);
    v("n_layers", n_layers, "number of transformer blocks", kPositive);
    v("n_heads", n_heads, "query heads per attention layer", kPositive);
    v("n_kv_heads", n_kv_heads, "key/value heads (grouped-query attention); divides n_heads",
      kPositive);
    v("head_dim", head_dim,
      "width of each query, key and value head; 0: dim / n_heads (Qwen3-0.6B, 4B and 32B set "
      "128)",
      at_least(0));
    v("ffn_dim", ffn_dim, "hidden size of the SwiGLU MLP", kPositive);
    v("vocab_size", vocab_size, "vocabulary size; every token id must be below it", at_least(2));
    v("rope_theta", rope_theta, "RoPE base frequency", kPositive);
    v("rope_scaling_factor", rope_scaling_factor,
      "Llama 3.1's RoPE scaling (rope_type llama3): the slowest frequencies are divided by it; "
      "1: off",
      at_least(1));
    v("rope_low_freq_factor", rope_low_freq_factor,
      "with rope_scaling_factor: wavelengths above rope_original_context / this are scaled fully",
      kPositive);
    v("rope_high_freq_factor", rope_high_freq_factor,
      "with rope_scaling_factor: wavelengths below rope_original_context / this are kept; "
      "above rope_low_freq_factor",
      kPositive);
    v("rope_original_context", rope_original_context,
      "with rope_scaling_factor: the context of the unscaled model "
      "(original_max_position_embeddings)",
      kPositive);
    v("norm_eps", norm_eps, "epsilon inside RMSNorm", kUnitOpen);
    v("tie_embeddings", tie_embeddings, "share the token embedding with the LM head");
    v("qk_norm", qk_norm, "RMSNorm of each query and key head before RoPE (Qwen3, OLMo-2)");
    v("qkv_bias", qkv_bias, "a bias on the query, key and value projections (Qwen2, Qwen2.5)");
    v("init_std", init_std, "std of the normal init of weight matrices", kPositive);
    v("init_from", init_from,
      "start from Hugging Face Llama, Qwen2 or Qwen3 weights: their directory, config.json, "
      ".safetensors file or model.safetensors.index.json; its config.json gives every model key "
      "left unset, and one set must agree",
      OnResume::same_trajectory);
  }
};

// training.loss_chunk_tokens = 0: the LM head's logits at once take at most this.
inline constexpr size_t kAutoLossChunkBytes = size_t{256} << 20;

struct TrainingConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::changes_trajectory;
  int steps = 100;
  int stop_at_step = 0;
  int batch_size = 8;
  int micro_batch_size = 8;
  int seq_len = 64;
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  int warmup_steps = 10;
  LrSchedule lr_schedule = LrSchedule::cosine;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;
  double spike_loss_factor = 0.0;
  double spike_grad_norm_factor = 0.0;
  int spike_window = 50;
  int64_t seed = 1337;
  int eval_interval = 50;
  int eval_sequences = 32;
  int sample_tokens = 0;
  Recompute recompute = Recompute::none;
  int recompute_every = 1;
  int loss_chunk_tokens = 0;
  Precision precision = Precision::fp32;
  bool fp8_fast_accum = false;
  Device device = Device::cpu;
  AttentionKernel attention = AttentionKernel::automatic;
  bool gemm_autotune = false;
  bool deterministic = true;
  bool cuda_graphs = false;

  template <class V>
  void visit_fields(V&& v) {
    v("device", device, "cpu | cuda (one GPU per rank, by node-local rank)",
      OnResume::same_trajectory);
    v("attention", attention,
      "GPU attention for bf16: auto (cudnn when built with it) | cudnn (cuDNN fused attention) | "
      "flash (the hand-written kernel); ignored on cpu");
    v("gemm_autotune", gemm_autotune,
      "GPU: time cuBLASLt's top algorithms per GEMM shape and keep the fastest (faster; the bits "
      "may then differ between runs); off: the heuristic's first, the same bits every run");
    v("deterministic", deterministic,
      "GPU: the same bits every run (cuDNN's deterministic attention backward); false: its "
      "fastest backward, which sums with atomics (the bits may differ between runs)");
    v("cuda_graphs", cuda_graphs,
      "GPU: replay the step's kernels between unit boundaries as CUDA graphs, captured on the "
      "second step (fewer launches, the same bits); needs tensor_parallel = 1",
      OnResume::same_trajectory);
    v("steps", steps, "optimizer steps of the whole run (sets the LR schedule)", kNonNegative);
    v("stop_at_step", stop_at_step,
      "stop (and save) after this step, e.g. at a job's time limit (0 = steps)",
      {kNonNegative, OnResume::same_trajectory});
    v("batch_size", batch_size, "global batch in sequences per optimizer step (all ranks together)",
      kPositive);
    v("micro_batch_size", micro_batch_size, "sequences per rank per forward pass",
      {kPositive, OnResume::same_trajectory});
    v("seq_len", seq_len, "tokens per sequence", kPositive);
    v("lr", lr, "peak learning rate", kPositive);
    v("min_lr_ratio", min_lr_ratio, "final learning rate as a fraction of lr", kUnitClosed);
    v("warmup_steps", warmup_steps, "linear warmup steps", kNonNegative);
    v("lr_schedule", lr_schedule, "decay after warmup: cosine | linear | constant");
    v("weight_decay", weight_decay, "AdamW decoupled weight decay (matrices only, not norms)",
      kNonNegative);
    v("beta1", beta1, "AdamW beta1", kUnitHalfOpen);
    v("beta2", beta2, "AdamW beta2", kUnitHalfOpen);
    v("adam_eps", adam_eps, "AdamW epsilon", kPositive);
    v("grad_clip", grad_clip, "clip the global gradient norm to this (0 = off)", kNonNegative);
    v("spike_loss_factor", spike_loss_factor,
      "skip the update of a step whose loss exceeds this multiple of the running median (0 = off)",
      kNonNegative);
    v("spike_grad_norm_factor", spike_grad_norm_factor,
      "skip the update of a step whose gradient norm exceeds this multiple of its running median "
      "(0 = off)",
      kNonNegative);
    v("spike_window", spike_window, "accepted steps in the spike guard's running medians (>= 10)",
      at_least(10));
    v("seed", seed, "seed of initialization and data order");
    v("eval_interval", eval_interval, "steps between validation passes (0 = only at the end)",
      {kNonNegative, OnResume::same_trajectory});
    v("eval_sequences", eval_sequences,
      "validation sequences, the first ones of data.val in file order",
      {kNonNegative, OnResume::same_trajectory});
    v("sample_tokens", sample_tokens, "tokens of text to generate after training (0 = none)",
      {kNonNegative, OnResume::same_trajectory});
    v("recompute", recompute,
      "none | full (keep block inputs, recompute the rest) | selective (keep matmul outputs)",
      OnResume::same_trajectory);
    v("recompute_every", recompute_every, "recompute blocks 0, k, 2k, ... (1 = every block)",
      {at_least(1), OnResume::same_trajectory});
    v("loss_chunk_tokens", loss_chunk_tokens,
      "tokens whose LM-head logits exist at once: the head, the loss and its gradient run a chunk "
      "of a micro-batch's tokens at a time (0 = as many as fit in 256 MiB of logits)",
      kNonNegative);
    v("precision", precision,
      "fp32 | bf16 (bf16 compute and activations, fp32 master weights) | fp8 (bf16, with the "
      "block matmuls on FP8 copies: e4m3 weights and activations, e5m2 gradients)");
    v("fp8_fast_accum", fp8_fast_accum,
      "precision fp8 on a GPU: the forward's FP8 GEMMs sum in the tensor cores' fast, narrower "
      "accumulator, as Transformer Engine does; the backward's always promote to fp32 (the CPU "
      "sums in fp32 either way)");
  }
};

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

struct Config {
  std::string name;  // the config file's stem, e.g. "tiny"
  std::string path;  // the file it was read from
  // The command-line overrides applied over the file ("section.key=value"),
  // so that errors blame the command line for the keys they set.
  std::vector<std::string> overrides;
  // The keys the file sets ("table.key"): a value there, not a default.
  std::set<std::string> file_keys;
  // Keys the user left out that took their value from elsewhere
  // (config_import_model: model.init_from's config.json): "table.key" -> where.
  std::map<std::string, std::string> imported;
  ModelConfig model;
  TrainingConfig training;
  DataConfig data;
  ParallelConfig parallel;
  OffloadConfig offload;
  ZenFlowConfig zenflow;
  CheckpointConfig checkpoint;
  LoggingConfig logging;

  template <class V>
  void visit_tables(V&& v) {
    v("model", model);
    v("training", training);
    v("data", data);
    v("parallel", parallel);
    v("offload", offload);
    v("zenflow", zenflow);
    v("checkpoint", checkpoint);
    v("logging", logging);
  }
  // The same walk over a const config: every table passed as const.
  template <class V>
  void visit_tables(V&& v) const {
    const_cast<Config*>(this)->visit_tables(
        [&](const char* table_name, auto& table) { v(table_name, std::as_const(table)); });
  }

  // The run directory: checkpoint.dir, else checkpoints/<name>.
  std::string run_dir() const;
  Precision precision() const { return training.precision; }
  Device device() const { return training.device; }
  // parallel.comm with auto resolved: nccl on cuda, mpi on cpu.
  CommBackend comm() const;
  // The optimizer's state on the host: offload.optimizer = cpu, or ZenFlow.
  bool offloads_optimizer() const {
    return offload.optimizer == OffloadTarget::cpu || zenflow.enabled;
  }
};

// What fills keys from elsewhere once the file and the command line are read,
// before validation: ./train passes hf_import_architecture (interop/), which
// takes the architecture from model.init_from's config.json.
using ConfigImport = void (*)(Config&);

// Finds the file (as given, else in configs/, adding .toml if missing), parses
// it, applies overrides of the form "section.key=value", runs `import` (when
// given) and validates. Errors name the file and the key.
Config config_load(const std::string& path_or_name, const std::vector<std::string>& overrides,
                   ConfigImport import = nullptr);

// Applies further "section.key=value" assignments to a loaded config, as if
// they followed the command line's (appended to config.overrides, so errors
// and the dump name them); the caller validates. The planner derives each
// row's config this way from the flags it prints.
void config_apply_overrides(Config& config, const std::vector<std::string>& overrides);

// Config from TOML text (for tests, and a checkpoint's saved config); `origin`
// names it in errors.
Config config_parse(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides, ConfigImport import = nullptr);

// Where the user set `key` ("table.key"): the command-line override that set
// it last ("command line --model.dim=64"), else the file when it sets it;
// nullopt for a key at its default or imported.
std::optional<std::string> config_user_origin(const Config& config, std::string_view key);

// Model key `key` ("dim", ...) of `model` as the dumped config writes it.
std::string config_model_value(const ModelConfig& model, std::string_view key);

// Takes the model keys `keys` ("dim", ...) from `source`, read from `origin`
// (a checkpoint's config.json): a key the user did not set gets source's
// value and `origin` as where it came from (errors, the log); a key the user
// set must hold source's value, else a one-line error naming both values and
// where each came from.
void config_import_model(Config& config, const ModelConfig& source,
                         std::span<const std::string_view> keys, const std::string& origin);

// Every key as a Markdown table: name, type, default and its one-line doc,
// from the same declarations the parser uses (`./train config`; docs/configuration.md's
// key table is this text).
std::string config_reference();

// The resolved configuration as TOML text (logged, saved with checkpoints).
std::string config_to_toml(const Config& config);

// What changing `key` ("table.key") does to a resumed run, from the key's
// rule or its table's; nullopt for a key this build does not know.
std::optional<OnResume> config_key_on_resume(std::string_view key);

// The current name of a key ("table.key") that an earlier version called
// `key` (training.activation_checkpointing is training.recompute: a
// "checkpoint" is saved state only); nullopt for any other key. A resume
// reads a saved config through it; a config or command line using an old
// name is refused with the new one (unknown_key_hint).
std::optional<std::string> renamed_key(std::string_view key);

// What follows "unknown key 'name'" in an error: the new name of a renamed
// key, else the closest of `known` ("table.key" each).
std::string unknown_key_hint(const std::string& name, const std::vector<std::string>& known);

}  // namespace llm
