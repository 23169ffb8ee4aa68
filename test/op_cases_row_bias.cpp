// Op cases of the row bias (the q, k and v biases, model/kernels/row_bias.h)
// on every row (see op_harness.h), against the naive composition in
// reference_ops.h: forward adds the bias to every row in place; backward
// accumulates the column sums of the output's gradient.
// Invariant: forward is one fp32 addition per element, so it is checked bit
// for bit (one correctly rounded addition on the cpu f32 row, the fp32 sum
// rounded once on cpu bf16, the CPU twin's bits on cuda); backward is a long
// fp32 sum, checked against the double sum within the reordered-sum bound,
// and repeatable bit for bit. With RoPE in the same pass (q and k heads
// rotated after the bias; their gradient turned back in place before the
// sums), the bits of the composition with rope_forward / rope_backward, for
// token positions, packed documents and a decode offset.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "test/op_harness.h"
#include "test/op_rope_angles.h"

namespace llm::op_test {
namespace {

// Sizes off every warp, vector pack and 64-column block, and rows past the
// GPU's 16 row phases.
constexpr RowShape kShapes[] = {{1, 1}, {3, 7}, {17, 96}, {70, 130}};

template <class T>
void row_bias_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(301);
  for (const RowShape& s : kShapes) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C << " offset=" << offset);
      const Floats x = random_values((size_t)s.N * s.C, rng, -2.0f, 2.0f, bf16);
      const Floats bias = random_values(s.C, rng, -2.0f, 2.0f, bf16);
      const std::vector<T> x_t = stored<T>(x), bias_t = stored<T>(bias);
      const Backend& be = row.backend();
      Buffer<T> d_x(be, x_t, offset), d_bias(be, bias_t, offset);
      be.ops<T>().row_bias_forward(d_x.get(), d_bias.get(), s.N, s.C, 0, 0, {});
      const std::vector<T> out = d_x.download();
      EXPECT_TRUE(d_x.guards_intact());
      if (row.cuda()) {
        std::vector<T> expected = x_t;
        backend_cpu().ops<T>().row_bias_forward(expected.data(), bias_t.data(), s.N, s.C, 0, 0, {});
        expect_identical(out, expected, "x vs cpu twin");
      } else if (bf16) {
        Floats sum = x;
        backend_cpu().f32.row_bias_forward(sum.data(), bias.data(), s.N, s.C, 0, 0, {});
        expect_fp32_rounded(out, sum, "x");
      } else {
        const Tolerance one_rounding{0, std::ldexp(1.0, -24)};
        expect_close(out, reference::row_bias_forward(to_doubles(x), to_doubles(bias), s.N, s.C),
                     one_rounding, "x");
      }
    }
  }
}

template <class T>
void row_bias_backward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(302);
  for (const RowShape& s : kShapes) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C << " offset=" << offset);
      const Floats dout = random_values((size_t)s.N * s.C, rng, -1.0f, 1.0f, bf16);
      const Floats before = random_floats(s.C, rng);  // backward accumulates
      const std::vector<T> dout_t = stored<T>(dout);
      const Backend& be = row.backend();
      Buffer<T> d_dout(be, dout_t, offset);
      Buffer<float> d_dbias(be, before, offset);
      be.ops<T>().row_bias_backward(d_dbias.get(), d_dout.get(), s.N, s.C, 0, 0, {});
      EXPECT_TRUE(d_dbias.guards_intact());
      EXPECT_TRUE(d_dout.guards_intact());

      Doubles expected = reference::row_bias_backward(to_doubles(dout), s.N, s.C);
      Doubles magnitudes(s.C);  // the sum of each column's |terms|
      for (int c = 0; c < s.C; c++) {
        expected[c] += before[c];
        magnitudes[c] = std::fabs(before[c]);
        for (int n = 0; n < s.N; n++) magnitudes[c] += std::fabs(dout[(size_t)n * s.C + c]);
      }
      // Rows summed in some order, then the sum added to what was there.
      expect_within(to_doubles(d_dbias.download()), expected,
                    reordered_sum_bounds(expected, magnitudes, (size_t)s.N + 1), "dbias");

      expect_repeatable(
          row,
          [&] {
            Buffer<float> d_again(be, Floats(s.C, 0.0f), offset);
            be.ops<T>().row_bias_backward(d_again.get(), d_dout.get(), s.N, s.C, 0, 0, {});
            return d_again.download();
          },
          "dbias");
    }
  }
}

// ---- the bias with RoPE in the same pass ------------------------------------

// B sequences of T fused qkv rows: H q heads, KV k heads and KV v heads of D.
struct QkvRopeShape {
  int B, T, H, KV, D;

  int N() const { return B * T; }
  int C() const { return (H + 2 * KV) * D; }
  size_t values() const { return (size_t)N() * C(); }
};

// cpu rows: D = 64 and 128, grouped and not, odd D (its last value is in no
// pair), one pair. cuda rows: those, D = 24 and 300, and N = 2051 rows (past
// backward's 16 row phases many times, v columns past one block of slots).
constexpr QkvRopeShape kCpuQkvRopeShapes[] = {
    {2, 5, 4, 2, 64}, {1, 4, 2, 2, 128}, {3, 3, 3, 1, 13}, {2, 2, 1, 1, 2}};
constexpr QkvRopeShape kCudaQkvRopeShapes[] = {{2, 5, 4, 2, 64},  {3, 3, 2, 1, 24},
                                               {2, 3, 3, 1, 13},  {1, 4, 1, 1, 300},
                                               {293, 7, 2, 1, 8}, {1, 3, 2, 2, 128}};

// Forward with RoPE against row_bias_forward without it, then rope_forward,
// on the same backend: the same bits (the fused pass rounds each biased
// value to T where the composition stores it, then rotates it with rope's
// products); x also differs from the unrotated sum somewhere, so the angles
// were applied.
template <class T>
void row_bias_rope_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(306);
  for_each_rope_case(
      row, kCpuQkvRopeShapes, kCudaQkvRopeShapes,
      [&](const QkvRopeShape& s, AngleSource source, size_t offset) {
        const int N = s.N(), C = s.C(), rotated = s.H + s.KV;
        const std::vector<T> x = stored<T>(random_values(s.values(), rng, -2.0f, 2.0f, bf16));
        const std::vector<T> bias = stored<T>(random_values(C, rng, -2.0f, 2.0f, bf16));
        const Backend& be = row.backend();
        const RopeCaseAngles angles(be, s.B, s.T, s.D, source, offset, rng);
        Buffer<T> d_fused(be, x, offset), d_composed(be, x, offset), d_bias(be, bias, offset);
        be.ops<T>().row_bias_forward(d_fused.get(), d_bias.get(), N, C, rotated, s.D, angles.fused);
        be.ops<T>().row_bias_forward(d_composed.get(), d_bias.get(), N, C, 0, 0, {});
        const std::vector<T> unrotated = d_composed.download();
        be.ops<T>().rope_forward(d_composed.get(), angles.cos.get(), angles.sin.get(),
                                 angles.composed_positions, N, s.T, rotated, s.D, C);
        const std::vector<T> fused = d_fused.download();
        EXPECT_TRUE(d_fused.guards_intact());
        expect_identical(fused, d_composed.download(), "x vs row_bias then rope_forward");
        EXPECT_NE(std::memcmp(fused.data(), unrotated.data(), fused.size() * sizeof(T)), 0)
            << "x is the unrotated sum";
      });
}

// Backward with RoPE against rope_backward on dout, then row_bias_backward
// without RoPE, on the same backend: dout turned back in place and the
// (prefilled, +=) bias gradient the same bits.
template <class T>
void row_bias_rope_backward(const OpRow& row) {
  std::mt19937 rng(307);
  for_each_rope_case(
      row, kCpuQkvRopeShapes, kCudaQkvRopeShapes,
      [&](const QkvRopeShape& s, AngleSource source, size_t offset) {
        const int N = s.N(), C = s.C(), rotated = s.H + s.KV;
        const std::vector<T> dout = stored<T>(random_values(s.values(), rng, -1.0f, 1.0f, true));
        const Floats before = random_floats(C, rng);  // backward accumulates
        const Backend& be = row.backend();
        const RopeCaseAngles angles(be, s.B, s.T, s.D, source, offset, rng);
        Buffer<T> d_fused(be, dout, offset), d_composed(be, dout, offset);
        Buffer<float> d_dbias(be, before, offset), d_dbias_composed(be, before, offset);
        be.ops<T>().row_bias_backward(d_dbias.get(), d_fused.get(), N, C, rotated, s.D,
                                      angles.fused);
        be.ops<T>().rope_backward(d_composed.get(), angles.cos.get(), angles.sin.get(),
                                  angles.composed_positions, N, s.T, rotated, s.D, C);
        be.ops<T>().row_bias_backward(d_dbias_composed.get(), d_composed.get(), N, C, 0, 0, {});
        EXPECT_TRUE(d_fused.guards_intact() && d_dbias.guards_intact());
        expect_identical(d_fused.download(), d_composed.download(),
                         "dout vs rope_backward's turned dout");
        expect_identical(d_dbias.download(), d_dbias_composed.download(),
                         "dbias (+=) vs rope_backward then row_bias");
      });
}

}  // namespace

std::vector<OpCase> row_bias_cases() {
  return {
      {"row_bias", "forward", kAllRows, {"row_bias_forward"}, LLM_BY_DTYPE(row_bias_forward)},
      {"row_bias",
       "backward_column_sums",
       kAllRows,
       {"row_bias_backward"},
       LLM_BY_DTYPE(row_bias_backward)},
      {"row_bias",
       "rope_forward_is_the_composition",
       kAllRows,
       {"row_bias_forward", "rope_forward"},
       LLM_BY_DTYPE(row_bias_rope_forward)},
      {"row_bias",
       "rope_backward_is_the_composition",
       kAllRows,
       {"row_bias_backward", "rope_backward"},
       LLM_BY_DTYPE(row_bias_rope_backward)},
  };
}

}  // namespace llm::op_test
