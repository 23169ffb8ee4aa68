// Op cases of FP8 delayed scaling's kernels (model/linear_layers.h) against
// their unfused composition, on every row:
//   rmsnorm_cast, swiglu_cast  the producer writing the e4m3 codes of its
//              output beside it (rmsnorm_forward_fp8, swiglu_forward_fp8)
//              gives the plain producer's output, rstd and row amaxes bit for
//              bit, and the codes are those of casting that output with the
//              same scale (bf16 rows: fp8_cast_transpose on the same backend;
//              f32 rows: base/fp8.h's float_to_fp8 on the host); the scale is
//              a delayed one, four times too small for some rows, so
//              saturation is covered; nothing outside the buffers is written;
//   cast_amax  (bf16 rows) fp8_cast_amax's codes are fp8_cast_transpose's,
//              and the running amax becomes the larger of its old value and
//              the tensor's (fp8_amax_of on the host; a NaN wins); cuda: the
//              CPU twin's bits;
//   amax_fold  (bf16 rows) fp8_amax_fold leaves the largest of the old amax
//              and the list's, in bits, for lists longer than a block.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp8.h"
#include "test/op_harness.h"

namespace llm::op_test {
namespace {

using Codes = std::vector<uint8_t>;
constexpr Fp8Format kE4m3 = Fp8Format::e4m3;
constexpr RowShape kCpuShapes[] = {{1, 1}, {7, 13}, {5, 64}};
constexpr RowShape kCudaShapes[] = {{3, 7}, {5, 64}, {4, 2056}, {300, 40}};

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// A delayed scale: from a quarter of the output's amax, so the largest
// values saturate.
Fp8Scale delayed_scale_for(float amax) { return fp8_scale_from_amax(amax / 4, kE4m3); }

// `produce(out, row_amax, codes, scale)` writes an (N, C) output on the row's
// backend, with codes when codes is not null; the checks of the file header.
template <class T, class Produce>
void expect_codes_of_output(const OpRow& row, RowShape s, size_t offset, const Produce& produce) {
  const Backend& be = row.backend();
  const size_t count = (size_t)s.N * s.C;
  Buffer<T> out(be, nan_filled<T>(count), offset), plain(be, nan_filled<T>(count), offset);
  Buffer<float> row_amax(be, Floats(s.N, -1.0f), offset), plain_amax(be, Floats(s.N, -1.0f));
  produce(plain.get(), plain_amax.get(), nullptr, nullptr);
  const std::vector<T> written = plain.download();
  const Fp8Scale scale = delayed_scale_for(fp8_amax_of(written.data(), count));
  Buffer<Fp8Scale> d_scale(be, {scale});
  Buffer<uint8_t> codes(be, Codes(count, 0x55), offset);
  produce(out.get(), row_amax.get(), codes.get(), d_scale.get());
  expect_identical(out.download(), written, "the output beside its codes");
  expect_identical(row_amax.download(), plain_amax.download(), "the row amaxes beside the codes");
  EXPECT_TRUE(out.guards_intact() && row_amax.guards_intact() && codes.guards_intact())
      << "a write outside the buffers";
  Codes expected(count);
  if constexpr (std::is_same_v<T, Bf16>) {
    Buffer<uint8_t> cast(be, Codes(count, 0x55));
    be.fp8_cast_transpose(cast.get(), nullptr, plain.get(), s.N, s.C, d_scale.get(), kE4m3);
    expected = cast.download();
  } else {
    for (size_t i = 0; i < count; i++) expected[i] = float_to_fp8(written[i] * scale.scale, kE4m3);
  }
  expect_identical(codes.download(), expected, "the codes against the cast of the output");
}

template <class T>
void rmsnorm_cast(const OpRow& row) {
  std::mt19937 rng(58);
  for (const RowShape& s : shapes_for(row, kCpuShapes, kCudaShapes))
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C << " offset=" << offset);
      const Floats inp = random_bf16_values((size_t)s.N * s.C, rng, -2.0f, 2.0f);
      Buffer<T> d_inp(row.backend(), stored<T>(inp), offset);
      Buffer<T> d_weight(row.backend(), stored<T>(random_bf16_values(s.C, rng)), offset);
      Buffer<float> d_rstd(row.backend(), Floats(s.N), offset),
          rstd_plain(row.backend(), Floats(s.N));
      expect_codes_of_output<T>(
          row, s, offset, [&](T* out, float* row_amax, uint8_t* codes, const Fp8Scale* scale) {
            row.backend().ops<T>().rmsnorm_forward_fp8(out, codes ? d_rstd.get() : rstd_plain.get(),
                                                       d_inp.get(), d_weight.get(), s.N, s.C, 1e-5f,
                                                       row_amax, codes, scale);
          });
      expect_identical(d_rstd.download(), rstd_plain.download(), "rstd beside the codes");
    }
}

template <class T>
void swiglu_cast(const OpRow& row) {
  std::mt19937 rng(59);
  for (const RowShape& s : shapes_for(row, kCpuShapes, kCudaShapes))
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " F=" << s.C << " offset=" << offset);
      const Floats h13 = random_bf16_values((size_t)s.N * 2 * s.C, rng, -4.0f, 4.0f);
      Buffer<T> d_h13(row.backend(), stored<T>(h13), offset);
      expect_codes_of_output<T>(
          row, s, offset, [&](T* out, float* row_amax, uint8_t* codes, const Fp8Scale* scale) {
            row.backend().ops<T>().swiglu_forward_fp8(out, d_h13.get(), s.N, s.C, row_amax, codes,
                                                      scale);
          });
    }
}

constexpr RowShape kCpuCastShapes[] = {{1, 1}, {7, 13}, {37, 45}};
// More than one grid-stride pass of the cast (1100 x 2048), and more partial
// amaxes than the fold's block has threads.
constexpr RowShape kCudaCastShapes[] = {{1, 1}, {7, 13}, {300, 257}, {1100, 2048}};

struct CastAmax {
  Codes codes;
  float amax;
};
CastAmax cast_amax_on(const Backend& be, const Floats& x, float start, const Fp8Scale& scale,
                      size_t offset) {
  Buffer<Bf16> d_x(be, to_bf16s(x), offset);
  Buffer<uint8_t> codes(be, Codes(x.size(), 0x55), offset);
  Buffer<float> amax(be, {start});
  Buffer<Fp8Scale> d_scale(be, {scale});
  be.fp8_cast_amax(codes.get(), amax.get(), d_x.get(), x.size(), d_scale.get(), kE4m3);
  EXPECT_TRUE(d_x.guards_intact() && codes.guards_intact() && amax.guards_intact())
      << "a write outside the buffers";
  return {codes.download(), amax.download()[0]};
}

void cast_amax(const OpRow& row) {
  std::mt19937 rng(60);
  const Backend& be = row.backend();
  for (const RowShape& s : shapes_for(row, kCpuCastShapes, kCudaCastShapes))
    for (size_t offset : offsets_for(row))
      for (bool nan : {false, true}) {
        const size_t n = (size_t)s.N * s.C;
        Floats x = random_bf16_values(n, rng, -3.0f, 3.0f);
        if (nan) x[n / 2] = kNaN;
        const Bf16s xb = to_bf16s(x);
        const float amax = fp8_amax_of(xb.data(), n);
        const Fp8Scale scale = delayed_scale_for(nan ? 3.0f : amax);
        Buffer<Bf16> d_x(be, xb);
        Buffer<Fp8Scale> d_scale(be, {scale});
        Buffer<uint8_t> cast(be, Codes(n, 0x55));
        be.fp8_cast_transpose(cast.get(), nullptr, d_x.get(), s.N, s.C, d_scale.get(), kE4m3);
        const Codes expected = cast.download();
        for (float start : {0.0f, amax / 2, 2 * amax + 1}) {
          SCOPED_TRACE(testing::Message() << s.N << "x" << s.C << " offset " << offset << " start "
                                          << start << (nan ? " with a NaN" : ""));
          const CastAmax got = cast_amax_on(be, x, start, scale, offset);
          expect_identical(got.codes, expected, "the codes against fp8_cast_transpose's");
          const float want = nan ? kNaN : std::max(start, amax);
          EXPECT_EQ(bits_of(got.amax), bits_of(want)) << got.amax << " vs " << want;
          if (row.cuda()) {
            const CastAmax twin = cast_amax_on(backend_cpu(), x, start, scale, 0);
            expect_identical(got.codes, twin.codes, "the codes against the CPU twin's");
            EXPECT_EQ(bits_of(got.amax), bits_of(twin.amax));
          }
        }
      }
}

void amax_fold(const OpRow& row) {
  std::mt19937 rng(61);
  const Backend& be = row.backend();
  for (int count : {0, 1, 5, 1000})
    for (bool nan : {false, true}) {
      if (nan && count == 0) continue;
      Floats amaxes = random_values((size_t)count, rng, 0.0f, 8.0f, /*bf16_exact=*/false);
      if (nan) amaxes[count / 2] = kNaN;
      const float largest = fp8_amax_of(amaxes.data(), amaxes.size());
      for (float start : {0.0f, 4.0f, 9.0f}) {
        SCOPED_TRACE(testing::Message()
                     << count << " amaxes, start " << start << (nan ? " with a NaN" : ""));
        Buffer<float> list(be, amaxes.empty() ? Floats{-1.0f} : amaxes), amax(be, {start});
        be.fp8_amax_fold(amax.get(), list.get(), count);
        const float want = nan ? kNaN : std::max(start, count == 0 ? 0.0f : largest);
        EXPECT_EQ(bits_of(amax.download()[0]), bits_of(want)) << amax.download()[0];
        EXPECT_TRUE(list.guards_intact() && amax.guards_intact()) << "a write outside the buffers";
      }
    }
}

}  // namespace

std::vector<OpCase> fp8_delayed_cases() {
  return {
      {"fp8",
       "rmsnorm_cast",
       kAllRows,
       {"rmsnorm_forward_fp8", "rmsnorm_forward", "fp8_cast_transpose"},
       LLM_BY_DTYPE(rmsnorm_cast)},
      {"fp8",
       "swiglu_cast",
       kAllRows,
       {"swiglu_forward_fp8", "swiglu_forward", "fp8_cast_transpose"},
       LLM_BY_DTYPE(swiglu_cast)},
      {"fp8", "cast_amax", kBf16Rows, {"fp8_cast_amax", "fp8_cast_transpose"}, cast_amax},
      {"fp8", "amax_fold", kBf16Rows, {"fp8_amax_fold"}, amax_fold},
  };
}

}  // namespace llm::op_test
