// Op cases of the elementwise families: cast (fp32 <-> bf16), fill_zero and
// add_vectors (the residual), on every row they have (see op_harness.h).
// Invariant: these ops do one fp32 operation (or none) per element, so every
// check is bit for bit: a cast equals float_to_bf16 / the exact widening, a
// fill writes +0, an add equals the reference within one correctly rounded
// float addition (cpu f32), the fp32 sum rounded once (cpu bf16) or the CPU
// twin's bits (cuda). Guard elements around every output must survive.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {
namespace {

// ---- cast -----------------------------------------------------------------------

// Any bits (inf, NaN, denormals included), sizes off every vector pack, plus
// -0, inf and ties to even in both directions.
void cast_f32_to_bf16(const OpRow& row) {
  std::mt19937 rng(201);
  for (size_t n : {size_t{1}, size_t{3}, size_t{1001}, size_t{4096 + 3}}) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      Floats in(n);
      for (float& v : in) v = std::bit_cast<float>((uint32_t)rng());
      in[0] = -0.0f;
      if (n > 3) {
        in[1] = INFINITY;
        in[2] = std::bit_cast<float>(0x3F818000u);  // tie: rounds up to the even 0x3F82
        in[3] = std::bit_cast<float>(0x3F808000u);  // tie: rounds down to the even 0x3F80
      }
      // cpu: float_to_bf16 of each element; cuda: the CPU twin's output.
      Bf16s expected(n);
      if (row.cuda()) {
        backend_cpu().cast_f32_to_bf16(expected.data(), in.data(), n);
      } else {
        for (size_t i = 0; i < n; i++) expected[i].bits = float_to_bf16(in[i]);
      }
      Buffer<float> d_in(row.backend(), in, offset);
      Buffer<Bf16> d_out(row.backend(), Bf16s(n, Bf16{0x1234}), offset);
      row.backend().cast_f32_to_bf16(d_out.get(), d_in.get(), n);
      const Bf16s out = d_out.download();
      size_t misses = 0;
      for (size_t i = 0; i < n; i++) {
        // A NaN stays a NaN; on the GPU its payload may differ (it is made
        // canonical); on the CPU the bits are float_to_bf16's.
        const bool same = std::isnan(in[i]) && row.cuda() ? std::isnan(to_float(out[i]))
                                                          : out[i].bits == expected[i].bits;
        if (!same && ++misses <= 5)
          ADD_FAILURE() << "element " << i << ": input bits " << std::hex
                        << std::bit_cast<uint32_t>(in[i]) << " got " << out[i].bits << " expected "
                        << expected[i].bits;
      }
      EXPECT_EQ(misses, 0u);
      EXPECT_TRUE(d_out.guards_intact()) << "wrote outside the range";
    }
  }
}

void cast_bf16_to_f32(const OpRow& row) {
  Bf16s in(1 << 16);
  for (uint32_t bits = 0; bits < in.size(); bits++) in[bits].bits = (uint16_t)bits;
  for (size_t offset : offsets_for(row)) {
    SCOPED_TRACE(testing::Message() << "offset=" << offset);
    Buffer<Bf16> d_in(row.backend(), in, offset);
    Buffer<float> d_out(row.backend(), Floats(in.size(), 1.0f), offset);
    row.backend().cast_bf16_to_f32(d_out.get(), d_in.get(), in.size());
    const Floats out = d_out.download();
    for (uint32_t bits = 0; bits < in.size(); bits++)
      ASSERT_EQ(std::bit_cast<uint32_t>(out[bits]), bits << 16) << "pattern " << bits;
    EXPECT_TRUE(d_out.guards_intact()) << "wrote outside the range";
  }
}

// ---- fill -----------------------------------------------------------------------

// NaN before, +0 after, exactly the range (the guards catch one element more).
template <class T>
void fill_zero(const OpRow& row) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      Buffer<T> x(row.backend(), nan_filled<T>(n), offset);
      row.backend().ops<T>().fill_zero(x.get(), n);
      for (T v : x.download()) {
        uint32_t bits = 0;
        std::memcpy(&bits, &v, sizeof v);
        ASSERT_EQ(bits, 0u) << "not +0";
      }
      EXPECT_TRUE(x.guards_intact());
    }
  }
}

// ---- residual -------------------------------------------------------------------

// out = a + b into a separate output (NaN prefill), then with out aliasing a
// and aliasing b: the aliased results are the separate output's bits.
template <class T>
void residual_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(202);
  for (size_t n : {size_t{1}, size_t{7}, size_t{13}, size_t{1000}, size_t{1001}, size_t{4099}}) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      const float range = row.cuda() ? 4.0f : 1.0f;
      const Floats a = random_values(n, rng, -range, range, bf16);
      const Floats b = random_values(n, rng, -range, range, bf16);
      const std::vector<T> a_t = stored<T>(a), b_t = stored<T>(b);
      const Backend& be = row.backend();
      Buffer<T> d_a(be, a_t, offset), d_b(be, b_t, offset), d_out(be, nan_filled<T>(n), offset);
      be.ops<T>().add_vectors(d_out.get(), d_a.get(), d_b.get(), n);
      const std::vector<T> out = d_out.download();
      EXPECT_TRUE(d_out.guards_intact());
      if (row.cuda()) {
        // One fp32 add, rounded once for bf16, on both sides: identical bits.
        std::vector<T> expected(n);
        backend_cpu().ops<T>().add_vectors(expected.data(), a_t.data(), b_t.data(), n);
        expect_identical(out, expected, "out vs cpu twin");
      } else if (bf16) {
        Floats sum(n);
        backend_cpu().f32.add_vectors(sum.data(), a.data(), b.data(), n);
        expect_fp32_rounded(out, sum, "out");
      } else {
        // One correctly rounded float addition: |error| <= 2^-24 |exact sum|.
        const Tolerance one_rounding{0, std::ldexp(1.0, -24)};
        expect_close(out, reference::residual_forward(to_doubles(a), to_doubles(b)), one_rounding,
                     "out");
      }
      Buffer<T> d_a2(be, a_t, offset), d_b2(be, b_t, offset);
      be.ops<T>().add_vectors(d_a2.get(), d_a2.get(), d_b2.get(), n);
      expect_identical(d_a2.download(), out, "out aliasing a");
      Buffer<T> d_a3(be, a_t, offset), d_b3(be, b_t, offset);
      be.ops<T>().add_vectors(d_b3.get(), d_a3.get(), d_b3.get(), n);
      expect_identical(d_b3.download(), out, "out aliasing b");
    }
  }
}

}  // namespace

std::vector<OpCase> cast_fill_residual_cases() {
  return {
      {"cast", "f32_to_bf16", kBf16Rows, {"cast_f32_to_bf16"}, cast_f32_to_bf16},
      {"cast", "bf16_to_f32_every_pattern", kBf16Rows, {"cast_bf16_to_f32"}, cast_bf16_to_f32},
      {"fill", "zeroes_exactly_the_range", kAllRows, {"fill_zero"}, LLM_BY_DTYPE(fill_zero)},
      {"residual", "forward_may_alias", kAllRows, {"add_vectors"}, LLM_BY_DTYPE(residual_forward)},
  };
}

}  // namespace llm::op_test
