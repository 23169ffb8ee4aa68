// tools/gpu_kit/probe_fp8_gemm.cu: which FP8 GEMMs cuBLASLt runs on this GPU.
//
// Why: on an H100 (cuBLASLt 13, 2026-11-27) every FP8 GEMM of
// model/kernels/matmul.cu failed in cublasLtMatmul with NOT_SUPPORTED,
// although cublasLtMatmulAlgoGetHeuristic had returned an algorithm, and
// the emulated cuBLASLt accepts the same calls. This program sets up the
// trainer's FP8 GEMM (TN, compute 32F, scale type 32F, A/B scale pointers
// set before the heuristic and 16-byte aligned, as base/fp8.h's Fp8Scale
// now keeps its inverse, bf16 D, the reduction-scheme mask and the alignment
// preferences matmul.cu sets) and then changes one thing at a time, among
// them the failing version's scale pointers (at +8 in the struct), so one
// run names the rule the emulation is missing.
//
// Build and run (CUDA 12.8 or 13, an sm_90 GPU):
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/probe_fp8_gemm
//        tools/gpu_kit/probe_fp8_gemm.cu -lcublasLt
//   /tmp/probe_fp8_gemm
// (tools/gpu_kit/run_on_gpu.sh --steps fp8_probe builds and runs it.)
//
// For each variant it prints the heuristic's status and algorithm count, the
// status of cublasLtMatmul with the first algorithm, how many of the returned
// algorithms run, and the largest error against a float64 host product of
// the same codes (inputs are small integers and the scales powers of two, so
// only D's bf16 rounding separates them: the bound is 2^-8 relative). cuBLASLt's
// own log (level 1: errors) is printed under the variant that caused it, and
// the first variant's API trace (level 5) shows every attribute as cuBLASLt
// read it. Exit status: 0 when the trainer's variant runs and is right,
// 1 otherwise (the table says which variants do run).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_LT(call)                                                   \
  do {                                                                   \
    cublasStatus_t s_ = (call);                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cublasLtGetStatusString(s_));                         \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // matmul.cu's

// cuBLASLt's log lines since the last take_log().
std::string g_log;
void log_callback(int level, const char* function, const char* message) {
  g_log += "      [cublasLt " + std::to_string(level) + "] " + function + ": " + message + "\n";
}
std::string take_log() {
  std::string log;
  log.swap(g_log);
  return log;
}

uint32_t alignment_of(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  if (address == 0) return 256;
  const uintptr_t lowest = address & (~address + 1);
  return lowest >= 256 ? 256 : static_cast<uint32_t>(lowest);
}

enum class ScalePlace { none, struct_offset8, offset16, offset0 };

struct Variant {
  const char* name;
  int M = 256, N = 256, K = 256;  // out (M, N) = a (M, K) @ b (N, K)^T, row-major
  cudaDataType_t d_type = CUDA_R_16BF;
  cudaDataType_t b_type = CUDA_R_8F_E4M3;  // the row operand b (the weight)
  ScalePlace scales = ScalePlace::offset16;
  bool scales_before_heuristic = true;
  bool reduction_mask = true;  // matmul.cu sets it for a bf16 D
  bool alignment_preferences = true;
  bool beta_one = false;  // D = product + C, C != D
};

struct Result {
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  int algorithms = 0;
  cublasStatus_t first = CUBLAS_STATUS_NOT_INITIALIZED;
  int running = 0;
  double error = -1;  // largest |D - ref| / (|ref| + 1), of the first algorithm that ran
};

float code_value(uint8_t code, cudaDataType_t type) {
  __nv_fp8_storage_t s = code;
  const __half_raw h = __nv_cvt_fp8_to_halfraw(s, type == CUDA_R_8F_E4M3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}

std::vector<uint8_t> random_codes(size_t n, cudaDataType_t type, std::mt19937& rng) {
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<uint8_t> codes(n);
  for (auto& c : codes)
    c = __nv_cvt_float_to_fp8((float)small(rng), __NV_SATFINITE,
                              type == CUDA_R_8F_E4M3 ? __NV_E4M3 : __NV_E5M2);
  return codes;
}

Result run_variant(cublasLtHandle_t handle, void* workspace, const Variant& v, bool trace) {
  std::mt19937 rng(1234);
  const cudaDataType_t a_type = CUDA_R_8F_E4M3;
  const auto a = random_codes((size_t)v.M * v.K, a_type, rng);
  const auto b = random_codes((size_t)v.N * v.K, v.b_type, rng);
  std::vector<float> c_values((size_t)v.M * v.N);
  for (auto& x : c_values) x = (float)(int)(rng() % 5) - 2.0f;
  const size_t d_bytes = (size_t)v.M * v.N * (v.d_type == CUDA_R_32F ? 4 : 2);
  std::vector<uint8_t> c_host(d_bytes);
  for (size_t i = 0; i < c_values.size(); i++) {
    if (v.d_type == CUDA_R_32F)
      reinterpret_cast<float*>(c_host.data())[i] = c_values[i];
    else
      reinterpret_cast<__nv_bfloat16*>(c_host.data())[i] = __float2bfloat16(c_values[i]);
  }
  const float a_scale = 0.5f, b_scale = 0.25f;

  uint8_t *da, *db, *dd, *dc;
  float* scale_block;  // 64 floats; the scales at the variant's offsets
  CHECK_CUDA(cudaMalloc(&da, a.size()));
  CHECK_CUDA(cudaMalloc(&db, b.size()));
  CHECK_CUDA(cudaMalloc(&dd, d_bytes));
  CHECK_CUDA(cudaMalloc(&dc, d_bytes));
  CHECK_CUDA(cudaMalloc(&scale_block, 64 * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dc, c_host.data(), d_bytes, cudaMemcpyHostToDevice));
  // The failing version's Fp8Scale was {amax, scale, inverse}, 12 bytes: its
  // scale pointers were at +8 and +20 of an array; the current one aligns
  // inverse to 16 bytes (+16 and +32 of a 32-byte struct's array).
  int a_at = 0, b_at = 0;
  switch (v.scales) {
    case ScalePlace::struct_offset8:
      a_at = 2, b_at = 5;
      break;
    case ScalePlace::offset16:
      a_at = 4, b_at = 8;
      break;
    case ScalePlace::offset0:
      a_at = 0, b_at = 32;
      break;
    case ScalePlace::none:
      break;
  }
  std::vector<float> block(64, 0.0f);
  block[a_at] = a_scale;
  block[b_at] = b_scale;
  CHECK_CUDA(
      cudaMemcpy(scale_block, block.data(), block.size() * sizeof(float), cudaMemcpyHostToDevice));
  const float* a_scale_ptr = v.scales == ScalePlace::none ? nullptr : scale_block + a_at;
  const float* b_scale_ptr = v.scales == ScalePlace::none ? nullptr : scale_block + b_at;

  // cuBLASLt's terms (column-major): D^T (N, M) = op_T(b^T) @ a^T; its A is
  // our b, its B our a, both K-contiguous (the TN form).
  const int m = v.N, n = v.M, k = v.K;
  const float alpha = 1.0f, beta = v.beta_one ? 1.0f : 0.0f;
  void* c_ptr = v.beta_one ? (void*)dc : (void*)dd;

  if (trace) cublasLtLoggerSetLevel(5);
  cublasLtMatmulDesc_t desc;
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  // Its A scales its A (our b), its B our a.
  auto set_scales = [&] {
    if (v.scales == ScalePlace::none) return;
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                            &b_scale_ptr, sizeof b_scale_ptr));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                            &a_scale_ptr, sizeof a_scale_ptr));
  };
  if (v.scales_before_heuristic) set_scales();
  cublasLtMatrixLayout_t la, lb, ld;
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, v.b_type, k, m, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, a_type, k, n, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&ld, v.d_type, m, n, m));

  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof workspace_bytes));
  if (v.alignment_preferences) {
    const uint32_t align[4] = {alignment_of(db), alignment_of(da), alignment_of(c_ptr),
                               alignment_of(dd)};
    const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
      CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &align[i], sizeof align[i]));
  }
  if (v.reduction_mask) {
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &mask, sizeof mask));
  }
  Result r;
  cublasLtMatmulHeuristicResult_t results[16] = {};
  r.heuristic = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 16, results,
                                               &r.algorithms);
  if (!v.scales_before_heuristic) set_scales();
  if (trace) cublasLtLoggerSetLevel(1);

  std::vector<uint8_t> d_host(d_bytes);
  for (int i = 0; r.heuristic == CUBLAS_STATUS_SUCCESS && i < r.algorithms; i++) {
    CHECK_CUDA(cudaMemset(dd, 0xff, d_bytes));  // NaN in both types: unwritten shows
    const cublasStatus_t s =
        cublasLtMatmul(handle, desc, &alpha, db, la, da, lb, &beta, c_ptr, ld, dd, ld,
                       &results[i].algo, workspace, kWorkspaceBytes, 0);
    if (i == 0) r.first = s;
    if (s != CUBLAS_STATUS_SUCCESS) continue;
    CHECK_CUDA(cudaDeviceSynchronize());
    r.running++;
    if (r.error >= 0) continue;
    CHECK_CUDA(cudaMemcpy(d_host.data(), dd, d_bytes, cudaMemcpyDeviceToHost));
    double worst = 0;
    // At most 64 rows against the float64 sum: every row of the 124M shape
    // took the host past the step's time limit (an H200, 2026-11-27).
    const int row_step = v.M > 64 ? v.M / 64 : 1;
    for (int row = 0; row < v.M; row += row_step)
      for (int col = 0; col < v.N; col++) {
        double sum = 0;
        for (int l = 0; l < v.K; l++)
          sum += (double)code_value(a[(size_t)row * v.K + l], a_type) *
                 code_value(b[(size_t)col * v.K + l], v.b_type);
        double ref = sum * a_scale * b_scale + (v.beta_one ? c_values[(size_t)row * v.N + col] : 0);
        const size_t at = (size_t)row * v.N + col;
        const double got =
            v.d_type == CUDA_R_32F
                ? reinterpret_cast<float*>(d_host.data())[at]
                : __bfloat162float(reinterpret_cast<__nv_bfloat16*>(d_host.data())[at]);
        const double err = std::isfinite(got) ? std::fabs(got - ref) / (std::fabs(ref) + 1) : 1e30;
        worst = std::max(worst, err);
      }
    r.error = worst;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(da), cudaFree(db), cudaFree(dd), cudaFree(dc), cudaFree(scale_block);
  return r;
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s (sm_%d%d), cuBLASLt %zu, CUDA runtime %d\n", prop.name, prop.major,
              prop.minor, cublasLtGetVersion(), CUDART_VERSION);
  cublasLtHandle_t handle;
  CHECK_LT(cublasLtCreate(&handle));
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, kWorkspaceBytes));
  CHECK_LT(cublasLtLoggerSetCallback(log_callback));
  CHECK_LT(cublasLtLoggerSetLevel(1));

  std::vector<Variant> variants;
  auto add = [&](const char* name, auto change) {
    Variant v;
    v.name = name;
    change(v);
    variants.push_back(v);
  };
  add("the trainer's (scales 16-byte aligned, set before the heuristic)", [](Variant&) {});
  add("scales at +8, as an Fp8Scale's inverse was on 2026-11-27",
      [](Variant& v) { v.scales = ScalePlace::struct_offset8; });
  add("scales at +8, set after the heuristic (the first version)", [](Variant& v) {
    v.scales = ScalePlace::struct_offset8;
    v.scales_before_heuristic = false;
  });
  add("scales 256-byte aligned", [](Variant& v) { v.scales = ScalePlace::offset0; });
  add("no scale pointers", [](Variant& v) { v.scales = ScalePlace::none; });
  add("no reduction-scheme mask", [](Variant& v) { v.reduction_mask = false; });
  add("no alignment preferences", [](Variant& v) { v.alignment_preferences = false; });
  add("neither mask nor alignment preferences", [](Variant& v) {
    v.reduction_mask = false;
    v.alignment_preferences = false;
  });
  add("fp32 D", [](Variant& v) {
    v.d_type = CUDA_R_32F;
    v.reduction_mask = false;
  });
  add("e5m2 weight operand (a gradient GEMM's types)",
      [](Variant& v) { v.b_type = CUDA_R_8F_E5M2; });
  add("beta 1, C != D", [](Variant& v) { v.beta_one = true; });
  add("M = 7 (rows not a multiple of 16)", [](Variant& v) { v.M = 7; });
  add("M = 1, N = K = 16 (the op test's first shape)",
      [](Variant& v) { v.M = 1, v.N = 16, v.K = 16; });
  add("gpu_124m's qkv shape, M = 16384, N = 1280, K = 768",
      [](Variant& v) { v.M = 16384, v.N = 1280, v.K = 768; });
  add("scales at +8, no mask, no alignment preferences", [](Variant& v) {
    v.scales = ScalePlace::struct_offset8;
    v.reduction_mask = false;
    v.alignment_preferences = false;
  });

  int status = 1;
  std::printf("%-62s %-10s %5s %-16s %7s %10s\n", "variant", "heuristic", "algos", "first algo",
              "running", "max error");
  for (size_t i = 0; i < variants.size(); i++) {
    const Variant& v = variants[i];
    const Result r = run_variant(handle, workspace, v, i == 0);
    const bool right = r.error >= 0 && r.error <= 1.0 / 256;
    std::printf("%-62s %-10s %5d %-16s %7d %10.2e%s\n", v.name,
                r.heuristic == CUBLAS_STATUS_SUCCESS ? "ok" : cublasLtGetStatusString(r.heuristic),
                r.algorithms,
                r.first == CUBLAS_STATUS_SUCCESS ? "ok" : cublasLtGetStatusString(r.first),
                r.running, r.error, r.error > 1.0 / 256 ? "  WRONG" : "");
    const std::string log = take_log();
    if (!log.empty()) std::printf("%s", log.c_str());
    if (i == 0 && r.first == CUBLAS_STATUS_SUCCESS && right) status = 0;
  }
  cudaFree(workspace);
  cublasLtDestroy(handle);
  return status;
}
