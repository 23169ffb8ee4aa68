// The op profile (op_profile.h): the op list generated from the backend's
// X-macros, one wrapper per field, and the per-op totals.
#include "model/op_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <tuple>
#include <type_traits>

#include "base/error.h"

namespace llm {
namespace {

// The op indices: the typed ops on f32, the same on bf16, then the named
// ops, each list in its X-macro's order.
enum TypedOpIndex : int {
#define LLM_TYPED_OP_INDEX(name) typed_##name,
  LLM_TYPED_OPS(LLM_TYPED_OP_INDEX)
#undef LLM_TYPED_OP_INDEX
      kTypedOpCount
};
enum NamedOpIndex : int {
#define LLM_NAMED_OP_INDEX(name) named_##name,
  LLM_NAMED_OPS(LLM_NAMED_OP_INDEX)
#undef LLM_NAMED_OP_INDEX
      kNamedOpCount
};
constexpr int kBf16Ops = kTypedOpCount;       // first index of the bf16 table
constexpr int kNamedOps = 2 * kTypedOpCount;  // first index of the named ops
constexpr int kOpCount = kNamedOps + kNamedOpCount;

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const char* storage : {"f32", "bf16"}) {
#define LLM_TYPED_OP_NAME(name) list.push_back(fmt::format("{}<{}>", #name, storage));
      LLM_TYPED_OPS(LLM_TYPED_OP_NAME)
#undef LLM_TYPED_OP_NAME
    }
#define LLM_NAMED_OP_NAME(name) list.push_back(#name);
    LLM_NAMED_OPS(LLM_NAMED_OP_NAME)
#undef LLM_NAMED_OP_NAME
    return list;
  }();
  return names;
}

// The profile the profiled backend's ops mark in, and the backend they wrap.
OpProfile* bound_profile = nullptr;
const Backend* bound_inner = nullptr;

// The FLOPs of a call of op `Id`: for the matmuls, whose signatures
// (model/kernels/matmul.h, fp8_matmul.h) end with (int N, int C, int OC)
// (fp8_gemm: (int M, int N, int K)), 2 N C OC per product: matmul_backward
// computes two (dinp and dweight), or one when dinp is null. 0 for every
// other op.
template <int Id, class... Args>
double op_flops([[maybe_unused]] const Args&... args) {
  if constexpr (Id < kNamedOps) {
    constexpr int op = Id % kTypedOpCount;
    if constexpr (op == typed_matmul_forward || op == typed_matmul_forward_residual ||
                  op == typed_matmul_backward || op == typed_fp8_gemm) {
      constexpr size_t n = sizeof...(Args) - 3;
      using Types = std::tuple<Args...>;
      static_assert(std::is_same_v<std::tuple_element_t<n, Types>, int> &&
                        std::is_same_v<std::tuple_element_t<n + 1, Types>, int> &&
                        std::is_same_v<std::tuple_element_t<n + 2, Types>, int>,
                    "a matmul's signature no longer ends with (int N, int C, int OC)");
      const auto a = std::tie(args...);
      const double product =
          2.0 * std::get<n>(a) * static_cast<double>(std::get<n + 1>(a)) * std::get<n + 2>(a);
      if constexpr (op == typed_matmul_backward) return std::get<0>(a) ? 2 * product : product;
      return product;
    }
  }
  return 0.0;
}

// The wrapper of op `Id` of type Fn: the wrapped op, kept in a slot of its
// own, then a mark.
template <int Id, class Fn>
struct ProfiledOp;

template <int Id, class R, class... Args>
struct ProfiledOp<Id, R (*)(Args...)> {
  static inline R (*inner)(Args...) = nullptr;

  static R call(Args... args) {
    OpProfile* profile = bound_profile;
    LLM_CHECK(profile, "op {} called through a profiled backend whose OpProfile is gone",
              op_names()[Id]);
    if constexpr (std::is_void_v<R>) {
      inner(args...);
      profile->mark(Id, op_flops<Id>(args...));
    } else {
      R result = inner(args...);
      profile->mark(Id, op_flops<Id>(args...));
      return result;
    }
  }
};

// The wrapper of `inner` as op `Id` (null stays null: an op a backend lacks).
template <int Id, class Fn>
Fn wrap(Fn inner) {
  if (!inner) return nullptr;
  ProfiledOp<Id, Fn>::inner = inner;
  return &ProfiledOp<Id, Fn>::call;
}

template <int First, class T>
TypedOps<T> profiled_typed_ops(const TypedOps<T>& inner) {
  TypedOps<T> table{};
#define LLM_WRAP_TYPED_OP(name) table.name = wrap<First + typed_##name>(inner.name);
  LLM_TYPED_OPS(LLM_WRAP_TYPED_OP)
#undef LLM_WRAP_TYPED_OP
  return table;
}

double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

OpProfile::OpProfile(Device device)
    : device_(device),
      timeline_(make_timeline(device)),
      calls_(kOpCount, 0),
      seconds_(kOpCount, 0.0),
      flops_(kOpCount, 0.0) {}

OpProfile::~OpProfile() {
  if (bound_profile == this) {
    bound_profile = nullptr;
    bound_inner = nullptr;
  }
}

void OpProfile::begin_step() {
  LLM_CHECK(!in_step_, "op profile: begin_step inside a step");
  // The device first finishes what earlier steps queued (that mark is
  // dropped), so the step's first mark, made after its host start, is
  // reached at once: the marks lie within the step's host time.
  timeline_->mark();
  timeline_->intervals();
  step_start_ = host_seconds();
  timeline_->mark();
  step_ops_.clear();
  in_step_ = true;
}

void OpProfile::end_step() {
  LLM_CHECK(in_step_, "op profile: end_step without begin_step");
  in_step_ = false;
  timeline_->mark();
  timeline_->wait();
  step_seconds_ += host_seconds() - step_start_;
  const std::vector<double> intervals = timeline_->intervals();
  LLM_CHECK(intervals.size() == step_ops_.size() + 1,
            "op profile: {} intervals between the marks of {} ops", intervals.size(),
            step_ops_.size());
  for (size_t i = 0; i < step_ops_.size(); ++i) {
    seconds_[step_ops_[i]] += intervals[i];
    op_seconds_ += intervals[i];
  }
  ++steps_;
}

void OpProfile::mark(int op, double flops) {
  if (!in_step_) return;
  timeline_->mark();
  step_ops_.push_back(op);
  ++calls_[op];
  flops_[op] += flops;
}

std::vector<OpTotal> OpProfile::totals() const {
  std::vector<OpTotal> totals;
  for (int op = 0; op < kOpCount; ++op) {
    if (calls_[op] > 0) totals.push_back({op_names()[op], calls_[op], seconds_[op], flops_[op]});
  }
  std::stable_sort(totals.begin(), totals.end(),
                   [](const OpTotal& a, const OpTotal& b) { return a.seconds > b.seconds; });
  return totals;
}

Backend profiled(const Backend& inner, OpProfile& profile) {
  LLM_CHECK(!bound_profile || (bound_profile == &profile && bound_inner == &inner),
            "op profile: one profiled backend at a time (each op's wrapper has one slot)");
  LLM_CHECK(inner.device == profile.device(),
            "op profile: a {} backend profiled on the {} timeline",
            inner.device == Device::cuda ? "CUDA" : "CPU",
            profile.device() == Device::cuda ? "CUDA" : "CPU");
  bound_profile = &profile;
  bound_inner = &inner;
  Backend backend{};
  backend.device = inner.device;
  backend.memory = inner.memory;
  backend.f32 = profiled_typed_ops<0>(inner.f32);
  backend.bf16 = profiled_typed_ops<kBf16Ops>(inner.bf16);
#define LLM_WRAP_NAMED_OP(name) backend.name = wrap<kNamedOps + named_##name>(inner.name);
  LLM_NAMED_OPS(LLM_WRAP_NAMED_OP)
#undef LLM_WRAP_NAMED_OP
  return backend;
}

}  // namespace llm
