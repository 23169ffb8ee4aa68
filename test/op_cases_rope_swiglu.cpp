// Op cases of RoPE (the cos/sin table, the in-place rotation and its inverse
// on the q and k heads of a fused qkv row) and SwiGLU (forward and backward of
// silu(gate) * up), on every row they have (see op_harness.h).
// Invariant: both families are elementwise per row, the same fp32 expressions
// on every backend and storage type: the bf16 entry points round the fp32
// twin's result once (cpu bf16: bit for bit), the GPU differs from the CPU
// only by fused multiply-adds and a 2-ulp exp (kReassociation), the RoPE
// table is the CPU's bits, and values past the rotated heads keep their bits.
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {
namespace {

// ---- rope -----------------------------------------------------------------------

constexpr float kRopeTheta = 10000.0f;
// cos/sin of a double angle rounded once to float: within half an ulp of 1.
constexpr Tolerance kRopeTableTolerance{1e-7, 0};

void rope_table_case(const OpRow& row, int T, int D, const RopeScaling& scaling) {
  const size_t count = (size_t)T * (D / 2);
  Buffer<float> d_cos(row.backend(), Floats(count, kNaN)),
      d_sin(row.backend(), Floats(count, kNaN));
  row.backend().rope_table(d_cos.get(), d_sin.get(), T, D, kRopeTheta, scaling);
  const Floats cos = d_cos.download(), sin = d_sin.download();
  EXPECT_TRUE(d_cos.guards_intact() && d_sin.guards_intact());
  if (row.cuda()) {
    Floats cpu_cos(count), cpu_sin(count);
    backend_cpu().rope_table(cpu_cos.data(), cpu_sin.data(), T, D, kRopeTheta, scaling);
    expect_identical(cos, cpu_cos, "cos");
    expect_identical(sin, cpu_sin, "sin");
    return;
  }
  Vec ref_cos(count), ref_sin(count);
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < D / 2; i++) {
      const double angle = reference::rope_angle(t, i, D, kRopeTheta, scaling);
      ref_cos[(size_t)t * D / 2 + i] = std::cos(angle);
      ref_sin[(size_t)t * D / 2 + i] = std::sin(angle);
    }
  }
  expect_close(cos, ref_cos, kRopeTableTolerance, "cos");
  expect_close(sin, ref_sin, kRopeTableTolerance, "sin");
}

// A shapes-only case: the table has no storage type (f32 rows), unscaled and
// with Llama 3.1's scaling (at theta 10000 and D 64 or 128 its pairs fall in
// all three wavelength bands). cpu: against the reference angles; cuda: the
// CPU table's bits.
void rope_table(const OpRow& row) {
  const RopeScaling unscaled, llama31{8.0, 1.0, 4.0, 8192};
  for (const RopeScaling& scaling : {unscaled, llama31}) {
    for (auto [T, D] : {std::pair{1, 2}, std::pair{5, 6}, std::pair{17, 64}, std::pair{300, 64},
                        std::pair{300, 128}}) {
      SCOPED_TRACE(testing::Message()
                   << "T=" << T << " D=" << D << " scaling factor=" << scaling.factor);
      rope_table_case(row, T, D, scaling);
    }
  }
}

// N rows of row_stride values at positions n % T; the first n_heads heads of
// D values are rotated, the rest (the v heads of a fused qkv row) untouched.
struct RopeShape {
  int N, T, n_heads, D, row_stride;
};

// cpu rows: fused qkv rows (B, T, H, KV, D) = (2, 5, 4, 2, 6), (1, 1, 1, 1, 2),
// (3, 4, 2, 1, 8), small enough for finite differences.
constexpr RopeShape kCpuRopeShapes[] = {{10, 5, 6, 6, 48}, {1, 1, 2, 2, 6}, {12, 4, 3, 8, 32}};
// cuda rows: tiny; D/2 odd (element-wise path); D/2 a multiple of 4 (vector
// path) with heads left unrotated after the first n_heads; an odd row stride
// (element-wise).
constexpr RopeShape kCudaRopeShapes[] = {{1, 1, 1, 2, 2},
                                         {10, 5, 3, 6, 20},
                                         {8, 4, 4, 16, 80},
                                         {12, 6, 3, 16, 67},
                                         {6, 3, 5, 128, 1024}};

// Forward (rotate by +angle) or backward (by -angle: dx from dout, in place).
// cpu f32: forward against the reference (kForwardTolerance), backward
// against finite differences (kBackwardTolerance); cpu bf16: the fp32 twin
// rounded once; cuda: kReassociation against the fp32 twin, bf16 also
// kOneRoundingAcrossDevices / kOneBf16Ulp against the fp32 / bf16 twins.
// With `positions`, each row n is at a random position in [0, T) (documents
// restart theirs) given to every side, the reference included; then also
// positions n % T give the bits of none.
template <class T>
void rope(const OpRow& row, bool forward, bool with_positions = false) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(forward ? 7 : 8);
  for (const RopeShape& s : shapes_for(row, kCpuRopeShapes, kCudaRopeShapes)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message()
                   << "N=" << s.N << " T=" << s.T << " heads=" << s.n_heads << " D=" << s.D
                   << " stride=" << s.row_stride << " offset=" << offset);
      const size_t half_table = (size_t)s.T * (s.D / 2), size = (size_t)s.N * s.row_stride;
      Floats cos(half_table), sin(half_table);
      backend_cpu().rope_table(cos.data(), sin.data(), s.T, s.D, kRopeTheta, RopeScaling{});
      const float range = row.cuda() ? 2.0f : 1.0f;
      const Floats x = random_values(size, rng, -range, range, bf16 || row.cuda());
      const std::vector<T> x_t = stored<T>(x);
      const auto op =
          forward ? row.backend().ops<T>().rope_forward : row.backend().ops<T>().rope_backward;
      Buffer<float> d_cos(row.backend(), cos, offset), d_sin(row.backend(), sin, offset);
      Ints positions(s.N), modulo(s.N);
      std::uniform_int_distribution<int> draw(0, s.T - 1);
      for (int n = 0; n < s.N; n++) positions[n] = draw(rng), modulo[n] = n % s.T;
      const int32_t* host_positions = with_positions ? positions.data() : nullptr;
      Buffer<int32_t> d_positions(row.backend(), positions), d_modulo(row.backend(), modulo);
      Buffer<T> d_x(row.backend(), x_t, offset);
      op(d_x.get(), d_cos.get(), d_sin.get(), with_positions ? d_positions.get() : nullptr, s.N,
         s.T, s.n_heads, s.D, s.row_stride);
      if (with_positions) {  // positions n % T: the bits of none
        Buffer<T> d_plain(row.backend(), x_t, offset), d_mod(row.backend(), x_t, offset);
        op(d_plain.get(), d_cos.get(), d_sin.get(), nullptr, s.N, s.T, s.n_heads, s.D,
           s.row_stride);
        op(d_mod.get(), d_cos.get(), d_sin.get(), d_modulo.get(), s.N, s.T, s.n_heads, s.D,
           s.row_stride);
        expect_identical(d_mod.download(), d_plain.download(), "positions n % T vs none");
      }
      const std::vector<T> y = d_x.download();
      EXPECT_TRUE(d_x.guards_intact());
      for (int n = 0; n < s.N; n++)
        for (int i = s.n_heads * s.D; i < s.row_stride; i++) {
          const size_t at = (size_t)n * s.row_stride + i;
          ASSERT_EQ(std::memcmp(&y[at], &x_t[at], sizeof(T)), 0) << "untouched v head at " << at;
        }
      const auto cpu32 = forward ? backend_cpu().f32.rope_forward : backend_cpu().f32.rope_backward;
      Floats y32 = x;  // the fp32 twin
      cpu32(y32.data(), cos.data(), sin.data(), host_positions, s.N, s.T, s.n_heads, s.D,
            s.row_stride);
      if (row.cuda()) {
        std::vector<T> twin = x_t;
        const auto cpu_t =
            forward ? backend_cpu().ops<T>().rope_forward : backend_cpu().ops<T>().rope_backward;
        cpu_t(twin.data(), cos.data(), sin.data(), host_positions, s.N, s.T, s.n_heads, s.D,
              s.row_stride);
        expect_matches_cpu_twins(y, y32, twin, "x");
      } else if (bf16) {
        expect_fp32_rounded(y, y32, forward ? "forward" : "backward");
      } else if (forward) {
        expect_close(y,
                     reference::rope_forward(to_doubles(x), s.N, s.T, s.n_heads, s.D, s.row_stride,
                                             kRopeTheta, with_positions ? &positions : nullptr),
                     kForwardTolerance, "x");
      } else {
        // x was dout; dx = d/dz of sum(dout * rope(z)), at any z (linear).
        const Vec z = to_doubles(random_floats(size, rng));
        const Vec grad = finite_difference_gradient(
            [&](const Vec& zs) {
              return reference::rope_forward(zs, s.N, s.T, s.n_heads, s.D, s.row_stride, kRopeTheta,
                                             with_positions ? &positions : nullptr);
            },
            z, to_doubles(x));
        expect_close(y, grad, kBackwardTolerance, "dx");
      }
    }
  }
}

template <class T>
void rope_forward(const OpRow& row) {
  rope<T>(row, true);
}
template <class T>
void rope_backward(const OpRow& row) {
  rope<T>(row, false);
}
template <class T>
void rope_positions(const OpRow& row) {
  rope<T>(row, true, true);
  rope<T>(row, false, true);
}

// ---- swiglu ---------------------------------------------------------------------

// cpu rows: small enough for finite differences.
constexpr RowShape kCpuSwigluShapes[] = {{7, 13}, {1, 1}, {4, 40}};
// cuda rows: off every pack and beyond one block step of F.
constexpr RowShape kCudaSwigluShapes[] = {{1, 1}, {3, 5}, {4, 64}, {7, 1000}, {2, 2056}, {5, 4100}};

// Rows of [gate | up] in [-4, 4], except that the first and last rows' gates
// start with -100 and 100, where exp(-gate) overflows float and sigmoid
// saturates (bf16-exact values).
Floats random_h13(int N, int F, std::mt19937& rng, bool bf16_exact) {
  Floats h13 = random_values((size_t)N * 2 * F, rng, -4.0f, 4.0f, bf16_exact);
  for (float* gates : {h13.data(), h13.data() + (size_t)(N - 1) * 2 * F}) {
    gates[0] = -100.0f;
    if (F > 1) gates[1] = 100.0f;
  }
  return h13;
}

// Outputs pre-filled with NaN (forward and backward overwrite). cpu f32:
// kForwardTolerance against the reference, kBackwardTolerance against finite
// differences; cpu bf16: the fp32 twin rounded once; cuda: the same
// expressions with another exp (2 ulp each) and fusion: kReassociation, bf16
// also kOneRoundingAcrossDevices / kOneBf16Ulp against the fp32 / bf16 twins.
template <class T>
void swiglu(const OpRow& row, bool forward) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(forward ? 12 : 13);
  for (auto [N, F] : shapes_for(row, kCpuSwigluShapes, kCudaSwigluShapes)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " F=" << F << " offset=" << offset);
      const size_t NF = (size_t)N * F;
      const Floats h13 = random_h13(N, F, rng, bf16 || row.cuda());
      const Floats dout = random_values(NF, rng, -1.0f, 1.0f, bf16 || row.cuda());
      const std::vector<T> h13_t = stored<T>(h13), dout_t = stored<T>(dout);
      const size_t result_size = forward ? NF : 2 * NF;
      const Backend& be = row.backend();
      Buffer<T> d_h13(be, h13_t, offset), d_dout(be, dout_t, offset);
      Buffer<T> d_result(be, nan_filled<T>(result_size), offset);
      if (forward)
        be.ops<T>().swiglu_forward(d_result.get(), d_h13.get(), N, F, nullptr);
      else
        be.ops<T>().swiglu_backward(d_result.get(), d_dout.get(), d_h13.get(), N, F, nullptr);
      const std::vector<T> result = d_result.download();
      EXPECT_TRUE(d_result.guards_intact());
      auto run_cpu = [&](auto zero, const auto& h, const auto& dy) {
        std::vector<decltype(zero)> r(result_size);
        const auto& ops = backend_cpu().ops<decltype(zero)>();
        if (forward)
          ops.swiglu_forward(r.data(), h.data(), N, F, nullptr);
        else
          ops.swiglu_backward(r.data(), dy.data(), h.data(), N, F, nullptr);
        return r;
      };
      const Floats result32 = run_cpu(0.0f, h13, dout);  // the fp32 twin
      const char* what = forward ? "out" : "dh13";
      if (row.cuda()) {
        expect_matches_cpu_twins(result, result32, run_cpu(T{}, h13_t, dout_t), what);
      } else if (bf16) {
        expect_fp32_rounded(result, result32, what);
      } else if (forward) {
        expect_close(result, reference::swiglu_forward(to_doubles(h13), N, F), kForwardTolerance,
                     what);
      } else {
        const Vec grad = finite_difference_gradient(
            [&](const Vec& x) { return reference::swiglu_forward(x, N, F); }, to_doubles(h13),
            to_doubles(dout));
        expect_close(result, grad, kBackwardTolerance, what);
      }
    }
  }
}

template <class T>
void swiglu_forward(const OpRow& row) {
  swiglu<T>(row, true);
}
template <class T>
void swiglu_backward(const OpRow& row) {
  swiglu<T>(row, false);
}

}  // namespace

std::vector<OpCase> rope_swiglu_cases() {
  return {
      {"rope", "table", kF32Rows, {"rope_table"}, rope_table},
      {"rope", "forward", kAllRows, {"rope_forward"}, LLM_BY_DTYPE(rope_forward)},
      {"rope", "backward", kAllRows, {"rope_backward"}, LLM_BY_DTYPE(rope_backward)},
      {"rope",
       "positions_restart_per_document",
       kAllRows,
       {"rope_forward", "rope_backward"},
       LLM_BY_DTYPE(rope_positions)},
      {"swiglu", "forward", kAllRows, {"swiglu_forward"}, LLM_BY_DTYPE(swiglu_forward)},
      {"swiglu",
       "backward_overwrites",
       kAllRows,
       {"swiglu_backward"},
       LLM_BY_DTYPE(swiglu_backward)},
  };
}

}  // namespace llm::op_test
