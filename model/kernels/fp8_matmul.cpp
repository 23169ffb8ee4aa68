// FP8 linear layers on the CPU: the reference the CUDA twin is tested
// against. The amax is a maximum over bf16 magnitude bits (an integer maximum:
// its result does not depend on the order, and a NaN, whose bits exceed every
// number's, makes the amax NaN and the scale 1); the cast is one fp32 multiply
// by 2^k (exact) and the format's rounding (base/fp8.h); the GEMM decodes
// the codes to fp32 (exact) chunk by chunk of a's rows, runs the fp32 GEMM
// (cpu_gemm.h) and applies the inverse scales and c in one rounding, as
// cuBLASLt's epilogue does: D = (a_inverse * b_inverse) * sum + c. The sum is
// fp32 for both accumulations (the tensor cores' narrower fast sums are not
// modelled: the CPU twin is the exact reference both are measured against).
#include "model/kernels/fp8_matmul.h"

#include <algorithm>
#include <array>
#include <type_traits>

#include "model/kernels/cpu_gemm.h"
#include "model/kernels/cpu_scratch.h"

namespace llm::cpu {

namespace {

constexpr size_t kChunkFloats = size_t{1} << 22;  // a chunk's widened rows: 16 MiB of fp32

// The value of each of the 256 codes of `format`.
const std::array<float, 256>& code_values(Fp8Format format) {
  static const auto table = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int f = 0; f < 2; f++)
      for (int code = 0; code < 256; code++)
        t[f][code] = fp8_to_float(static_cast<uint8_t>(code), static_cast<Fp8Format>(f));
    return t;
  }();
  return table[static_cast<int>(format)];
}

enum ScratchRole { kA, kB, kProduct, kScratchRoles };
struct Fp8Scratch;

// The codes of x (rows, cols) decoded into this thread's scratch `role`.
float* decoded(ScratchRole role, const uint8_t* x, size_t n, Fp8Format format) {
  float* out = thread_scratch<Fp8Scratch, kScratchRoles>(role, n);
  const std::array<float, 256>& values = code_values(format);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = values[x[i]];
  return out;
}

}  // namespace

void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format) {
  uint16_t largest = 0;
#pragma omp parallel for simd schedule(static) reduction(max : largest)
  for (size_t i = 0; i < n; i++) largest = std::max<uint16_t>(largest, x[i].bits & 0x7fffu);
  *scale = fp8_scale_from_amax(bf16_to_float(largest), format);
}

void fp8_scale_from_row_amax(Fp8Scale* scale, const float* row_amax, int rows, Fp8Format format) {
  *scale =
      fp8_scale_from_amax(fp8_amax_of(row_amax, static_cast<size_t>(std::max(rows, 0))), format);
}

void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format) {
  const float s = scale->scale;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      uint8_t code;
      fp8_encode_row(&code, x + (size_t)r * cols + c, 1, s, format);
      if (codes) codes[(size_t)r * cols + c] = code;
      if (codes_t) codes_t[(size_t)c * rows + r] = code;
    }
}

void fp8_cast_amax(uint8_t* codes, float* amax, const Bf16* x, size_t n, const Fp8Scale* scale,
                   Fp8Format format) {
  const float s = scale->scale;
  uint32_t largest = fp8_magnitude_bits(*amax);
#pragma omp parallel for schedule(static) reduction(max : largest)
  for (size_t i = 0; i < n; i++) {
    largest = std::max(largest, fp8_magnitude_bits(x[i]));
    fp8_encode_row(codes + i, x + i, 1, s, format);
  }
  *amax = std::bit_cast<float>(largest);
}

void fp8_amax_fold(float* amax, const float* amaxes, int count) {
  const float folded = fp8_amax_of(amaxes, static_cast<size_t>(std::max(count, 0)));
  *amax = std::bit_cast<float>(std::max(fp8_magnitude_bits(*amax), fp8_magnitude_bits(folded)));
}

template <class T>
void fp8_gemm(T* out, const T* c, const uint8_t* a, Fp8Format a_format, const Fp8Scale* a_scale,
              const uint8_t* b, Fp8Format b_format, const Fp8Scale* b_scale, int M, int N, int K,
              Fp8Accumulation /*accumulation: fp32 sums either way*/) {
  if (M <= 0 || N <= 0) return;
  const float factor = a_scale->inverse * b_scale->inverse;  // a power of two: exact
  const float* b32 = decoded(kB, b, (size_t)N * K, b_format);
  const int rows = std::max(1, std::min(M, (int)(kChunkFloats / (size_t)std::max({K, N, 1}))));
  for (int m0 = 0; m0 < M; m0 += rows) {
    const int m = std::min(rows, M - m0);
    const float* a32 = decoded(kA, a + (size_t)m0 * K, (size_t)m * K, a_format);
    float* sum = thread_scratch<Fp8Scratch, kScratchRoles>(kProduct, (size_t)m * N);
    if (K > 0)
      gemm(
          GemmArgs<float, float>{Op::kNone, Op::kTranspose, m, N, K, a32, K, b32, K, 0.0f, sum, N});
    else
      std::fill(sum, sum + (size_t)m * N, 0.0f);
    T* out_rows = out + (size_t)m0 * N;
    const T* c_rows = c ? c + (size_t)m0 * N : nullptr;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < (size_t)m * N; i++) {
      // c's sum is not "+ 0" when c is absent: -0 would become +0.
      const float scaled = factor * sum[i];
      store(out_rows + i, c_rows ? scaled + to_float(c_rows[i]) : scaled);
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(fp8_gemm);

}  // namespace llm::cpu
