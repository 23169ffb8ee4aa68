// Op cases of the matmul (out = inp @ weight^T; backward: dinp overwritten,
// dweight accumulated in fp32, dinp == nullptr computing only dweight; the
// residual forward out = inp @ weight^T + residual, in place or not) on
// every row (see op_harness.h): the reference and finite differences (cpu
// f32), the fp32 twin within one bf16 rounding (cpu bf16), the CPU twin within
// a reassociation bound built from each result's sum of |terms| (cuda); plus
// bit-identical repeats.
// Invariant: the matmuls go through oneDNN (or OpenBLAS) / cuBLASLt, whose kernels and
// splits depend on the machine and thread count, so no check assumes bits
// across thread counts; a repeat on one backend at one thread count gives the
// same bits, and the bf16 entry point is the fp32 one on widened operands.
// Where the CPU multiplies bf16 natively (cpu_gemm.h), the cases above run
// the widening path (forced), and one more checks the native path: the
// widened results within the bounds of another summation order, and repeats
// with the same bits.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/kernels/cpu_gemm.h"
#include "test/op_harness.h"

namespace llm::op_test {
namespace {

std::string describe(const MatmulShape& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " OC=" + std::to_string(s.OC);
}

// cpu rows: small enough for finite differences; the bf16 row adds a shape
// wide enough (N x OC beyond the kernel's ~4M-float chunk of fp32 scratch)
// that the rows are processed in several chunks, the last partial.
constexpr MatmulShape kCpuShapes[] = {{7, 13, 5}, {1, 1, 1}, {33, 17, 9}};
constexpr MatmulShape kCpuBf16ChunkedShape{250, 5, 40000};
// cuda rows: tiny, odd (not multiples of 8 or 16, so cuBLASLt takes its
// unaligned paths) and model-like shapes.
constexpr MatmulShape kCudaShapes[] = {{1, 1, 1},     {7, 13, 5},   {3, 1, 17},      {5, 17, 1},
                                       {64, 96, 160}, {33, 40, 24}, {100, 384, 1152}};

constexpr double kFloatEpsilon = 0x1p-23;  // fp32 ulp of 1
constexpr double kBf16Ulp = 0x1p-7;        // bf16 ulp of 1: 8 significant bits

// cuda: two fp32 evaluations of a sum of k products in different orders
// (cuBLASLt's tiles and split-K against OpenBLAS's kernels) differ by rounding
// errors that grow like sqrt(k) ulps of the partial sums; every partial sum is
// bounded by M = sum |term|. 4 sqrt(k) eps M leaves a wide margin over that
// random walk while a wrong or missing term (about M / k, far above eps M for
// our k) fails.
Doubles reassociation_bounds(const Doubles& magnitude, int k) {
  Doubles bound(magnitude.size());
  for (size_t i = 0; i < magnitude.size(); i++)
    bound[i] = 4.0 * std::sqrt((double)k) * kFloatEpsilon * magnitude[i];
  return bound;
}

// cuda bf16 outputs: the same plus two bf16 ulps of the result: the GPU and
// CPU round fp32 values that differ by the reassociation bound, which may
// straddle a bf16 rounding boundary (one ulp); the second ulp is margin. bf16
// products are exact in fp32, so nothing else differs.
Doubles bf16_result_bounds(const Doubles& magnitude, int k, const Doubles& expected) {
  Doubles bound = reassociation_bounds(magnitude, k);
  for (size_t i = 0; i < bound.size(); i++) bound[i] += 2.0 * kBf16Ulp * std::fabs(expected[i]);
  return bound;
}

// Sums of |products| of each GEMM result, the M of reassociation_bounds.
struct MatmulMagnitudes {
  Doubles out, dinp, dweight;  // dweight includes |prefill|
};

MatmulMagnitudes matmul_magnitudes(const Doubles& inp, const Doubles& weight, const Doubles& dout,
                                   const Doubles& dweight_prefill, int N, int C, int OC) {
  MatmulMagnitudes m{Doubles((size_t)N * OC, 0.0), Doubles((size_t)N * C, 0.0), Doubles()};
  m.dweight = dweight_prefill;
  for (double& x : m.dweight) x = std::fabs(x);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      const double dy = std::fabs(dout[(size_t)n * OC + o]);
      for (int c = 0; c < C; c++) {
        const double x = std::fabs(inp[(size_t)n * C + c]),
                     w = std::fabs(weight[(size_t)o * C + c]);
        m.out[(size_t)n * OC + o] += x * w;
        m.dinp[(size_t)n * C + c] += dy * w;
        m.dweight[(size_t)o * C + c] += dy * x;
      }
    }
  return m;
}

// The CPU's bf16 matmuls take the widening path while it lives (they may
// take the native one where the CPU has it otherwise).
class WidenedBf16Gemm {
 public:
  WidenedBf16Gemm() { cpu::set_bf16_gemm_native(false); }
  ~WidenedBf16Gemm() { cpu::set_bf16_gemm_native(true); }
  WidenedBf16Gemm(const WidenedBf16Gemm&) = delete;
  WidenedBf16Gemm& operator=(const WidenedBf16Gemm&) = delete;
};

std::vector<MatmulShape> matmul_shapes(const OpRow& row) {
  std::vector<MatmulShape> shapes = shapes_for(row, kCpuShapes, kCudaShapes);
  if (row.cpu() && row.dtype == Dtype::bf16) shapes.push_back(kCpuBf16ChunkedShape);
  return shapes;
}

// The forward (out pre-filled with NaN, overwritten) and the backward (dinp
// NaN, overwritten; dweight pre-filled, +=), then the backward again with
// dinp == nullptr. cpu f32: kForwardTolerance against the reference,
// kBackwardTolerance against finite differences, the second backward adding
// the gradient again; cpu bf16: both sides run sgemm on identical fp32 values
// over different row chunks: outputs within kOneRounding of fp32, dweight (fp32,
// summed chunk by chunk) within kReassociation; cuda: reassociation_bounds
// (bf16: bf16_result_bounds) against the CPU twin, out the same bits on a
// second run, and the dinp == nullptr dweight the same bits as with dinp.
template <class T>
void matmul_forward_backward(const OpRow& row) {
  const WidenedBf16Gemm widened_path;
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(row.cuda() ? (bf16 ? 102 : 101) : (bf16 ? 113 : 15));
  const Backend& be = row.backend();
  for (const MatmulShape& s : matmul_shapes(row)) {
    const auto [N, C, OC] = s;
    SCOPED_TRACE(describe(s));
    const Floats inp = random_values((size_t)N * C, rng, -1.0f, 1.0f, bf16);
    const Floats weight = random_values((size_t)OC * C, rng, -1.0f, 1.0f, bf16);
    const Floats dout = random_values((size_t)N * OC, rng, -1.0f, 1.0f, bf16);
    const Floats dweight_prefill =
        random_values(weight.size(), rng, -1.0f, 1.0f, bf16 && row.cpu());
    const std::vector<T> inp_t = stored<T>(inp), weight_t = stored<T>(weight),
                         dout_t = stored<T>(dout);

    Buffer<T> d_inp(be, inp_t), d_weight(be, weight_t), d_dout(be, dout_t);
    Buffer<T> d_out(be, nan_filled<T>((size_t)N * OC)), d_dinp(be, nan_filled<T>(inp.size()));
    Buffer<float> d_dweight(be, dweight_prefill);
    be.ops<T>().matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
    be.ops<T>().matmul_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                d_weight.get(), N, C, OC);
    const std::vector<T> out = d_out.download(), dinp = d_dinp.download();
    const Floats dweight = d_dweight.download();
    EXPECT_TRUE(d_out.guards_intact() && d_dinp.guards_intact() && d_dweight.guards_intact());
    // The same GEMMs again: out into NaN, and dweight from the prefill with dinp == nullptr.
    d_out.upload(nan_filled<T>(out.size()));
    be.ops<T>().matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
    expect_identical(d_out.download(), out, "out, second run");
    d_dweight.upload(row.cuda() ? dweight_prefill : dweight);
    be.ops<T>().matmul_backward(nullptr, d_dweight.get(), d_dout.get(), d_inp.get(), d_weight.get(),
                                N, C, OC);
    const Floats dweight_again = d_dweight.download();

    if (row.cuda()) {
      const MatmulMagnitudes magnitude =
          matmul_magnitudes(to_doubles(inp_t), to_doubles(weight_t), to_doubles(dout_t),
                            to_doubles(dweight_prefill), N, C, OC);
      std::vector<T> twin_out((size_t)N * OC), twin_dinp(inp.size());
      Floats twin_dweight = dweight_prefill;
      backend_cpu().ops<T>().matmul_forward(twin_out.data(), inp_t.data(), weight_t.data(), N, C,
                                            OC);
      backend_cpu().ops<T>().matmul_backward(twin_dinp.data(), twin_dweight.data(), dout_t.data(),
                                             inp_t.data(), weight_t.data(), N, C, OC);
      const Doubles expected_out = to_doubles(twin_out), expected_dinp = to_doubles(twin_dinp);
      expect_within(to_doubles(out), expected_out,
                    bf16 ? bf16_result_bounds(magnitude.out, C, expected_out)
                         : reassociation_bounds(magnitude.out, C),
                    "out");
      expect_within(to_doubles(dinp), expected_dinp,
                    bf16 ? bf16_result_bounds(magnitude.dinp, OC, expected_dinp)
                         : reassociation_bounds(magnitude.dinp, OC),
                    "dinp");
      // dweight is fp32: bf16 products are exact, so only the summation order differs.
      expect_within(to_doubles(dweight), to_doubles(twin_dweight),
                    reassociation_bounds(magnitude.dweight, N + 1), "dweight (+=)");
      expect_identical(dweight_again, dweight, "dweight with dinp == nullptr");
    } else if (bf16) {
      Floats out32((size_t)N * OC), dinp32(inp.size()), dweight32 = dweight_prefill;
      backend_cpu().f32.matmul_forward(out32.data(), inp.data(), weight.data(), N, C, OC);
      backend_cpu().f32.matmul_backward(dinp32.data(), dweight32.data(), dout.data(), inp.data(),
                                        weight.data(), N, C, OC);
      expect_close(out, out32, kOneRounding, "out");
      expect_close(dinp, dinp32, kOneRounding, "dinp (overwritten)");
      expect_close(dweight, dweight32, kReassociation, "dweight (+=)");
      backend_cpu().f32.matmul_backward(nullptr, dweight32.data(), dout.data(), inp.data(),
                                        weight.data(), N, C, OC);
      expect_close(dweight_again, dweight32, kReassociation, "dweight (+=, dinp null)");
    } else {
      const Vec x = to_doubles(inp), w = to_doubles(weight), dy = to_doubles(dout);
      expect_close(out, reference::matmul_forward(x, w, N, C, OC), kForwardTolerance, "out");
      const Vec grad_inp = finite_difference_gradient(
          [&](const Vec& xs) { return reference::matmul_forward(xs, w, N, C, OC); }, x, dy);
      const Vec grad_weight = finite_difference_gradient(
          [&](const Vec& ws) { return reference::matmul_forward(x, ws, N, C, OC); }, w, dy);
      expect_close(dinp, grad_inp, kBackwardTolerance, "dinp (overwritten)");
      const Vec expected_dweight = add(to_doubles(dweight_prefill), grad_weight);
      expect_close(dweight, expected_dweight, kBackwardTolerance, "dweight (+=)");
      // Without dinp only dweight is computed, still accumulating.
      expect_close(dweight_again, add(expected_dweight, grad_weight), kBackwardTolerance,
                   "dweight (+=, dinp null)");
    }
  }
}

// out = inp @ weight^T + residual, into a separate buffer (NaN-filled; the
// residual must stay unchanged) and in place (out == residual).
// cpu f32: the double reference (product + residual) within kForwardTolerance.
// cpu bf16: the fp32 twin on the same bf16-exact operands within kOneRounding,
// and, where the rows fit one chunk (the same sgemm on both sides), exactly
// that fp32 sum rounded once; the data must tell rounding once from rounding
// the product and then the sum (some element differs), else that check proves
// nothing. cuda: the CPU twin within the reassociation bound of C + 1 terms
// (the residual is one more), bf16 plus two ulps (bf16_result_bounds).
template <class T>
void matmul_forward_residual(const OpRow& row) {
  const WidenedBf16Gemm widened_path;
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(row.cuda() ? (bf16 ? 104 : 103) : (bf16 ? 116 : 115));
  const Backend& be = row.backend();
  size_t double_rounding_differs = 0;
  for (const MatmulShape& s : matmul_shapes(row)) {
    const auto [N, C, OC] = s;
    SCOPED_TRACE(describe(s));
    const bool one_chunk =
        (size_t)N * OC < kCpuBf16ChunkedShape.N * (size_t)kCpuBf16ChunkedShape.OC;
    const Floats inp = random_values((size_t)N * C, rng, -1.0f, 1.0f, bf16);
    const Floats weight = random_values((size_t)OC * C, rng, -1.0f, 1.0f, bf16);
    const Floats residual = random_values((size_t)N * OC, rng, -2.0f, 2.0f, bf16);
    const std::vector<T> inp_t = stored<T>(inp), weight_t = stored<T>(weight),
                         residual_t = stored<T>(residual);

    Buffer<T> d_inp(be, inp_t), d_weight(be, weight_t), d_residual(be, residual_t);
    Buffer<T> d_out(be, nan_filled<T>(residual.size()));
    be.ops<T>().matmul_forward_residual(d_out.get(), d_inp.get(), d_weight.get(), d_residual.get(),
                                        N, C, OC);
    const std::vector<T> out = d_out.download();
    expect_identical(d_residual.download(), residual_t, "residual (read only)");
    be.ops<T>().matmul_forward_residual(d_residual.get(), d_inp.get(), d_weight.get(),
                                        d_residual.get(), N, C, OC);
    const std::vector<T> in_place = d_residual.download();
    EXPECT_TRUE(d_out.guards_intact() && d_residual.guards_intact());

    if (row.cuda()) {
      Doubles magnitude =
          matmul_magnitudes(to_doubles(inp_t), to_doubles(weight_t), Doubles(residual.size(), 0.0),
                            Doubles(weight.size(), 0.0), N, C, OC)
              .out;
      for (size_t i = 0; i < magnitude.size(); i++)
        magnitude[i] += std::fabs(to_float(residual_t[i]));
      std::vector<T> twin(residual.size());
      backend_cpu().ops<T>().matmul_forward_residual(twin.data(), inp_t.data(), weight_t.data(),
                                                     residual_t.data(), N, C, OC);
      const Doubles expected = to_doubles(twin);
      const Doubles bound = bf16 ? bf16_result_bounds(magnitude, C + 1, expected)
                                 : reassociation_bounds(magnitude, C + 1);
      expect_within(to_doubles(out), expected, bound, "out");
      expect_within(to_doubles(in_place), expected, bound, "out (in place)");
    } else if (bf16) {
      Floats sum32 = residual, product32(residual.size());
      backend_cpu().f32.matmul_forward_residual(sum32.data(), inp.data(), weight.data(),
                                                sum32.data(), N, C, OC);
      expect_close(out, sum32, kOneRounding, "out");
      expect_close(in_place, sum32, kOneRounding, "out (in place)");
      if (one_chunk) {
        expect_fp32_rounded(out, sum32, "out");
        expect_fp32_rounded(in_place, sum32, "out (in place)");
      }
      backend_cpu().f32.matmul_forward(product32.data(), inp.data(), weight.data(), N, C, OC);
      for (size_t i = 0; i < residual.size(); i++) {
        const Bf16 twice = to_bf16(to_float(to_bf16(product32[i])) + residual[i]);
        double_rounding_differs += std::memcmp(&twice, &out[i], sizeof twice) != 0;
      }
    } else {
      const Vec expected =
          add(reference::matmul_forward(to_doubles(inp), to_doubles(weight), N, C, OC),
              to_doubles(residual));
      expect_close(out, expected, kForwardTolerance, "out");
      expect_close(in_place, expected, kForwardTolerance, "out (in place)");
    }
  }
  if (row.cpu() && bf16) {
    EXPECT_GT(double_rounding_differs, 0u) << "the data cannot tell one rounding from two";
  }
}

// The CPU's guarantee, at 1, 2 and 3 threads: a repeat gives the same bits,
// and the bf16 entry point is exactly the fp32 one on the widened operands,
// rounded once (one chunk of rows here, so the same sgemm calls).
void matmul_backward_repeats(const OpRow& row) {
  const WidenedBf16Gemm widened_path;
  std::mt19937 rng(114);
  const int N = 97, C = 70, OC = 45;
  const Floats inp = random_bf16_values((size_t)N * C, rng);
  const Floats weight = random_bf16_values((size_t)OC * C, rng);
  const Floats dout = random_bf16_values((size_t)N * OC, rng);
  const Bf16s inp16 = to_bf16s(inp), weight16 = to_bf16s(weight), dout16 = to_bf16s(dout);
  auto run_bf16 = [&] {
    Buffer<Bf16> d_inp(row.backend(), inp16), d_weight(row.backend(), weight16),
        d_dout(row.backend(), dout16);
    Buffer<Bf16> d_dinp(row.backend(), Bf16s(inp.size()));
    Buffer<float> d_dweight(row.backend(), Floats((size_t)OC * C, 0.0f));
    row.backend().bf16.matmul_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                       d_weight.get(), N, C, OC);
    Floats all = d_dweight.download();
    append(all, to_floats(d_dinp.download()));
    return all;
  };
  auto run_widened_fp32 = [&] {
    Floats dinp(inp.size()), dweight((size_t)OC * C, 0.0f);
    backend_cpu().f32.matmul_backward(dinp.data(), dweight.data(), dout.data(), inp.data(),
                                      weight.data(), N, C, OC);
    append(dweight, to_floats(to_bf16s(dinp)));
    return dweight;
  };
  for (int threads : kThreadCounts) {
    const std::string at = ", threads " + std::to_string(threads);
    const Floats first = with_threads(threads, run_bf16);
    expect_identical(with_threads(threads, run_bf16), first, "repeat" + at);
    expect_identical(first, with_threads(threads, run_widened_fp32), "bf16 vs widened fp32" + at);
  }
}

// The native bf16 path (where this CPU has one) against the widening path on
// the same bf16 operands, forward, residual forward and backward: out and
// dinp within bf16_result_bounds (another fp32 summation order, then one
// rounding each), dweight within reassociation_bounds, not the same bits (or
// the native path did not run); the residual forward into another buffer as
// in place; and at 1, 2 and 3 threads a repeat gives the same bits.
void matmul_native_bf16(const OpRow& row) {
  if (!cpu::bf16_gemm_native()) {
    GTEST_SKIP() << "this CPU or build has no native bf16 matmul (AVX512-BF16 or AMX, with oneDNN)";
  }
  std::mt19937 rng(117);
  for (const MatmulShape& s :
       {MatmulShape{97, 70, 45}, MatmulShape{33, 17, 9}, MatmulShape{256, 128, 384}}) {
    const auto [N, C, OC] = s;
    SCOPED_TRACE(describe(s));
    const Floats inp = random_bf16_values((size_t)N * C, rng),
                 weight = random_bf16_values((size_t)OC * C, rng);
    const Floats dout = random_bf16_values((size_t)N * OC, rng),
                 residual = random_bf16_values((size_t)N * OC, rng);
    const Bf16s inp16 = to_bf16s(inp), weight16 = to_bf16s(weight), dout16 = to_bf16s(dout);
    const Bf16s residual16 = to_bf16s(residual);
    auto run = [&] {  // out, out + residual, dinp and dweight (from zero), as floats
      const Backend& be = row.backend();
      Buffer<Bf16> d_inp(be, inp16), d_weight(be, weight16), d_dout(be, dout16),
          d_sum(be, residual16);
      Buffer<Bf16> d_out(be, Bf16s(dout.size())), d_dinp(be, Bf16s(inp.size()));
      Buffer<Bf16> d_residual(be, residual16), d_sum_apart(be, Bf16s(dout.size()));
      Buffer<float> d_dweight(be, Floats(weight.size(), 0.0f));
      be.bf16.matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
      be.bf16.matmul_forward_residual(d_sum.get(), d_inp.get(), d_weight.get(), d_sum.get(), N, C,
                                      OC);
      be.bf16.matmul_forward_residual(d_sum_apart.get(), d_inp.get(), d_weight.get(),
                                      d_residual.get(), N, C, OC);
      // Into a separate buffer: the same bits as in place, the residual untouched.
      expect_identical(d_sum_apart.download(), d_sum.download(), "out + residual, not in place");
      expect_identical(d_residual.download(), residual16, "residual");
      be.bf16.matmul_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                              d_weight.get(), N, C, OC);
      Floats all = to_floats(d_out.download());
      append(all, to_floats(d_sum.download()));
      append(all, to_floats(d_dinp.download()));
      append(all, d_dweight.download());
      return all;
    };
    const Floats native = run();
    Floats widened;
    {
      const WidenedBf16Gemm widened_path;
      widened = run();
    }
    // Another summation order changes some fp32 dweight bits: equal results
    // would mean the native path never ran.
    EXPECT_NE(std::memcmp(native.data(), widened.data(), native.size() * sizeof(float)), 0)
        << "the native and widening paths gave the same bits";
    const MatmulMagnitudes magnitude =
        matmul_magnitudes(to_doubles(inp), to_doubles(weight), to_doubles(dout),
                          Doubles(weight.size(), 0.0), N, C, OC);
    Doubles sum_magnitude = magnitude.out;
    for (size_t i = 0; i < sum_magnitude.size(); i++) sum_magnitude[i] += std::fabs(residual[i]);
    const size_t n_out = dout.size(), n_inp = inp.size();
    auto part = [](const Floats& all, size_t begin, size_t count) {
      return to_doubles(Floats(all.begin() + begin, all.begin() + begin + count));
    };
    const Doubles out = part(widened, 0, n_out), sum = part(widened, n_out, n_out);
    const Doubles dinp = part(widened, 2 * n_out, n_inp),
                  dweight = part(widened, 2 * n_out + n_inp, weight.size());
    expect_within(part(native, 0, n_out), out, bf16_result_bounds(magnitude.out, C, out), "out");
    expect_within(part(native, n_out, n_out), sum, bf16_result_bounds(sum_magnitude, C + 1, sum),
                  "out + residual");
    expect_within(part(native, 2 * n_out, n_inp), dinp,
                  bf16_result_bounds(magnitude.dinp, OC, dinp), "dinp");
    expect_within(part(native, 2 * n_out + n_inp, weight.size()), dweight,
                  reassociation_bounds(magnitude.dweight, N), "dweight");
    for (int threads : kThreadCounts) {
      const Floats first = with_threads(threads, run);
      expect_identical(with_threads(threads, run), first,
                       "repeat, threads " + std::to_string(threads));
    }
  }
}

}  // namespace

std::vector<OpCase> matmul_cases() {
  return {
      {"matmul",
       "forward_backward",
       kAllRows,
       {"matmul_forward", "matmul_backward"},
       LLM_BY_DTYPE(matmul_forward_backward)},
      {"matmul",
       "forward_residual_in_place_or_not",
       kAllRows,
       {"matmul_forward_residual"},
       LLM_BY_DTYPE(matmul_forward_residual)},
      {"matmul",
       "backward_repeats_at_each_thread_count",
       kCpuBf16,
       {"matmul_backward"},
       matmul_backward_repeats},
      {"matmul",
       "native_bf16_within_reassociation_of_widened",
       kCpuBf16,
       {"matmul_forward", "matmul_forward_residual", "matmul_backward"},
       matmul_native_bf16},
  };
}

}  // namespace llm::op_test
