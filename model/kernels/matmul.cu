// Bias-free linear layers on the GPU through cuBLASLt, fp32 or bf16 operands,
// every product accumulated in fp32 (CUBLAS_COMPUTE_32F: no TF32, so fp32
// results stay within summation-order distance of the CPU's sgemm).
// Row-major tensors are handed to cuBLASLt, which is column-major, as their
// transposes: a row-major X (r, c) is the column-major X^T (c, r) with the same
// leading dimension c, so every GEMM below is written for the transposed result.
// Invariants: dinp and out are overwritten (beta = 0), dweight accumulates
// (beta = 1) and is fp32 in both precisions; one handle and one 32 MiB
// workspace for the process, made on first use; each distinct GEMM (shape,
// types, transposes, beta, pointer alignments) queries the heuristic once and
// reuses its plan, so a training step does no allocation and no heuristic
// search. cuBLASLt with a fixed algorithm and one stream gives the same bits
// run after run (its split-K reductions are sequential, not atomic).
#include <cublasLt.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>

#include "runtime/cuda_runtime.cuh"
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
// cuBLASLt's default assumption for every pointer; an algorithm chosen for it
// may fault on a less aligned one, so smaller alignments are part of the key.
constexpr uint32_t kMaxAlignment = 256;

// One GEMM in cuBLASLt's column-major terms: D (m, n) = op(A) @ op(B) + beta D,
// where A is stored (m, k) or, transposed, (k, m); B (k, n) or (n, k).
struct GemmKey {
  int trans_a, trans_b;  // cublasOperation_t
  int m, n, k;
  int lda, ldb, ldd;
  int ab_type, d_type;  // cudaDataType_t of A and B, of C = D
  int beta;             // 0 (overwrite) or 1 (accumulate)
  uint32_t align_a = 0, align_b = 0, align_d = 0;
  auto operator<=>(const GemmKey&) const = default;
};

// What cublasLtMatmul needs for one key, built once.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// The process's cuBLASLt state. Never destroyed: at exit the CUDA context may
// already be gone, and the OS reclaims it all.
struct LtState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<GemmKey, GemmPlan> plans;
  std::mutex mutex;  // guards plans (lookups are cheap next to a GEMM)

  LtState() {
    LLM_CUBLAS_CHECK(cublasLtCreate(&handle));
    LLM_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
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

size_t element_bytes(int type) { return type == CUDA_R_16BF ? 2 : 4; }

cublasLtMatrixLayout_t make_layout(int type, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  LLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, static_cast<cudaDataType_t>(type),
                                              static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld));
  return layout;
}

GemmPlan make_plan(cublasLtHandle_t handle, const GemmKey& key) {
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
      make_layout(key.ab_type, a_plain ? key.m : key.k, a_plain ? key.k : key.m, key.lda);
  plan.layout_b =
      make_layout(key.ab_type, b_plain ? key.k : key.n, b_plain ? key.n : key.k, key.ldb);
  plan.layout_d = make_layout(key.d_type, key.m, key.n, key.ldd);

  cublasLtMatmulPreference_t preference = nullptr;
  LLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  LLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference,
                                                        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof workspace_bytes));
  const uint32_t alignments[4] = {key.align_a, key.align_b, key.align_d, key.align_d};  // C is D
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++)
    LLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, alignment_attributes[i],
                                                          &alignments[i], sizeof alignments[i]));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.layout_a, plan.layout_b, plan.layout_d,
                                     plan.layout_d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    char what[256];
    std::snprintf(what, sizeof what,
                  "cublasLtMatmulAlgoGetHeuristic(m=%d n=%d k=%d trans=%d%d A/B type %d D type %d "
                  "beta %d align %u/%u/%u)",
                  key.m, key.n, key.k, key.trans_a, key.trans_b, key.ab_type, key.d_type, key.beta,
                  key.align_a, key.align_b, key.align_d);
    throw_cuda_error(what,
                     status != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(status)
                                                     : "no algorithm supports this GEMM",
                     __FILE__, __LINE__);
  }
  plan.algo = result.algo;
  return plan;
}

// D = op(A) @ op(B) + beta D on the compute stream (column-major terms, see GemmKey).
void gemm(cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k,
          cudaDataType_t ab_type, const void* a, int lda, const void* b, int ldb,
          cudaDataType_t d_type, void* d, int ldd, float beta) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: overwrite with zeros, accumulate nothing
    if (beta == 0.0f)
      LLM_CUDA_CHECK(
          cudaMemsetAsync(d, 0, (size_t)ldd * n * element_bytes(d_type), compute_stream()));
    return;
  }
  LtState& lt = lt_state();
  GemmKey key{trans_a, trans_b, m, n, k, lda, ldb, ldd, ab_type, d_type, beta == 0.0f ? 0 : 1};
  key.align_a = alignment_of(a);
  key.align_b = alignment_of(b);
  key.align_d = alignment_of(d);
  const GemmPlan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(lt.mutex);
    auto it = lt.plans.find(key);
    if (it == lt.plans.end()) it = lt.plans.emplace(key, make_plan(lt.handle, key)).first;
    plan = &it->second;  // std::map nodes never move
  }
  const float alpha = 1.0f;
  LLM_CUBLAS_CHECK(cublasLtMatmul(lt.handle, plan->desc, &alpha, a, plan->layout_a, b,
                                  plan->layout_b, &beta, d, plan->layout_d, d, plan->layout_d,
                                  &plan->algo, lt.workspace, kWorkspaceBytes, compute_stream()));
}

// out (N, OC) = inp @ weight^T; column-major: out^T (OC, N) = weight (OC, C) @ inp^T (C, N),
// where weight is op_T of the stored weight^T (C, OC).
void linear_forward(void* out, const void* inp, const void* weight, int N, int C, int OC,
                    cudaDataType_t type) {
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, type, weight, C, inp, C, type, out, OC, 0.0f);
}

void linear_backward(void* dinp, float* dweight, const void* dout, const void* inp,
                     const void* weight, int N, int C, int OC, cudaDataType_t type) {
  // dinp (N, C) = dout @ weight; column-major: dinp^T (C, N) = weight^T (C, OC) @ dout^T (OC, N).
  if (dinp != nullptr)
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, type, weight, C, dout, OC, type, dinp, C, 0.0f);
  // dweight (OC, C) += dout^T @ inp; column-major: dweight^T (C, OC) += inp^T (C, N) @ dout (N,
  // OC), where dout (N, OC) is op_T of the stored dout^T (OC, N).
  gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, type, inp, C, dout, OC, CUDA_R_32F, dweight, C, 1.0f);
}

}  // namespace

// The cuBLASLt data type of storage type T.
template <class T>
constexpr cudaDataType_t kDataType = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, int N, int C, int OC) {
  linear_forward(out, inp, weight, N, C, OC, kDataType<T>);
}

template <class T>
void matmul_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
  linear_backward(dinp, dweight, dout, inp, weight, N, C, OC, kDataType<T>);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_backward);

}  // namespace llm::cuda
