// Op cases of the FP8 linear layers (model/kernels/fp8_matmul.h) on their
// rows (see op_harness.h):
//   cast       (bf16 rows) the amax is the largest |x|, the scale the top
//              binade's, every decoded code within half an fp8 ulp (or half
//              the subnormal quantum) of x, the transposed codes the same
//              codes; a NaN gives a NaN amax and scale 1; cuda: the CPU
//              twin's bits (codes, transposed codes, scale), alone or both;
//   gemm       (every row) against a double loop over the same codes: the sum
//              of exact products within the fp32 reassociation bound, times
//              the inverse scales, plus c; cuda: the CPU twin within two
//              reassociation bounds, the tensor cores' narrower sums and two
//              bf16 ulps;
//   quantized  (bf16 rows) the three steps on bf16 x and W against the fp32
//              product x W^T, within the bound e4m3's (e5m2's) rounding allows.
// Shapes on cuda rows are multiples of 16 where cuBLASLt's FP8 GEMM needs it.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/fp8.h"
#include "test/op_harness.h"

namespace llm::op_test {
namespace {

using Codes = std::vector<uint8_t>;
constexpr double kFloatEpsilon = 0x1p-23;
constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

const char* name_of(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

// Half an ulp relative to the value (normal range) and half the subnormal
// quantum (absolute), of the format's codes.
double half_ulp(Fp8Format f) { return std::ldexp(1.0, -fp8_traits(f).mantissa_bits - 1); }
double half_subnormal_quantum(Fp8Format f) {
  const Fp8Traits t = fp8_traits(f);
  return std::ldexp(1.0, -t.bias - t.mantissa_bits);
}

// bf16 values of log-uniform magnitude over [2^lo, 2^hi), random signs, a
// few zeros: after scaling, some land among the format's subnormals.
Floats spread_values(size_t n, std::mt19937& rng, int lo, int hi) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  Floats x(n);
  for (float& v : x) {
    v = unit(rng) < 0.02f ? 0.0f : std::ldexp(1.0f + unit(rng), lo + (int)(unit(rng) * (hi - lo)));
    if (unit(rng) < 0.5f) v = -v;
    v = to_float(to_bf16(v));
  }
  return x;
}

struct Quantized {
  Fp8Scale scale;
  Codes codes, codes_t;
};

// The amax, codes and transposed codes of x (rows, cols) on `backend`;
// `which`: 3 both, 1 row-major only, 2 transposed only.
Quantized quantize_on(const Backend& backend, const Floats& x, int rows, int cols, Fp8Format format,
                      size_t offset, int which = 3) {
  const size_t n = x.size();
  Buffer<Bf16> xb(backend, to_bf16s(x), offset);
  Buffer<Fp8Scale> sb(backend, {Fp8Scale{kNaN, kNaN, kNaN}});
  Buffer<uint8_t> codes(backend, Codes(n, 0x55), offset), codes_t(backend, Codes(n, 0x55), offset);
  backend.fp8_amax_scale(sb.get(), xb.get(), n, format);
  backend.fp8_cast_transpose((which & 1) ? codes.get() : nullptr,
                             (which & 2) ? codes_t.get() : nullptr, xb.get(), rows, cols, sb.get(),
                             format);
  Quantized q{sb.download()[0], codes.download(), codes_t.download()};
  EXPECT_TRUE(xb.guards_intact() && sb.guards_intact() && codes.guards_intact() &&
              codes_t.guards_intact())
      << "a write outside the outputs";
  return q;
}

void expect_same_scale(const Fp8Scale& a, const Fp8Scale& b, const std::string& what) {
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << what << ": amax " << a.amax << " vs " << b.amax
                                              << ", scale " << a.scale << " vs " << b.scale;
}

constexpr RowShape kCpuCastShapes[] = {{1, 1}, {7, 13}, {37, 45}};
// Tiles cut unevenly, in runs of 4 elements (64 x 96, 100 x 132) and of one;
// 1100 x 2048 is more than one grid-stride pass of the amax's 16-byte packs,
// 300 x 257 (and every offset: unaligned) more than one of its single elements.
constexpr RowShape kCudaCastShapes[] = {{1, 1},     {7, 13},    {37, 45},    {64, 96},
                                        {100, 132}, {300, 257}, {1100, 2048}};

void fp8_cast(const OpRow& row) {
  std::mt19937 rng(44);
  for (const RowShape& s : shapes_for(row, kCpuCastShapes, kCudaCastShapes))
    for (Fp8Format format : kFormats)
      for (size_t offset : offsets_for(row)) {
        const std::string what = std::string(name_of(format)) + " " + std::to_string(s.N) + "x" +
                                 std::to_string(s.C) + " offset " + std::to_string(offset);
        const Floats x = spread_values((size_t)s.N * s.C, rng, -24, 3);
        const Quantized q = quantize_on(row.backend(), x, s.N, s.C, format, offset);
        if (row.cuda()) {
          const Quantized twin = quantize_on(backend_cpu(), x, s.N, s.C, format, 0);
          expect_same_scale(q.scale, twin.scale, what);
          expect_identical(q.codes, twin.codes, what + " codes");
          expect_identical(q.codes_t, twin.codes_t, what + " transposed codes");
          if (offset != 0 || format != Fp8Format::e4m3) continue;  // one layout each suffices
          const Quantized rows_only = quantize_on(row.backend(), x, s.N, s.C, format, offset, 1);
          const Quantized t_only = quantize_on(row.backend(), x, s.N, s.C, format, offset, 2);
          expect_identical(rows_only.codes, twin.codes, what + " codes alone");
          expect_identical(t_only.codes_t, twin.codes_t, what + " transposed codes alone");
          continue;
        }
        double amax = 0;
        for (float v : x) amax = std::max(amax, (double)std::fabs(v));
        EXPECT_EQ((double)q.scale.amax, amax) << what;
        // The scale puts amax in the top binade: amax * scale in (max / 2, max].
        const double top = amax * q.scale.scale, max_value = fp8_traits(format).max_value;
        if (amax > 0) {
          EXPECT_TRUE(top <= max_value && top > max_value / 2) << what << ": " << top;
        }
        EXPECT_EQ((double)q.scale.scale * q.scale.inverse, 1.0) << what;
        Doubles decoded(x.size()), bound(x.size());
        for (size_t i = 0; i < x.size(); i++) {
          decoded[i] = (double)fp8_to_float(q.codes[i], format) * q.scale.inverse;
          bound[i] = std::max(half_ulp(format) * std::fabs(x[i]),
                              half_subnormal_quantum(format) * q.scale.inverse);
        }
        expect_within(decoded, to_doubles(x), bound, what + " decoded codes");
        for (int r = 0; r < s.N; r++)
          for (int c = 0; c < s.C; c++)
            ASSERT_EQ(q.codes_t[(size_t)c * s.N + r], q.codes[(size_t)r * s.C + c]) << what;
      }
  // A NaN anywhere: the amax is NaN and the scale 1 (the loss shows the NaN).
  Floats x = spread_values(64, rng, -3, 3);
  x[17] = kNaN;
  const Quantized q = quantize_on(row.backend(), x, 8, 8, Fp8Format::e4m3, 0);
  EXPECT_TRUE(std::isnan(q.scale.amax));
  EXPECT_EQ(q.scale.scale, 1.0f);
  EXPECT_EQ(q.scale.inverse, 1.0f);
}

struct GemmShape {
  int M, N, K;
};
constexpr GemmShape kCpuGemmShapes[] = {{1, 1, 1}, {7, 5, 13}, {33, 9, 70}};
constexpr GemmShape kCudaGemmShapes[] = {{1, 16, 16}, {7, 16, 32}, {33, 48, 64}, {100, 96, 384}};

// Random finite codes of `format`.
Codes random_codes(size_t n, Fp8Format format, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  Codes codes(n);
  for (uint8_t& c : codes) {
    do c = (uint8_t)byte(rng);
    while (!std::isfinite(fp8_to_float(c, format)));
  }
  return codes;
}

struct GemmRun {
  Fp8Format a_format, b_format;
  Codes a, b;
  Fp8Scale a_scale, b_scale;
  Floats c;  // empty: no addend
};

// out on `backend`: for float with an addend, c is out itself (accumulation).
template <class T>
Floats gemm_on(const Backend& backend, const GemmRun& g, const GemmShape& s) {
  Buffer<uint8_t> a(backend, g.a), b(backend, g.b);
  Buffer<Fp8Scale> sa(backend, {g.a_scale}), sb(backend, {g.b_scale});
  const size_t out_count = (size_t)s.M * s.N;
  constexpr bool accumulate = std::is_same_v<T, float>;
  Buffer<T> out(backend, accumulate && !g.c.empty() ? stored<T>(g.c) : nan_filled<T>(out_count));
  Buffer<T> c(backend, g.c.empty() ? std::vector<T>{} : stored<T>(g.c));
  const T* addend = g.c.empty() ? nullptr : accumulate ? out.get() : c.get();
  backend.ops<T>().fp8_gemm(out.get(), addend, a.get(), g.a_format, sa.get(), b.get(), g.b_format,
                            sb.get(), s.M, s.N, s.K);
  EXPECT_TRUE(out.guards_intact() && c.guards_intact()) << "a write outside the output";
  return to_floats(out.download());
}

template <class T>
void fp8_gemm_case(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(8);
  const std::pair<Fp8Format, Fp8Format> pairs[] = {{Fp8Format::e4m3, Fp8Format::e4m3},
                                                   {Fp8Format::e5m2, Fp8Format::e4m3},
                                                   {Fp8Format::e4m3, Fp8Format::e5m2}};
  for (const GemmShape& s : shapes_for(row, kCpuGemmShapes, kCudaGemmShapes))
    for (auto [fa, fb] : pairs)
      for (bool with_c : {false, true}) {
        const std::string what = std::string(name_of(fa)) + " x " + name_of(fb) +
                                 " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                                 " K=" + std::to_string(s.K) + (with_c ? " + c" : "");
        GemmRun g{fa,
                  fb,
                  random_codes((size_t)s.M * s.K, fa, rng),
                  random_codes((size_t)s.N * s.K, fb, rng),
                  Fp8Scale{1, 0x1p8f, 0x1p-8f},
                  Fp8Scale{1, 0x1p12f, 0x1p-12f},
                  {}};
        if (with_c) g.c = random_bf16_values((size_t)s.M * s.N, rng, -2.0f, 2.0f);
        const Floats out = gemm_on<T>(row.backend(), g, s);
        // The double loop: exact products and sums, scaled, plus c.
        const double factor = (double)g.a_scale.inverse * g.b_scale.inverse;
        Doubles expected((size_t)s.M * s.N), magnitude((size_t)s.M * s.N);
        for (int m = 0; m < s.M; m++)
          for (int n = 0; n < s.N; n++) {
            double sum = 0, abs_sum = 0;
            for (int k = 0; k < s.K; k++) {
              const double p = (double)fp8_to_float(g.a[(size_t)m * s.K + k], fa) *
                               fp8_to_float(g.b[(size_t)n * s.K + k], fb);
              sum += p;
              abs_sum += std::fabs(p);
            }
            const size_t i = (size_t)m * s.N + n;
            const double c = with_c ? g.c[i] : 0.0;
            expected[i] = factor * sum + c;
            magnitude[i] = factor * abs_sum + std::fabs(c);
          }
        // Every product of two fp8 values is exact in fp32, so only the sum
        // rounds: 4 sqrt(K) eps of the sum of |terms| bounds its random walk
        // with a wide margin (op_cases_matmul.cpp); one bf16 rounding adds
        // half an ulp, 2^-8 of the result.
        // On a GPU, Hopper's FP8 tensor cores add the products of each
        // K-step (32 terms) keeping about 14 significant bits (DeepSeek-V3's
        // report, section 3.3.2, measured "around 14 bits" on an H800), and
        // cuBLASLt adds the steps' sums in fp32. Each of a step's at most
        // min(K, 32) additions is then off by at most 2^-13 of the step's
        // sum of |terms|: in all, min(K, 32) 2^-13 of the magnitude. (An H200,
        // 2026-11-27: errors up to 2^-14.6 of it at K = 16, where the fp32
        // bound alone was 2^-17.)
        const int orders = row.cuda() ? 2 : 1;  // cuda: both sides' reassociations
        // The emulated cuBLASLt sums in fp32: it keeps the fp32 bound alone.
        const double tensor_core = row.cuda() && !kCudaEmulated ? std::min(s.K, 32) * 0x1p-13 : 0.0;
        Doubles bound(expected.size());
        for (size_t i = 0; i < bound.size(); i++)
          bound[i] = (orders * 4.0 * std::sqrt((double)s.K + 1) * kFloatEpsilon + tensor_core) *
                         magnitude[i] +
                     (bf16 ? orders * 0x1p-8 * std::fabs(expected[i]) : 0.0);
        if (row.cuda()) {
          expect_within(to_doubles(out), to_doubles(gemm_on<T>(backend_cpu(), g, s)), bound,
                        what + " vs the CPU twin");
        } else {
          expect_within(to_doubles(out), expected, bound, what + " vs the double loop");
          expect_identical(gemm_on<T>(row.backend(), g, s), out, what + ", repeat");
        }
      }
}

// The three steps on bf16 x (N, K) and W (OC, K) against the exact x W^T:
// each operand's code is within e = max(u |v|, q / scale) of v (u half an
// ulp, q half the subnormal quantum), so each product within |x| e_w +
// |w| e_x + e_x e_w of the exact one; on top, the fp32 sum's reassociation
// and one bf16 rounding.
void fp8_quantized_linear(const OpRow& row) {
  std::mt19937 rng(3);
  const GemmShape s = row.cuda() ? GemmShape{40, 48, 64} : GemmShape{23, 11, 37};
  for (Fp8Format x_format : kFormats) {
    const Floats x = random_bf16_values((size_t)s.M * s.K, rng, -1.0f, 1.0f);
    const Floats w = random_bf16_values((size_t)s.N * s.K, rng, -0.5f, 0.5f);
    const Quantized qx = quantize_on(row.backend(), x, s.M, s.K, x_format, 0);
    const Quantized qw = quantize_on(row.backend(), w, s.N, s.K, Fp8Format::e4m3, 0);
    GemmRun g{x_format, Fp8Format::e4m3, qx.codes, qw.codes, qx.scale, qw.scale, {}};
    const Floats out = gemm_on<Bf16>(row.backend(), g, s);
    Doubles expected((size_t)s.M * s.N), bound((size_t)s.M * s.N);
    auto error_of = [](double v, Fp8Format f, const Fp8Scale& sc) {
      return std::max(half_ulp(f) * std::fabs(v), half_subnormal_quantum(f) * sc.inverse);
    };
    for (int m = 0; m < s.M; m++)
      for (int n = 0; n < s.N; n++) {
        double sum = 0, abs_sum = 0, quantization = 0;
        for (int k = 0; k < s.K; k++) {
          const double xv = x[(size_t)m * s.K + k], wv = w[(size_t)n * s.K + k];
          const double ex = error_of(xv, x_format, qx.scale);
          const double ew = error_of(wv, Fp8Format::e4m3, qw.scale);
          sum += xv * wv;
          abs_sum += (std::fabs(xv) + ex) * (std::fabs(wv) + ew);
          quantization += std::fabs(xv) * ew + std::fabs(wv) * ex + ex * ew;
        }
        const size_t i = (size_t)m * s.N + n;
        expected[i] = sum;
        bound[i] = quantization + 4.0 * std::sqrt((double)s.K) * kFloatEpsilon * abs_sum +
                   0x1p-8 * (std::fabs(sum) + quantization);
      }
    expect_within(to_doubles(out), expected, bound,
                  std::string(name_of(x_format)) + " x e4m3 against the fp32 product");
  }
}

}  // namespace

std::vector<OpCase> fp8_cases() {
  return {
      {"fp8", "cast", kBf16Rows, {"fp8_amax_scale", "fp8_cast_transpose"}, fp8_cast},
      {"fp8", "gemm", kAllRows, {"fp8_gemm"}, LLM_BY_DTYPE(fp8_gemm_case)},
      {"fp8",
       "quantized_linear",
       kBf16Rows,
       {"fp8_amax_scale", "fp8_cast_transpose", "fp8_gemm"},
       fp8_quantized_linear},
  };
}

}  // namespace llm::op_test
