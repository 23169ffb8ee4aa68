// cuBLASLt's matmul on the CPU (include/cublasLt.h): each call is validated
// on the host, then computed on its stream by the project's row-major CPU
// GEMM. A column-major X (r, c) with leading dimension ld is the row-major
// X^T (c, r) with the same ld, so D = op(A) op(B) runs as the row-major
// D^T = op(B)^T op(A)^T.
// Invariant: every algorithm computes the same bits: bf16 and FP8 operands
// are widened to fp32 exactly, the product is an fp32 GEMM, and (FP8: the
// product times the A and B scales, read on the stream when the GEMM runs)
// beta C is added in fp32 before the one rounding to D's type.
#include <cublasLt.h>

#include <array>
#include <cstring>
#include <vector>

#include "cuda_emulation/streams.h"
#include "model/kernels/cpu_gemm.h"
#include "base/fp8.h"

struct cublasLtContext {};  // no state: a handle only has to have been created

struct cublasLtMatmulDescOpaque_t {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  const float* a_scale = nullptr;  // device pointers (FP8 only); null: 1
  const float* b_scale = nullptr;
};

struct cublasLtMatrixLayoutOpaque_t {  // column-major (rows, cols), leading dimension ld
  cudaDataType_t type;
  int rows, cols, ld;
};

struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment_bytes[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's defaults
};

namespace {

using llm::Bf16;

constexpr int kAlgorithms = 4;
// Algorithms 3 and 4 stand for split-K ones, which need a workspace, so the
// workspace the caller passes is checked against what its algorithm needs.
constexpr size_t kSplitKWorkspaceBytes = size_t{1} << 20;
constexpr int kMaxDimension = 0x7fffffff;  // the CPU GEMM takes int sizes

enum Matrix { kA, kB, kC, kD };

bool is_fp8(cudaDataType_t type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

size_t element_bytes(cudaDataType_t type) { return is_fp8(type) ? 1 : type == CUDA_R_16BF ? 2 : 4; }

// The smallest pointer alignment an FP8 GEMM takes (all four matrices).
constexpr uint32_t kFp8AlignmentBytes = 16;

// Bytes from a matrix's first element to one past its last.
size_t span_bytes(const cublasLtMatrixLayoutOpaque_t& x) {
  return ((size_t)(x.cols - 1) * x.ld + x.rows) * element_bytes(x.type);
}

bool overlap(const void* p, size_t p_bytes, const void* q, size_t q_bytes) {
  const uintptr_t p0 = reinterpret_cast<uintptr_t>(p), q0 = reinterpret_cast<uintptr_t>(q);
  return p0 < q0 + q_bytes && q0 < p0 + p_bytes;
}

// A validated problem: D (m, n) = op(A) (m, k) op(B) (k, n) + beta C, where C
// has D's layout.
struct Problem {
  cublasOperation_t trans_a, trans_b;
  int m, n, k;
  cudaDataType_t a_type, b_type, d_type;
  int lda, ldb, ldd;
  const float *a_scale, *b_scale;  // FP8 only; null: 1
};

// cuBLASLt's rules for FP8 on Hopper (cuBLAS documentation, cublasLtMatmul:
// "To use FP8 kernels, the following set of requirements must be
// satisfied"), for a problem with an FP8 operand:
//   - A transposed and B not (the "TN" format);
//   - both operands FP8, and not both E5M2 (E4M3 x E4M3, E4M3 x E5M2,
//     E5M2 x E4M3);
//   - C and D both BF16 or both FP32 (cuBLASLt also takes FP16 and FP8 D,
//     which the project never asks for, so the emulation refuses them);
//   - 16-byte alignment of the dimensions the tensor cores stride over: k
//     (the contiguous dimension of both operands), lda and ldb (in bytes),
//     and m and ldd in D's bytes; the pointers' 16-byte alignment is checked
//     with the algorithm (cublasLtMatmulAlgoGetHeuristic, cublasLtMatmul).
// Scale pointers on a problem with no FP8 operand are refused, as cuBLASLt
// refuses them "for an unsupported matrix data ... combination".
cublasStatus_t fp8_problem_status(const Problem& p) {
  const bool a8 = is_fp8(p.a_type), b8 = is_fp8(p.b_type);
  if (!a8 && !b8)
    return p.a_scale || p.b_scale ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
  if (!a8 || !b8) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (p.trans_a != CUBLAS_OP_T || p.trans_b != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (p.a_type == CUDA_R_8F_E5M2 && p.b_type == CUDA_R_8F_E5M2) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (p.d_type != CUDA_R_16BF && p.d_type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  const size_t d_bytes = element_bytes(p.d_type);
  if (p.k % 16 != 0 || p.lda % 16 != 0 || p.ldb % 16 != 0 || (p.m * d_bytes) % 16 != 0 ||
      (p.ldd * d_bytes) % 16 != 0)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

// The problem the descriptor and layouts describe, or the status refusing it.
cublasStatus_t describe_problem(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                Problem* problem) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
  const bool a_plain = desc->trans_a == CUBLAS_OP_N, b_plain = desc->trans_b == CUBLAS_OP_N;
  const int m = d->rows, n = d->cols, k = a_plain ? a->cols : a->rows;
  if ((a_plain ? a->rows : a->cols) != m || (b_plain ? b->rows : b->cols) != k ||
      (b_plain ? b->cols : b->rows) != n || c->rows != m || c->cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (c->type != d->type || c->ld != d->ld) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!is_fp8(a->type) && !is_fp8(b->type)) {
    if (a->type != b->type) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (a->type == CUDA_R_32F && d->type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  *problem = {desc->trans_a, desc->trans_b, m, n, k, a->type, b->type, d->type, a->ld, b->ld, d->ld,
              desc->a_scale, desc->b_scale};
  return fp8_problem_status(*problem);
}

// The value of element i of a bf16 or FP8 matrix, exactly.
float element_value(const void* x, size_t i, cudaDataType_t type) {
  static const auto fp8_values = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int code = 0; code < 256; code++) {
      t[0][code] = llm::fp8_to_float(static_cast<uint8_t>(code), llm::Fp8Format::e4m3);
      t[1][code] = llm::fp8_to_float(static_cast<uint8_t>(code), llm::Fp8Format::e5m2);
    }
    return t;
  }();
  if (type == CUDA_R_16BF) return llm::to_float(static_cast<const Bf16*>(x)[i]);
  return fp8_values[type == CUDA_R_8F_E5M2][static_cast<const uint8_t*>(x)[i]];
}

// X (rows, cols) of leading dimension ld, of a type narrower than fp32,
// widened to fp32 into `out`, packed (leading dimension rows).
const float* widen(const void* x, cudaDataType_t type, int rows, int cols, int ld,
                   std::vector<float>& out) {
  out.resize((size_t)rows * cols);
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++)
      out[(size_t)j * rows + i] = element_value(x, (size_t)j * ld + i, type);
  return out.data();
}

llm::cpu::Op row_major_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? llm::cpu::Op::kNone : llm::cpu::Op::kTranspose;
}

// The matmul, on the stream's thread. Its scratch is thread_local: each
// stream's thread keeps its own, grown to the largest call and reused.
void compute(const Problem& p, const void* a, const void* b, float beta, const void* c, void* d) {
  thread_local std::vector<float> widened_a, widened_b, product;
  const float* a32 = static_cast<const float*>(a);
  const float* b32 = static_cast<const float*>(b);
  int lda = p.lda, ldb = p.ldb;
  if (p.a_type != CUDA_R_32F) {  // then B is not fp32 either
    const bool a_plain = p.trans_a == CUBLAS_OP_N, b_plain = p.trans_b == CUBLAS_OP_N;
    lda = a_plain ? p.m : p.k;
    ldb = b_plain ? p.k : p.n;
    a32 = widen(a, p.a_type, lda, a_plain ? p.k : p.m, p.lda, widened_a);
    b32 = widen(b, p.b_type, ldb, b_plain ? p.n : p.k, p.ldb, widened_b);
  }
  // The FP8 scales, read now, when the GEMM runs on its stream (the kernels
  // before it on the stream computed them).
  const float scale = (p.a_scale ? *p.a_scale : 1.0f) * (p.b_scale ? *p.b_scale : 1.0f);
  // Row-major D^T (n, m) = op(B)^T (n, k) op(A)^T (k, m): the stored B is
  // op(B)^T exactly when op(B) transposes nothing, and likewise A.
  llm::cpu::GemmArgs<float, float> gemm{row_major_op(p.trans_b),
                                        row_major_op(p.trans_a),
                                        p.n,
                                        p.m,
                                        p.k,
                                        b32,
                                        ldb,
                                        a32,
                                        lda,
                                        0.0f,
                                        nullptr,
                                        0};
  if (p.d_type == CUDA_R_32F && scale == 1.0f) {  // beta C summed into D by the GEMM itself
    auto* d32 = static_cast<float*>(d);
    if (beta != 0.0f && c != d)
      for (int j = 0; j < p.n; j++)
        std::memcpy(d32 + (size_t)j * p.ldd, static_cast<const float*>(c) + (size_t)j * p.ldd,
                    sizeof(float) * p.m);
    gemm.beta = beta;
    gemm.c = d32;
    gemm.ldc = p.ldd;
    llm::cpu::gemm(gemm);
    return;
  }
  // The epilogue, D = scale * product + beta C, rounded once to D's type.
  product.resize((size_t)p.m * p.n);
  gemm.c = product.data();
  gemm.ldc = p.m;
  llm::cpu::gemm(gemm);
  for (int j = 0; j < p.n; j++)
    for (int i = 0; i < p.m; i++) {
      const size_t at = (size_t)j * p.ldd + i;
      float sum = scale * product[(size_t)j * p.m + i];
      if (p.d_type == CUDA_R_32F) {
        if (beta != 0.0f) sum += beta * static_cast<const float*>(c)[at];
        static_cast<float*>(d)[at] = sum;
      } else {
        if (beta != 0.0f) sum += beta * llm::to_float(static_cast<const Bf16*>(c)[at]);  // not + 0
        static_cast<Bf16*>(d)[at] = llm::to_bf16(sum);
      }
    }
}

}  // namespace

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "<unknown>";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                        cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (compute_type != CUBLAS_COMPUTE_32F || scale_type != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = new cublasLtMatmulDescOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* value, size_t value_bytes) {
  if (desc == nullptr || value == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (attribute == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER ||
      attribute == CUBLASLT_MATMUL_DESC_B_SCALE_POINTER) {
    const float* scale;
    if (value_bytes != sizeof scale) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&scale, value, sizeof scale);
    // A scale is read by the GEMM's kernel: it must be device memory.
    if (scale && !cuda_emulation::inside_device_allocation(scale, sizeof(float)))
      return CUBLAS_STATUS_INVALID_VALUE;
    (attribute == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER ? desc->a_scale : desc->b_scale) = scale;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attribute != CUBLASLT_MATMUL_DESC_TRANSA && attribute != CUBLASLT_MATMUL_DESC_TRANSB)
    return CUBLAS_STATUS_INVALID_VALUE;  // an attribute the emulation does not know
  if (value_bytes != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t op;
  std::memcpy(&op, value, sizeof op);
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_NOT_SUPPORTED;  // CUBLAS_OP_C...
  (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? desc->trans_a : desc->trans_b) =
      static_cast<cublasOperation_t>(op);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (layout == nullptr || rows == 0 || cols == 0 || ld < (int64_t)rows)
    return CUBLAS_STATUS_INVALID_VALUE;
  if ((type != CUDA_R_32F && type != CUDA_R_16BF && !is_fp8(type)) || cols > kMaxDimension ||
      ld > kMaxDimension)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, (int)rows, (int)cols, (int)ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *preference = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* value, size_t value_bytes) {
  if (preference == nullptr || value == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (value_bytes != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&preference->max_workspace_bytes, value, sizeof(uint64_t));
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attribute == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK) {
    // The emulated GEMM never splits K, so every mask admits it; only the
    // value's size and bits are checked.
    uint32_t mask;
    if (value_bytes != sizeof mask) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&mask, value, sizeof mask);
    return (mask & ~uint32_t{CUBLASLT_REDUCTION_SCHEME_MASK}) == 0 ? CUBLAS_STATUS_SUCCESS
                                                                   : CUBLAS_STATUS_INVALID_VALUE;
  }
  if (attribute < CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES ||
      attribute > CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES || value_bytes != sizeof(uint32_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  uint32_t alignment;
  std::memcpy(&alignment, value, sizeof alignment);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return CUBLAS_STATUS_INVALID_VALUE;
  preference->min_alignment_bytes[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] =
      alignment;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_layout,
    cublasLtMatrixLayout_t b_layout, cublasLtMatrixLayout_t c_layout,
    cublasLtMatrixLayout_t d_layout, cublasLtMatmulPreference_t preference, int requested,
    cublasLtMatmulHeuristicResult_t results[], int* returned) {
  Problem problem;
  const cublasStatus_t status =
      describe_problem(handle, desc, a_layout, b_layout, c_layout, d_layout, &problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (!preference || requested <= 0 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  // No algorithm reads an element from an address not aligned to its size,
  // and the FP8 kernels need every matrix 16-byte aligned.
  const bool fp8 = is_fp8(problem.a_type);
  const size_t element_size[4] = {element_bytes(problem.a_type), element_bytes(problem.b_type),
                                  element_bytes(problem.d_type), element_bytes(problem.d_type)};
  for (int x = kA; x <= kD; x++)
    if (preference->min_alignment_bytes[x] < (fp8 ? kFp8AlignmentBytes : element_size[x]))
      return CUBLAS_STATUS_NOT_SUPPORTED;
  *returned = 0;
  for (int id = 1; id <= kAlgorithms && *returned < requested; id++) {
    const size_t workspace_bytes = id > 2 ? kSplitKWorkspaceBytes : 0;
    if (workspace_bytes > preference->max_workspace_bytes) continue;
    cublasLtMatmulAlgo_t& algo = results[(*returned)++].algo;
    algo = {id, problem.a_type, problem.b_type, problem.d_type, {}, workspace_bytes};
    std::memcpy(algo.min_alignment_bytes, preference->min_alignment_bytes,
                sizeof algo.min_alignment_bytes);
  }
  return CUBLAS_STATUS_SUCCESS;
}

// A pointer less aligned than its algorithm was chosen for is refused with
// CUBLAS_STATUS_INVALID_VALUE ("arguments in conflict" in cuBLASLt's terms);
// a real GPU might run it and fault, or compute garbage.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  Problem problem;
  const cublasStatus_t status =
      describe_problem(handle, desc, a_layout, b_layout, c_layout, d_layout, &problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (!alpha || !beta || !a || !b || !d || !algo) return CUBLAS_STATUS_INVALID_VALUE;
  float alpha_value, beta_value;
  std::memcpy(&alpha_value, alpha, sizeof alpha_value);
  std::memcpy(&beta_value, beta, sizeof beta_value);
  if (alpha_value != 1.0f) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (beta_value != 0.0f && c == nullptr) return CUBLAS_STATUS_INVALID_VALUE;

  if (algo->id < 1 || algo->id > kAlgorithms || algo->a_type != problem.a_type ||
      algo->b_type != problem.b_type || algo->d_type != problem.d_type)
    return CUBLAS_STATUS_INVALID_VALUE;  // not chosen by the heuristic for these types
  if (workspace_bytes < algo->workspace_bytes || (algo->workspace_bytes > 0 && !workspace))
    return CUBLAS_STATUS_INVALID_VALUE;
  const void* pointers[4] = {a, b, c, d};
  for (int x = kA; x <= kD; x++)
    if (reinterpret_cast<uintptr_t>(pointers[x]) % algo->min_alignment_bytes[x] != 0)
      return CUBLAS_STATUS_INVALID_VALUE;
  // Hopper's FP8 kernels refuse a scale pointer that is not 16-byte aligned,
  // although the heuristic took it (an H200 with cuBLASLt 13.1, 2026-11-27:
  // scales 8 bytes into a struct failed, 16 and 256 bytes ran;
  // tools/gpu_kit/probe_fp8_gemm.cu).
  for (const float* scale : {problem.a_scale, problem.b_scale})
    if (reinterpret_cast<uintptr_t>(scale) % kFp8AlignmentBytes != 0)
      return CUBLAS_STATUS_NOT_SUPPORTED;

  // D is written while A and B (and an out-of-place C) are read: they may not
  // share memory; C may be D itself.
  const size_t d_bytes = span_bytes(*d_layout);
  if (overlap(d, d_bytes, a, span_bytes(*a_layout)) ||
      overlap(d, d_bytes, b, span_bytes(*b_layout)) ||
      (beta_value != 0.0f && c != d && overlap(d, d_bytes, c, d_bytes)))
    return CUBLAS_STATUS_INVALID_VALUE;

  const cudaError_t queued = cuda_emulation::enqueue(
      stream, [problem, a, b, beta_value, c, d] { compute(problem, a, b, beta_value, c, d); });
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
