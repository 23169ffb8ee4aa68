// Op cases of the row bias (the q, k and v biases, model/kernels/row_bias.h)
// on every row (see op_harness.h), against the naive composition in
// reference_ops.h: forward adds the bias to every row in place; backward
// accumulates the column sums of the output's gradient.
// Invariant: forward is one fp32 addition per element, so it is checked bit
// for bit (one correctly rounded addition on the cpu f32 row, the fp32 sum
// rounded once on cpu bf16, the CPU twin's bits on cuda); backward is a long
// fp32 sum, checked against the double sum within the reordered-sum bound,
// and repeatable bit for bit.
#include <cmath>
#include <random>
#include <vector>

#include "test/op_harness.h"

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
      be.ops<T>().row_bias_forward(d_x.get(), d_bias.get(), s.N, s.C);
      const std::vector<T> out = d_x.download();
      EXPECT_TRUE(d_x.guards_intact());
      if (row.cuda()) {
        std::vector<T> expected = x_t;
        backend_cpu().ops<T>().row_bias_forward(expected.data(), bias_t.data(), s.N, s.C);
        expect_identical(out, expected, "x vs cpu twin");
      } else if (bf16) {
        Floats sum = x;
        backend_cpu().f32.row_bias_forward(sum.data(), bias.data(), s.N, s.C);
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
      be.ops<T>().row_bias_backward(d_dbias.get(), d_dout.get(), s.N, s.C);
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
            be.ops<T>().row_bias_backward(d_again.get(), d_dout.get(), s.N, s.C);
            return d_again.download();
          },
          "dbias");
    }
  }
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
  };
}

}  // namespace llm::op_test
