// cuDNN's fused flash attention (the cudnn-frontend graph API) behind the
// contract of the hand-written kernel (model/kernels/attention.h), on the
// same buffers and without copies: q, k and v are strided views into the
// fused qkv rows ((B, heads, T, D) with row stride (H + 2 KV) D), out and
// dout views of (B, T, H, D), and dq, dk, dv the matching views of dqkv.
// lse is cuDNN's softmax statistics tensor (B, H, T, 1): the natural-log
// log-sum-exp of the scaled scores, which is exactly what the flash kernel
// writes, so either kernel's forward can feed the other's backward.
// A graph is built once per shape (heuristics mode A; the backward with
// cuDNN's deterministic algorithm unless training.deterministic = false) and
// cached for the process. A shape cuDNN
// refuses, or pointers off 16-byte alignment, run the flash kernel instead,
// with one warning per shape giving cuDNN's reason.
// Invariants: every call is queued on the compute stream (cudnnSetStream) and
// never waits for it; the workspace is a grow-only scratch ordered on that
// stream; causal, scale 1/sqrt(D) as the CPU twin computes it; query head h
// reads kv head h / (H / KV) (cuDNN's grouped-query convention); one process
// drives one device from one thread, so the cache needs no lock.
#include "model/cudnn/attention_cudnn.h"

#include <cudnn_frontend.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "device/cuda_runtime.cuh"
#include "base/error.h"
#include "model/kernels/attention.h"

namespace llm::cudnn {

namespace fe = cudnn_frontend;

namespace {

// Fixed tensor uids: a call's variant pack names its pointers by these.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Shape {
  int B, T, H, KV, D;
  bool backward;
  bool deterministic;  // the backward's algorithm (cuda::deterministic())
  auto operator<=>(const Shape&) const = default;
};

// A built graph and its workspace bytes; graph is null where cuDNN refused.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
};

size_t fallback_calls = 0;

void check(cudnnStatus_t status, const char* call) {
  LLM_CHECK(status == CUDNN_STATUS_SUCCESS, "{} failed: {}", call, cudnnGetErrorString(status));
}

cudnnHandle_t handle() {
  static const cudnnHandle_t handle = [] {
    cudnnHandle_t created;
    check(cudnnCreate(&created), "cudnnCreate");
    check(cudnnSetStream(created, cuda::compute_stream()), "cudnnSetStream");
    return created;
  }();
  return handle;
}

std::string describe(const Shape& s) {
  return fmt::format("{}{} B={} T={} H={} KV={} D={}", s.backward ? "backward" : "forward",
                     s.backward && !s.deterministic ? " (non-deterministic)" : "", s.B, s.T, s.H,
                     s.KV, s.D);
}

// The graph of one shape: forward (q, k, v -> out, stats) or backward
// (q, k, v, out, dout, stats -> dq, dk, dv). Null, with cuDNN's reason in
// `why_not`, if cuDNN cannot run it.
std::shared_ptr<fe::graph::Graph> build_graph(const Shape& s, std::string& why_not) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t B = s.B, T = s.T, H = s.H, D = s.D;
  const int64_t qkv_row = (s.H + 2 * s.KV) * D, out_row = H * D;
  // (B, heads, T, D) over token rows of `row` elements.
  auto head_view = [&](fe::graph::Tensor_attributes & t, int64_t heads, int64_t row) -> auto& {
    return t.set_dim({B, heads, T, D}).set_stride({T * row, D, row, 1});
  };
  auto input = [&](const char* name, Uid uid, int64_t heads, int64_t row) {
    fe::graph::Tensor_attributes t;
    t.set_name(name).set_uid(uid);
    return graph->tensor(head_view(t, heads, row));
  };
  auto stats_view = [&](fe::graph::Tensor_attributes & t) -> auto& {
    return t.set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({B, H, T, 1})
        .set_stride({H * T, T, 1, 1});
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  auto q = input("q", kQ, H, qkv_row), k = input("k", kK, s.KV, qkv_row),
       v = input("v", kV, s.KV, qkv_row);
  if (!s.backward) {
    auto [o, stats] = graph->sdpa(q, k, v,
                                  fe::graph::SDPA_attributes()
                                      .set_name("attention")
                                      .set_generate_stats(true)
                                      .set_causal_mask(true)
                                      .set_attn_scale(scale));
    head_view(o->set_output(true).set_uid(kO), H, out_row);
    stats_view(stats->set_output(true));
  } else {
    auto o = input("out", kO, H, out_row), dout = input("dout", kDO, H, out_row);
    fe::graph::Tensor_attributes stats_attributes;
    auto stats = graph->tensor(stats_view(stats_attributes.set_name("lse")));
    auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dout, stats,
                                             fe::graph::SDPA_backward_attributes()
                                                 .set_name("attention_backward")
                                                 .set_causal_mask(true)
                                                 .set_attn_scale(scale)
                                                 .set_deterministic_algorithm(s.deterministic));
    head_view(dq->set_output(true).set_uid(kDQ), H, qkv_row);
    head_view(dk->set_output(true).set_uid(kDK), s.KV, qkv_row);
    head_view(dv->set_output(true).set_uid(kDV), s.KV, qkv_row);
  }
  fe::error_t status = graph->build(handle(), {fe::HeurMode_t::A});
  if (!status.is_good()) {
    why_not = status.get_message();
    return nullptr;
  }
  return graph;
}

// Every shape's plan, built (or refused) on its first use. Never destroyed:
// at exit, freeing cuDNN objects could race the teardown of the CUDA context
// and of cuDNN itself; process exit reclaims them.
std::map<Shape, Plan>& plans() {
  static auto& built = *new std::map<Shape, Plan>;
  return built;
}

// The cached plan of a shape, built (or refused, with a warning) on first use.
const Plan& plan_for(const Shape& s) {
  std::map<Shape, Plan>& built = plans();
  auto found = built.find(s);
  if (found != built.end()) return found->second;
  Plan plan;
  std::string why_not;
  plan.graph = build_graph(s, why_not);
  if (plan.graph) {
    fe::error_t status = plan.graph->get_workspace_size(plan.workspace_bytes);
    LLM_CHECK(status.is_good(), "cuDNN attention ({}): workspace size: {}", describe(s),
              status.get_message());
  } else {
    spdlog::warn("cuDNN attention refused {} ({}): running the flash kernel for this shape",
                 describe(s), why_not);
  }
  return built.emplace(s, std::move(plan)).first->second;
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Runs `plan` with the pointers of `pack` (uid -> device pointer).
void execute(const Shape& s, const Plan& plan, std::unordered_map<int64_t, void*>& pack) {
  static cuda::GrowingScratch workspace;
  void* scratch = plan.workspace_bytes > 0 ? workspace.reserve(plan.workspace_bytes) : nullptr;
  fe::error_t status = plan.graph->execute(handle(), pack, scratch);
  LLM_CHECK(status.is_good(), "cuDNN attention ({}) failed: {}", describe(s), status.get_message());
}

// The plan to run, or null (counted as a fallback) where cuDNN cannot.
const Plan* usable_plan(const Shape& s, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (aligned(p)) continue;
    static bool warned = false;
    if (!warned)
      spdlog::warn("cuDNN attention: a buffer is not 16-byte aligned; running the flash kernel");
    warned = true;
    ++fallback_calls;
    return nullptr;
  }
  const Plan& plan = plan_for(s);
  if (!plan.graph) ++fallback_calls;
  return plan.graph ? &plan : nullptr;
}

// Document masks run the flash kernel: the graphs above are causal only.
// Says so once per process.
bool document_masked(const int32_t* doc_start) {
  if (!doc_start) return false;
  static bool warned = false;
  if (!warned) {
    spdlog::warn(
        "cuDNN attention: data.document_masking needs a mask these graphs do not express; "
        "running the flash kernel, which skips the tiles the mask empties");
    warned = true;
  }
  ++fallback_calls;
  return true;
}

}  // namespace

void attention_forward(Bf16* out, float* lse, const Bf16* qkv, const int32_t* doc_start, int B,
                       int T, int H, int KV, int D) {
  if (document_masked(doc_start))
    return cuda::attention_forward(out, lse, qkv, doc_start, B, T, H, KV, D);
  const Shape s{B, T, H, KV, D, false, true};
  const Bf16* k = qkv + static_cast<size_t>(H) * D;
  const Bf16* v = k + static_cast<size_t>(KV) * D;
  const Plan* plan = usable_plan(s, {qkv, k, v, out, lse});
  if (!plan) return cuda::attention_forward(out, lse, qkv, nullptr, B, T, H, KV, D);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<Bf16*>(qkv)},
                                             {kK, const_cast<Bf16*>(k)},
                                             {kV, const_cast<Bf16*>(v)},
                                             {kO, out},
                                             {kStats, lse}};
  execute(s, *plan, pack);
}

void attention_backward(Bf16* dqkv, const Bf16* dout, const Bf16* qkv, const Bf16* out,
                        const float* lse, const int32_t* doc_start, int B, int T, int H, int KV,
                        int D) {
  if (document_masked(doc_start))
    return cuda::attention_backward(dqkv, dout, qkv, out, lse, doc_start, B, T, H, KV, D);
  const Shape s{B, T, H, KV, D, true, cuda::deterministic()};
  const size_t k_at = static_cast<size_t>(H) * D, v_at = k_at + static_cast<size_t>(KV) * D;
  const Plan* plan =
      usable_plan(s, {qkv, qkv + k_at, qkv + v_at, dqkv, dqkv + k_at, dqkv + v_at, dout, out, lse});
  if (!plan) return cuda::attention_backward(dqkv, dout, qkv, out, lse, nullptr, B, T, H, KV, D);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<Bf16*>(qkv)},
                                             {kK, const_cast<Bf16*>(qkv + k_at)},
                                             {kV, const_cast<Bf16*>(qkv + v_at)},
                                             {kO, const_cast<Bf16*>(out)},
                                             {kDO, const_cast<Bf16*>(dout)},
                                             {kStats, const_cast<float*>(lse)},
                                             {kDQ, dqkv},
                                             {kDK, dqkv + k_at},
                                             {kDV, dqkv + v_at}};
  execute(s, *plan, pack);
}

size_t attention_fallback_calls() { return fallback_calls; }

std::string attention_plans() {
  const size_t version = cudnnGetVersion();
  std::string out = fmt::format("cuDNN {}.{}.{} (cudnn-frontend {})\n", version / 10000,
                                version / 100 % 100, version % 100, CUDNN_FRONTEND_VERSION);
  for (const auto& [shape, plan] : plans()) {
    std::string engine = "refused: the flash kernel runs";
    if (plan.graph && !plan.graph->get_plan_name(engine).is_good()) engine = "(no plan name)";
    out += fmt::format("  {}: {}, workspace {} bytes\n", describe(shape), engine,
                       plan.workspace_bytes);
  }
  return out;
}

}  // namespace llm::cudnn
