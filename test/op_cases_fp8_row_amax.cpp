// Op cases of the amax written beside a producer's output for the FP8 matmul
// that reads it (row_amax of rmsnorm_forward and swiglu_forward, of
// rmsnorm_backward's dinp after its += and swiglu_backward's dh13, and
// fp8_scale_from_row_amax; base/fp8.h) against the unfused composition,
// on every row:
//   - the output's bits are the same with and without row_amax;
//   - each row's amax is exactly the largest |value| of the row as written
//     (fp8_amax_of on the host: integer maxima, exact), NaN for a row with a
//     NaN, and nothing outside the buffers is written;
//   - the scale fp8_scale_from_row_amax makes from them is, field for field,
//     the bits of the amax pass's scale over the whole output (bf16 rows:
//     fp8_amax_scale on the same backend; f32 rows, which that op does not
//     take: fp8_scale_from_amax of the host's amax).
// The backward's gradients are scaled as the matmuls scale them, in e5m2.
// Shapes: rows aligned and off 16 bytes, rows wider than a block's step, and
// more rows than the scale kernel has threads; for rmsnorm_backward, more
// rows than its row chunks, so that a block reduces several rows' amaxes.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp8.h"
#include "test/op_harness.h"

namespace llm::op_test {
namespace {

struct RowShape {
  int N, width;  // rows, and a row's output elements (RMSNorm's C, SwiGLU's F)
};
constexpr RowShape kCpuShapes[] = {{1, 1}, {7, 13}, {5, 64}};
constexpr RowShape kCudaShapes[] = {{3, 7}, {5, 64}, {4, 2056}, {300, 40}};
constexpr RowShape kCudaBackwardShapes[] = {{3, 7}, {5, 64}, {4, 2056}, {1100, 24}};
constexpr Fp8Format kE4m3 = Fp8Format::e4m3, kE5m2 = Fp8Format::e5m2;

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// `produce(out, row_amax)` writes (or adds to) an (N, width) output, which
// holds `initial` before (NaN when empty), and row amaxes when row_amax is
// not null, on the row's backend; the checks of the file header, the scale
// in `format`.
template <class T, class Produce>
void expect_row_amax_of_output(const OpRow& row, RowShape s, size_t offset, const Produce& produce,
                               std::vector<T> initial = {}, Fp8Format format = kE4m3) {
  const Backend& be = row.backend();
  const size_t count = (size_t)s.N * s.width;
  if (initial.empty()) initial = nan_filled<T>(count);
  Buffer<T> out(be, initial, offset), plain(be, initial, offset);
  Buffer<float> row_amax(be, Floats(s.N, -1.0f), offset);
  produce(out.get(), row_amax.get());
  produce(plain.get(), nullptr);
  const std::vector<T> written = out.download();
  expect_identical(plain.download(), written, "the output without row_amax");
  const Floats amaxes = row_amax.download();
  EXPECT_TRUE(out.guards_intact() && row_amax.guards_intact()) << "a write outside the buffers";
  for (int n = 0; n < s.N; n++)
    EXPECT_EQ(bits_of(amaxes[n]),
              bits_of(fp8_amax_of(written.data() + (size_t)n * s.width, (size_t)s.width)))
        << "row " << n << ": " << amaxes[n];

  Buffer<Fp8Scale> fused(be, {Fp8Scale{}}), pass(be, {Fp8Scale{}});
  be.fp8_scale_from_row_amax(fused.get(), row_amax.get(), s.N, format);
  Fp8Scale unfused;
  if constexpr (std::is_same_v<T, Bf16>) {
    be.fp8_amax_scale(pass.get(), out.get(), count, format);
    unfused = pass.download()[0];
  } else {
    unfused = fp8_scale_from_amax(fp8_amax_of(written.data(), count), format);
  }
  const Fp8Scale got = fused.download()[0];
  EXPECT_EQ(bits_of(got.amax), bits_of(unfused.amax)) << got.amax << " vs " << unfused.amax;
  EXPECT_EQ(bits_of(got.scale), bits_of(unfused.scale));
  EXPECT_EQ(bits_of(got.inverse), bits_of(unfused.inverse));
}

// Inputs with a NaN in row 1 when asked (then that row's amax is NaN).
Floats with_nan_in_row_one(Floats x, int row_elements, bool nan) {
  if (nan && x.size() > (size_t)row_elements) x[row_elements] = kNaN;
  return x;
}

template <class T>
void rmsnorm_row_amax(const OpRow& row) {
  std::mt19937 rng(56);
  for (const RowShape& s : shapes_for(row, kCpuShapes, kCudaShapes))
    for (size_t offset : offsets_for(row))
      for (bool nan : {false, true}) {
        SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.width << " offset=" << offset
                                        << (nan ? " with a NaN" : ""));
        const int C = s.width;
        const Floats inp =
            with_nan_in_row_one(random_bf16_values((size_t)s.N * C, rng, -2.0f, 2.0f), C, nan);
        Buffer<T> d_inp(row.backend(), stored<T>(inp), offset);
        Buffer<T> d_weight(row.backend(), stored<T>(random_bf16_values(C, rng)), offset);
        Buffer<float> d_rstd(row.backend(), Floats(s.N), offset);
        expect_row_amax_of_output<T>(row, s, offset, [&](T* out, float* row_amax) {
          row.backend().ops<T>().rmsnorm_forward(out, d_rstd.get(), d_inp.get(), d_weight.get(),
                                                 s.N, C, 1e-5f, row_amax);
        });
      }
}

template <class T>
void swiglu_row_amax(const OpRow& row) {
  std::mt19937 rng(57);
  for (const RowShape& s : shapes_for(row, kCpuShapes, kCudaShapes))
    for (size_t offset : offsets_for(row))
      for (bool nan : {false, true}) {
        SCOPED_TRACE(testing::Message() << "N=" << s.N << " F=" << s.width << " offset=" << offset
                                        << (nan ? " with a NaN" : ""));
        const int F = s.width;
        const Floats h13 = with_nan_in_row_one(
            random_bf16_values((size_t)s.N * 2 * F, rng, -4.0f, 4.0f), 2 * F, nan);
        Buffer<T> d_h13(row.backend(), stored<T>(h13), offset);
        expect_row_amax_of_output<T>(row, s, offset, [&](T* out, float* row_amax) {
          row.backend().ops<T>().swiglu_forward(out, d_h13.get(), s.N, F, row_amax);
        });
      }
}

// dinp (N, C) += the gradient, from a prefill of random values (a NaN in
// row 1 when asked: that row's amax is NaN), with dweight beside it.
template <class T>
void rmsnorm_backward_row_amax(const OpRow& row) {
  std::mt19937 rng(58);
  for (const RowShape& s : shapes_for(row, kCpuShapes, kCudaBackwardShapes))
    for (size_t offset : offsets_for(row))
      for (bool nan : {false, true}) {
        SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.width << " offset=" << offset
                                        << (nan ? " with a NaN" : ""));
        const int C = s.width;
        const size_t NC = (size_t)s.N * C;
        const Floats inp = random_bf16_values(NC, rng, -2.0f, 2.0f);
        const Floats weight = random_bf16_values(C, rng);
        Floats rstd(s.N);
        Floats normed(NC);
        backend_cpu().f32.rmsnorm_forward(normed.data(), rstd.data(), inp.data(), weight.data(),
                                          s.N, C, 1e-5f, nullptr);
        const Backend& be = row.backend();
        Buffer<T> d_inp(be, stored<T>(inp), offset), d_weight(be, stored<T>(weight), offset);
        Buffer<T> d_dout(be, stored<T>(random_bf16_values(NC, rng)), offset);
        Buffer<float> d_rstd(be, rstd, offset), d_dweight(be, Floats(C), offset);
        const Floats prefill = with_nan_in_row_one(random_bf16_values(NC, rng), C, nan);
        expect_row_amax_of_output<T>(
            row, s, offset,
            [&](T* dinp, float* row_amax) {
              be.ops<T>().rmsnorm_backward(dinp, d_dweight.get(), d_dout.get(), d_inp.get(),
                                           d_weight.get(), d_rstd.get(), s.N, C, row_amax);
            },
            stored<T>(prefill), kE5m2);
      }
}

// dh13 (N, 2F) = [d gate | d up] (a NaN in dout's row 1 when asked).
template <class T>
void swiglu_backward_row_amax(const OpRow& row) {
  std::mt19937 rng(59);
  for (const RowShape& s : shapes_for(row, kCpuShapes, kCudaShapes))
    for (size_t offset : offsets_for(row))
      for (bool nan : {false, true}) {
        SCOPED_TRACE(testing::Message() << "N=" << s.N << " F=" << s.width << " offset=" << offset
                                        << (nan ? " with a NaN" : ""));
        const int F = s.width;
        const Floats h13 = random_bf16_values((size_t)s.N * 2 * F, rng, -4.0f, 4.0f);
        const Floats dout = with_nan_in_row_one(random_bf16_values((size_t)s.N * F, rng), F, nan);
        Buffer<T> d_h13(row.backend(), stored<T>(h13), offset);
        Buffer<T> d_dout(row.backend(), stored<T>(dout), offset);
        expect_row_amax_of_output<T>(
            row, {s.N, 2 * F}, offset,
            [&](T* dh13, float* row_amax) {
              row.backend().ops<T>().swiglu_backward(dh13, d_dout.get(), d_h13.get(), s.N, F,
                                                     row_amax);
            },
            {}, kE5m2);
      }
}

}  // namespace

std::vector<OpCase> fp8_row_amax_cases() {
  return {
      {"fp8",
       "rmsnorm_row_amax",
       kAllRows,
       {"rmsnorm_forward", "fp8_scale_from_row_amax", "fp8_amax_scale"},
       LLM_BY_DTYPE(rmsnorm_row_amax)},
      {"fp8",
       "swiglu_row_amax",
       kAllRows,
       {"swiglu_forward", "fp8_scale_from_row_amax", "fp8_amax_scale"},
       LLM_BY_DTYPE(swiglu_row_amax)},
      {"fp8",
       "rmsnorm_backward_row_amax",
       kAllRows,
       {"rmsnorm_backward", "fp8_scale_from_row_amax", "fp8_amax_scale"},
       LLM_BY_DTYPE(rmsnorm_backward_row_amax)},
      {"fp8",
       "swiglu_backward_row_amax",
       kAllRows,
       {"swiglu_backward", "fp8_scale_from_row_amax", "fp8_amax_scale"},
       LLM_BY_DTYPE(swiglu_backward_row_amax)},
  };
}

}  // namespace llm::op_test
