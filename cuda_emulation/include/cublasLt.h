// cuBLASLt as the emulation build sees it: the subset model/kernels/matmul.cu
// calls, D = alpha op(A) op(B) + beta C in column-major terms, computed on the
// CPU (cuda_emulation/cublaslt.cpp). Only what the project calls is declared,
// with the real library's enum values; anything it does not set (another
// compute type, alpha != 1, another type combination) returns an error status.
// FP8 GEMMs are accepted exactly as cuBLASLt documents them for Hopper (the
// rules are listed in cublaslt.cpp, fp8_problem_status) and refused otherwise.
// Invariant: a call either returns an error status at once, having queued
// nothing, or validates fully and queues its work on the stream, so a bad
// argument is reported at the call that made it, as the real library does.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,    // a null handle
  CUBLAS_STATUS_INVALID_VALUE = 7,      // null, inconsistent or conflicting arguments
  CUBLAS_STATUS_EXECUTION_FAILED = 13,  // the work could not be queued (a sticky error)
  CUBLAS_STATUS_NOT_SUPPORTED = 15,     // valid cuBLASLt, but not what the emulation does
};

enum cublasOperation_t {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
};

enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,
};

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,  // int32_t, a cublasOperation_t
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  // const void*, a device float by which FP8 A (B) is multiplied; only for
  // FP8 operands (refused otherwise, as cuBLASLt does); default NULL (1).
  CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
  CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
  // int8_t, 0 (the default: partial sums promoted to fp32) or 1 (FP8 fast
  // accumulation); the emulated GEMM sums in fp32 either way.
  CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,
};

enum cublasLtReductionScheme_t {
  CUBLASLT_REDUCTION_SCHEME_NONE = 0,
  CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
  CUBLASLT_REDUCTION_SCHEME_MASK = 0x7,
};

enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,    // uint64_t, default 0
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,  // uint32_t, default 0x7 (all)
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

struct cublasLtContext;
struct cublasLtMatmulDescOpaque_t;
struct cublasLtMatrixLayoutOpaque_t;
struct cublasLtMatmulPreferenceOpaque_t;
using cublasLtHandle_t = cublasLtContext*;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t*;

// An algorithm as the heuristic returns it: a plain value the caller copies
// and keeps. Like a real one it is bound to the types it was chosen for and
// carries the requirements it was chosen under (the preference's pointer
// alignments, its workspace), which cublasLtMatmul checks. A value-initialized
// one (id 0) was never chosen and is refused.
struct cublasLtMatmulAlgo_t {
  int id;  // 1 to 4 when chosen by the heuristic
  cudaDataType_t a_type, b_type, d_type;
  uint32_t min_alignment_bytes[4];  // A, B, C, D
  size_t workspace_bytes;
};

struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
};

const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);

// Only CUBLAS_COMPUTE_32F with scale type CUDA_R_32F (no TF32).
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                        cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* value, size_t value_bytes);

// A column-major (rows, cols) matrix of CUDA_R_32F, CUDA_R_16BF,
// CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2, rows and
// cols at least 1 (the project never describes an empty one), leading
// dimension ld >= rows.
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* value, size_t value_bytes);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference);

// Up to min(requested, 4) distinct algorithms for the problem, all computing
// the same bits; those needing more workspace than the preference allows are
// left out.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_layout,
    cublasLtMatrixLayout_t b_layout, cublasLtMatrixLayout_t c_layout,
    cublasLtMatrixLayout_t d_layout, cublasLtMatmulPreference_t preference, int requested,
    cublasLtMatmulHeuristicResult_t results[], int* returned);

// alpha and beta are host pointers, read at the call; C is read only when
// beta != 0 and may be D (same layout) for an in-place accumulation.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream);
