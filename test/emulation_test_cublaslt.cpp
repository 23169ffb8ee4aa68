// The emulated cuBLASLt's FP8 GEMMs (cuda_emulation/cublaslt.cpp): what
// cuBLASLt documents for FP8 on Hopper is accepted and computed (D = a_scale
// b_scale op(A) op(B) + beta C, the scales read from device memory when the
// GEMM runs), and the rest is refused: any layout but TN, E5M2 x E5M2, an FP8
// D, dimensions or pointers off 16 bytes, scale pointers on a non-FP8 GEMM or
// into host memory.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/fp8.h"

namespace {

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 64), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpyAsync(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, nullptr),
      cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  return p;
}

// One GEMM's description: D (m, n) = op(A) op(B), column-major.
struct Fp8Gemm {
  cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  int m = 16, n = 8, k = 32;
  cudaDataType_t a_type = CUDA_R_8F_E4M3, b_type = CUDA_R_8F_E4M3, d_type = CUDA_R_32F;
  uint32_t alignment = 16;  // the preference's minimum, all four matrices

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;

  // Describes the GEMM; the status of the heuristic's answer (and `algo`).
  cublasStatus_t plan(cublasLtHandle_t handle, cublasLtMatmulAlgo_t* algo) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    const int32_t ta = trans_a, tb = trans_b;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    const bool a_plain = trans_a == CUBLAS_OP_N, b_plain = trans_b == CUBLAS_OP_N;
    EXPECT_EQ(
        cublasLtMatrixLayoutCreate(&a, a_type, a_plain ? m : k, a_plain ? k : m, a_plain ? m : k),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(
        cublasLtMatrixLayoutCreate(&b, b_type, b_plain ? k : n, b_plain ? n : k, b_plain ? k : n),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&d, d_type, m, n, m), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t preference = nullptr;
    cublasLtMatmulPreferenceCreate(&preference);
    for (int x = 0; x < 4; x++)
      cublasLtMatmulPreferenceSetAttribute(preference,
                                           static_cast<cublasLtMatmulPreferenceAttributes_t>(
                                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + x),
                                           &alignment, sizeof alignment);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, preference, 1, &result, &returned);
    cublasLtMatmulPreferenceDestroy(preference);
    *algo = result.algo;
    return status;
  }
};

class EmulatedCublasLtFp8 : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  cublasLtHandle_t handle_ = nullptr;
};

// A TN E4M3 x E5M2 GEMM with device scales, against the same sum on the host;
// scales not 16-byte aligned are refused.
TEST_F(EmulatedCublasLtFp8, TnGemmWithDeviceScalesComputes) {
  Fp8Gemm g;
  g.b_type = CUDA_R_8F_E5M2;
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(g.plan(handle_, &algo), CUBLAS_STATUS_SUCCESS);
  std::vector<uint8_t> a_codes((size_t)g.k * g.m), b_codes((size_t)g.k * g.n);
  // Values within a few binades (e4m3 0.5 to 1.9, e5m2 1 to 3.5, both signs),
  // so every product and every sum of 32 of them is exact in fp32.
  for (size_t i = 0; i < a_codes.size(); i++)
    a_codes[i] = (uint8_t)(0x30 + (i * 5) % 16) | (uint8_t)(i % 3 == 0 ? 0x80 : 0);
  for (size_t i = 0; i < b_codes.size(); i++)
    b_codes[i] = (uint8_t)(0x3c + (i * 3) % 8) | (uint8_t)(i % 2 ? 0x80 : 0);
  // The scales 16 bytes apart: Hopper's FP8 kernels need them 16-byte aligned.
  const std::vector<float> scales = {0.125f, 0.0f, 0.0f, 0.0f, 0.25f};
  uint8_t* a = device_copy(a_codes);
  uint8_t* b = device_copy(b_codes);
  float* scale = device_copy(scales);
  float* d = device_copy(std::vector<float>((size_t)g.m * g.n, -1.0f));
  const float alpha = 1.0f, beta = 0.0f;
  auto run_with_scales = [&](const float* a_scale, const float* b_scale) {
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                             sizeof a_scale),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                             sizeof b_scale),
              CUBLAS_STATUS_SUCCESS);
    return cublasLtMatmul(handle_, g.desc, &alpha, a, g.a, b, g.b, &beta, d, g.d, d, g.d, &algo,
                          nullptr, 0, nullptr);
  };
  // A scale 8 bytes into its buffer is refused by the GEMM, not the
  // heuristic, as an H200 refused it (cuBLASLt 13.1, 2026-11-27).
  EXPECT_EQ(run_with_scales(scale, scale + 2), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(run_with_scales(scale + 2, scale + 4), CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(run_with_scales(scale, scale + 4), CUBLAS_STATUS_SUCCESS);
  std::vector<float> out((size_t)g.m * g.n);
  ASSERT_EQ(
      cudaMemcpyAsync(out.data(), d, out.size() * sizeof(float), cudaMemcpyDeviceToHost, nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  for (int j = 0; j < g.n; j++)
    for (int i = 0; i < g.m; i++) {
      double sum = 0;  // op(A)(i, l) = A(l, i), stored column-major (k, m)
      for (int l = 0; l < g.k; l++)
        sum += (double)llm::fp8_to_float(a_codes[(size_t)i * g.k + l], llm::Fp8Format::e4m3) *
               llm::fp8_to_float(b_codes[(size_t)j * g.k + l], llm::Fp8Format::e5m2);
      EXPECT_EQ(out[(size_t)j * g.m + i], (float)(sum * 0.125 * 0.25)) << i << "," << j;
    }
}

// Every layout but TN is refused for FP8, as cuBLASLt documents ("A must be
// transposed and B non-transposed"); the same layouts in bf16 are accepted.
TEST_F(EmulatedCublasLtFp8, RefusesEveryLayoutButTn) {
  const std::pair<cublasOperation_t, cublasOperation_t> layouts[] = {
      {CUBLAS_OP_N, CUBLAS_OP_N}, {CUBLAS_OP_N, CUBLAS_OP_T}, {CUBLAS_OP_T, CUBLAS_OP_T}};
  for (auto [ta, tb] : layouts) {
    Fp8Gemm g;
    g.trans_a = ta, g.trans_b = tb;
    cublasLtMatmulAlgo_t algo;
    EXPECT_EQ(g.plan(handle_, &algo), CUBLAS_STATUS_NOT_SUPPORTED) << ta << tb;
    Fp8Gemm bf16 = g;
    bf16.a_type = bf16.b_type = CUDA_R_16BF;
    EXPECT_EQ(bf16.plan(handle_, &algo), CUBLAS_STATUS_SUCCESS) << ta << tb;
  }
}

TEST_F(EmulatedCublasLtFp8, RefusesWhatHopperDoesNotRun) {
  auto status = [&](auto change) {
    Fp8Gemm g;
    change(g);
    cublasLtMatmulAlgo_t algo;
    return g.plan(handle_, &algo);
  };
  EXPECT_EQ(status([](Fp8Gemm& g) { g.a_type = g.b_type = CUDA_R_8F_E5M2; }),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(status([](Fp8Gemm& g) { g.b_type = CUDA_R_16BF; }), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(status([](Fp8Gemm& g) { g.d_type = CUDA_R_8F_E4M3; }), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(status([](Fp8Gemm& g) { g.k = 24; }), CUBLAS_STATUS_NOT_SUPPORTED);  // k % 16
  EXPECT_EQ(status([](Fp8Gemm& g) { g.m = 10; }), CUBLAS_STATUS_NOT_SUPPORTED);  // 40-byte D column
  EXPECT_EQ(status([](Fp8Gemm& g) { g.alignment = 8; }), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(status([](Fp8Gemm& g) { g.d_type = CUDA_R_16BF; }), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(status([](Fp8Gemm& g) { g.a_type = CUDA_R_8F_E5M2; }), CUBLAS_STATUS_SUCCESS);
}

// Scales are device pointers of FP8 GEMMs only: a host pointer is refused when
// set, and a bf16 GEMM with a scale pointer is refused by the heuristic.
TEST_F(EmulatedCublasLtFp8, ScalePointersAreFp8AndDeviceOnly) {
  Fp8Gemm bf16;
  bf16.a_type = bf16.b_type = CUDA_R_16BF;
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(bf16.plan(handle_, &algo), CUBLAS_STATUS_SUCCESS);
  const float host_scale = 1.0f;
  const float* host = &host_scale;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(bf16.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &host,
                                           sizeof host),
            CUBLAS_STATUS_INVALID_VALUE);
  const float* device = device_copy(std::vector<float>{1.0f});
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(bf16.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &device,
                                           sizeof device),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, bf16.desc, bf16.a, bf16.b, bf16.d, bf16.d,
                                           preference, 1, &result, &returned),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulPreferenceDestroy(preference);
}

}  // namespace
