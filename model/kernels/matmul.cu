// Bias-free linear layers on the GPU through cuBLASLt, fp32 or bf16 operands,
// every product accumulated in fp32 (CUBLAS_COMPUTE_32F: no TF32, so fp32
// results stay within summation-order distance of the CPU's sgemm); and the
// FP8 GEMM of fp8_matmul.h, which cuBLASLt runs on Hopper only in the "TN"
// form (A transposed, B not: both operands contiguous along k), with the
// operands' inverse scales as device scale pointers (A's and B's), so the
// scales computed on the device are never read back by the host.
// Row-major tensors are handed to cuBLASLt, which is column-major, as their
// transposes: a row-major X (r, c) is the column-major X^T (c, r) with the same
// leading dimension c, so every GEMM below is written for the transposed result.
// Invariants: dinp and out are overwritten (beta = 0), dweight accumulates
// (beta = 1) and is fp32 in both precisions; the residual forward reads the
// residual as cuBLASLt's C (D = out, beta = 1; C may be D), so its sum is the
// epilogue's fp32 one, rounded once (bf16 outputs allow only split-K schemes
// that reduce in fp32); one handle and one 32 MiB
// workspace for the process, made on first use; each distinct GEMM (shape,
// types, transposes, beta, pointer alignments) is planned once, on its first
// call, and cached, so later steps do no allocation and no heuristic search.
// The plan runs the heuristic's first algorithm, or, with gemm_autotune()
// (training.gemm_autotune), the fastest of its top kCandidateAlgorithms timed
// on that call's operands (into a scratch output, so the real one is written
// once). cuBLASLt with a fixed algorithm and one stream gives the same bits
// run after run (its split-K reductions are sequential, not atomic): without
// autotuning every process picks the same algorithms, so a config and seed
// give the same bits across runs; with it, the bits repeat within a process,
// and across processes only when the timing picks the same algorithms (a
// candidate must beat the earlier ones by kSwitchMargin, so near-ties keep
// the heuristic's order, but two whose speeds differ by about that margin
// can be picked differently by two runs).
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>

#include "device/cuda_runtime.cuh"
#include "model/kernels/fp8_matmul.h"
#include "model/kernels/matmul.h"

// Throws llm::Error naming the cuBLASLt call and its status, like LLM_CUDA_CHECK.
#define LLM_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                            \
    cublasStatus_t llm_cublas_status_ = (call);                                                   \
    if (llm_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                              \
      ::llm::cuda::throw_cuda_error(#call, cublasLtGetStatusString(llm_cublas_status_), __FILE__, \
                                    __LINE__);                                                    \
  } while (0)

namespace llm::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Autotuning on a GEMM's first call: how many of the heuristic's algorithms
// are timed, how many runs each (after one warm-up run), and how much faster
// (time ratio) a later candidate must be to displace an earlier one.
constexpr int kCandidateAlgorithms = 4;
constexpr int kTimedRuns = 5;
constexpr float kSwitchMargin = 0.95f;
// cuBLASLt's default assumption for every pointer; an algorithm chosen for it
// may fault on a less aligned one, so smaller alignments are part of the key.
constexpr uint32_t kMaxAlignment = 256;

// One GEMM in cuBLASLt's column-major terms: D (m, n) = op(A) @ op(B) + beta C,
// where A is stored (m, k) or, transposed, (k, m); B (k, n) or (n, k); C has
// D's type and layout (and may be D).
struct GemmKey {
  int trans_a, trans_b;  // cublasOperation_t
  int m, n, k;
  int lda, ldb, ldd;
  int a_type, b_type, d_type;  // cudaDataType_t of A, B and C = D
  int beta;                    // 0 (overwrite) or 1 (accumulate)
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0;
  auto operator<=>(const GemmKey&) const = default;
};

// What cublasLtMatmul needs for one key, built once.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;  // C: layout_d
  cublasLtMatmulAlgo_t algo{};
};

// The process's cuBLASLt state. Never destroyed: at exit the CUDA context may
// already be gone, and the OS reclaims it all.
struct LtState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  GrowingScratch timing_output;   // D (and C) of the timing runs
  GrowingScratch aliased_output;  // D of a bf16 GEMM whose C is its output (linear_forward)
  cudaEvent_t timing_start = nullptr, timing_stop = nullptr;
  std::map<GemmKey, GemmPlan> plans;
  std::mutex mutex;  // guards plans (lookups are cheap next to a GEMM)

  LtState() {
    LLM_CUBLAS_CHECK(cublasLtCreate(&handle));
    LLM_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    LLM_CUDA_CHECK(cudaEventCreate(&timing_start));
    LLM_CUDA_CHECK(cudaEventCreate(&timing_stop));
  }
};

LtState& lt_state() {
  static LtState* state = new LtState();  // on the device current at first use
  return *state;
}

// The largest power of two (at most kMaxAlignment) dividing the address.
uint32_t alignment_of(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  if (address == 0) return kMaxAlignment;
  const uintptr_t lowest_bit = address & (~address + 1);
  return lowest_bit >= kMaxAlignment ? kMaxAlignment : static_cast<uint32_t>(lowest_bit);
}

bool is_fp8(int type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

size_t element_bytes(int type) { return is_fp8(type) ? 1 : type == CUDA_R_16BF ? 2 : 4; }

cublasLtMatrixLayout_t make_layout(int type, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  LLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, static_cast<cudaDataType_t>(type),
                                              static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld));
  return layout;
}

// The descriptor and layouts of `key`, without an algorithm.
GemmPlan describe_gemm(const GemmKey& key) {
  GemmPlan plan;
  LLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t trans_a = key.trans_a, trans_b = key.trans_b;
  LLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                  sizeof trans_a));
  LLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                  sizeof trans_b));
  // Layouts describe the matrices as stored, before op().
  const bool a_plain = key.trans_a == CUBLAS_OP_N, b_plain = key.trans_b == CUBLAS_OP_N;
  plan.layout_a =
      make_layout(key.a_type, a_plain ? key.m : key.k, a_plain ? key.k : key.m, key.lda);
  plan.layout_b =
      make_layout(key.b_type, b_plain ? key.k : key.n, b_plain ? key.n : key.k, key.ldb);
  plan.layout_d = make_layout(key.d_type, key.m, key.n, key.ldd);
  return plan;
}

// FP8 operands' scales: device floats by which A and B are multiplied (null: 1).
struct OperandScales {
  const float* a = nullptr;
  const float* b = nullptr;
};

// Points an FP8 plan's descriptor at a call's scales, which must be 16-byte
// aligned (base/fp8.h: else Hopper's cuBLASLt refuses the GEMM). They are
// set before the heuristic too, as NVIDIA's FP8 sample sets them.
void set_scale_pointers(const GemmPlan& plan, const OperandScales& scales) {
  LLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                  &scales.a, sizeof scales.a));
  LLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                  &scales.b, sizeof scales.b));
}

// The heuristic's best algorithms for a plan, best first.
struct Candidates {
  cublasLtMatmulHeuristicResult_t results[kCandidateAlgorithms] = {};
  int count = 0;  // 1 to the number asked for
};

// The heuristic's best `wanted` (<= kCandidateAlgorithms) candidates for
// `plan`; throws when cuBLASLt has none.
Candidates candidate_algorithms(cublasLtHandle_t handle, const GemmPlan& plan, const GemmKey& key,
                                int wanted) {
  cublasLtMatmulPreference_t preference = nullptr;
  LLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  LLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference,
                                                        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof workspace_bytes));
  const uint32_t alignments[4] = {key.align_a, key.align_b, key.align_c, key.align_d};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++)
    LLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, alignment_attributes[i],
                                                          &alignments[i], sizeof alignments[i]));
  // Split-K parts summed in the output type (the INPLACE and OUTPUT_TYPE
  // schemes) round every partial sum: for a bf16 D only the schemes that sum
  // in fp32 keep the one-rounding contract.
  if (key.d_type != CUDA_R_32F) {
    const uint32_t fp32_reductions =
        CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    LLM_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                             &fp32_reductions, sizeof fp32_reductions));
  }

  Candidates candidates;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan.desc, plan.layout_a, plan.layout_b, plan.layout_d, plan.layout_d, preference,
      wanted, candidates.results, &candidates.count);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || candidates.count == 0) {
    char what[256];
    std::snprintf(what, sizeof what,
                  "cublasLtMatmulAlgoGetHeuristic(m=%d n=%d k=%d trans=%d%d A/B types %d/%d D type "
                  "%d beta %d align %u/%u/%u/%u)",
                  key.m, key.n, key.k, key.trans_a, key.trans_b, key.a_type, key.b_type, key.d_type,
                  key.beta, key.align_a, key.align_b, key.align_c, key.align_d);
    throw_cuda_error(what,
                     status != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(status)
                                                     : "no algorithm supports this GEMM",
                     __FILE__, __LINE__);
  }
  return candidates;
}

// Milliseconds of kTimedRuns runs of `algo` (after a warm-up run) on the
// operands a, b, writing a scratch output (which is also C when beta != 0);
// infinity when cuBLASLt refuses the algorithm for these operands.
float time_algorithm(LtState& lt, const GemmPlan& plan, const cublasLtMatmulAlgo_t& algo,
                     const void* a, const void* b, void* scratch, float beta) {
  const float alpha = 1.0f;
  auto run = [&] {
    return cublasLtMatmul(lt.handle, plan.desc, &alpha, a, plan.layout_a, b, plan.layout_b, &beta,
                          scratch, plan.layout_d, scratch, plan.layout_d, &algo, lt.workspace,
                          kWorkspaceBytes, compute_stream());
  };
  if (run() != CUBLAS_STATUS_SUCCESS) return std::numeric_limits<float>::infinity();
  LLM_CUDA_CHECK(cudaEventRecord(lt.timing_start, compute_stream()));
  for (int i = 0; i < kTimedRuns; i++) LLM_CUBLAS_CHECK(run());
  LLM_CUDA_CHECK(cudaEventRecord(lt.timing_stop, compute_stream()));
  wait_for_event(lt.timing_stop);
  float milliseconds = 0.0f;
  LLM_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, lt.timing_start, lt.timing_stop));
  return milliseconds;
}

// The plan of `key`: the heuristic's first algorithm, or with gemm_autotune()
// the fastest of its candidates on this call's operands a and b.
// Candidates are tried in the heuristic's order and one replaces the best so
// far only when it takes under kSwitchMargin of its time.
GemmPlan make_plan(LtState& lt, const GemmKey& key, const void* a, const void* b,
                   const OperandScales& scales) {
  GemmPlan plan = describe_gemm(key);
  if (is_fp8(key.a_type)) set_scale_pointers(plan, scales);
  const Candidates candidates =
      candidate_algorithms(lt.handle, plan, key, gemm_autotune() ? kCandidateAlgorithms : 1);
  plan.algo = candidates.results[0].algo;
  if (candidates.count == 1) return plan;
  const size_t output_bytes = (size_t)key.ldd * key.n * element_bytes(key.d_type);
  void* scratch = lt.timing_output.reserve(output_bytes);
  // The candidates assume C and D aligned as the key says; a less aligned
  // scratch could fault, so then the heuristic's first stands untimed.
  if (alignment_of(scratch) < std::max(key.align_c, key.align_d)) return plan;
  LLM_CUDA_CHECK(cudaMemsetAsync(scratch, 0, output_bytes, compute_stream()));
  const float beta = key.beta ? 1.0f : 0.0f;
  float best = std::numeric_limits<float>::infinity();
  for (int i = 0; i < candidates.count; i++) {
    const cublasLtMatmulAlgo_t& algo = candidates.results[i].algo;
    const float milliseconds = time_algorithm(lt, plan, algo, a, b, scratch, beta);
    if (milliseconds < kSwitchMargin * best) {
      best = milliseconds;
      plan.algo = algo;
    }
  }
  return plan;
}

// D = op(A) @ op(B) + beta C on the compute stream (column-major terms, see
// GemmKey); C is read only when beta != 0. FP8 operands: D = a_scale b_scale
// op(A) @ op(B) + beta C.
void gemm(cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k,
          cudaDataType_t a_type, const void* a, int lda, cudaDataType_t b_type, const void* b,
          int ldb, cudaDataType_t d_type, const void* c, void* d, int ldd, float beta,
          OperandScales scales = {}) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: D = beta C
    const size_t d_bytes = (size_t)ldd * n * element_bytes(d_type);
    if (beta == 0.0f)
      LLM_CUDA_CHECK(cudaMemsetAsync(d, 0, d_bytes, compute_stream()));
    else if (c != d)
      LLM_CUDA_CHECK(cudaMemcpyAsync(d, c, d_bytes, cudaMemcpyDeviceToDevice, compute_stream()));
    return;
  }
  LtState& lt = lt_state();
  GemmKey key{trans_a, trans_b, m,      n,      k,      lda,
              ldb,     ldd,     a_type, b_type, d_type, beta == 0.0f ? 0 : 1};
  key.align_a = alignment_of(a);
  key.align_b = alignment_of(b);
  key.align_c = alignment_of(c);
  key.align_d = alignment_of(d);
  const GemmPlan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(lt.mutex);
    auto it = lt.plans.find(key);
    if (it == lt.plans.end()) it = lt.plans.emplace(key, make_plan(lt, key, a, b, scales)).first;
    plan = &it->second;  // std::map nodes never move
    // The scale pointers are the call's, not the plan's (the descriptor is
    // shared by every call of the key and read when the GEMM is queued).
    if (is_fp8(key.a_type)) set_scale_pointers(*plan, scales);
    const float alpha = 1.0f;
    LLM_CUBLAS_CHECK(cublasLtMatmul(lt.handle, plan->desc, &alpha, a, plan->layout_a, b,
                                    plan->layout_b, &beta, c, plan->layout_d, d, plan->layout_d,
                                    &plan->algo, lt.workspace, kWorkspaceBytes, compute_stream()));
  }
}

// out (N, OC) = inp @ weight^T (+ residual, when not null); column-major:
// out^T (OC, N) = weight (OC, C) @ inp^T (C, N) (+ residual^T), where weight is
// op_T of the stored weight^T (C, OC).
// A bf16 residual added in place (out == residual) goes through a scratch D
// and a copy back: with C == D, cuBLASLt 13.1 on an H100 (2026-11-24) was off
// by several bf16 ulps where the sum cancels, as if the product were rounded
// before C was added (test matmul_forward_residual_in_place_or_not; the same
// GEMMs with C != D round once). The model never adds in place: no cost to it.
void linear_forward(void* out, const void* inp, const void* weight, const void* residual, int N,
                    int C, int OC, cudaDataType_t type) {
  if (residual == nullptr) {
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, type, weight, C, type, inp, C, type, out, out, OC,
         0.0f);
    return;
  }
  void* d = out;
  const size_t out_bytes = (size_t)N * OC * element_bytes(type);
  if (residual == out && type != CUDA_R_32F) d = lt_state().aliased_output.reserve(out_bytes);
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, type, weight, C, type, inp, C, type, residual, d, OC,
       1.0f);
  if (d != out)
    LLM_CUDA_CHECK(cudaMemcpyAsync(out, d, out_bytes, cudaMemcpyDeviceToDevice, compute_stream()));
}

void linear_backward(void* dinp, float* dweight, const void* dout, const void* inp,
                     const void* weight, int N, int C, int OC, cudaDataType_t type) {
  // dinp (N, C) = dout @ weight; column-major: dinp^T (C, N) = weight^T (C, OC) @ dout^T (OC, N).
  if (dinp != nullptr)
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, type, weight, C, type, dout, OC, type, dinp, dinp, C,
         0.0f);
  // dweight (OC, C) += dout^T @ inp; column-major: dweight^T (C, OC) += inp^T (C, N) @ dout (N,
  // OC), where dout (N, OC) is op_T of the stored dout^T (OC, N).
  gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, type, inp, C, type, dout, OC, CUDA_R_32F, dweight,
       dweight, C, 1.0f);
}

}  // namespace

// The cuBLASLt data type of storage type T.
template <class T>
constexpr cudaDataType_t kDataType = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, int N, int C, int OC) {
  linear_forward(out, inp, weight, nullptr, N, C, OC, kDataType<T>);
}

template <class T>
void matmul_forward_residual(T* out, const T* inp, const T* weight, const T* residual, int N, int C,
                             int OC) {
  linear_forward(out, inp, weight, residual, N, C, OC, kDataType<T>);
}

template <class T>
void matmul_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
  linear_backward(dinp, dweight, dout, inp, weight, N, C, OC, kDataType<T>);
}

// out (M, N) = a (M, K) @ b (N, K)^T (fp8_matmul.h); column-major, in the
// TN form cuBLASLt's FP8 GEMM requires: out^T (N, M) = op_T(b^T) @ a^T, where
// the stored b^T (K, N) and a^T (K, M) are the row-major codes as they are.
template <class T>
void fp8_gemm(T* out, const T* c, const uint8_t* a, Fp8Format a_format, const Fp8Scale* a_scale,
              const uint8_t* b, Fp8Format b_format, const Fp8Scale* b_scale, int M, int N, int K) {
  if (!std::is_same_v<T, float> && c == out)
    throw_cuda_error("fp8_gemm", "a bf16 output may not be its own addend (cuBLASLt rounds twice)",
                     __FILE__, __LINE__);
  auto type = [](Fp8Format f) { return f == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; };
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, type(b_format), b, K, type(a_format), a, K, kDataType<T>,
       c ? static_cast<const void*>(c) : out, out, N, c ? 1.0f : 0.0f,
       {&b_scale->inverse, &a_scale->inverse});
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_forward_residual);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_backward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(fp8_gemm);

}  // namespace llm::cuda
