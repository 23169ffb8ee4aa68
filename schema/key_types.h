// The value types of config keys beyond numbers, bools and strings: enums
// with one name table each (parsed once, here, never compared as strings
// later), counts that may be "auto", switches that may say where.
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

#include "base/error.h"
#include "device/device.h"

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
// training.fp8_scaling: where an FP8 forward input's scale comes from: its
// own amax (current) or the amax history of earlier steps (delayed;
// docs/training.md#fp8-linear-layers).
enum class Fp8Scaling { current, delayed };
inline constexpr EnumName<Fp8Scaling> kFp8ScalingNames[] = {{"current", Fp8Scaling::current},
                                                            {"delayed", Fp8Scaling::delayed}};
constexpr std::span<const EnumName<Fp8Scaling>> enum_names(Fp8Scaling) { return kFp8ScalingNames; }
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

}  // namespace llm
