// The CUDA twins of cast, fill, residual, embedding, RMSNorm, RoPE and SwiGLU
// against their CPU twins on the same random host inputs, fp32 and bf16,
// through the CUDA backend's op table (so the suite builds without CUDA and
// skips without a GPU). Shapes include sizes that are not multiples of the
// kernels' packs and blocks, tiny edge cases, and buffers placed one element
// off alignment so that both the vector and the element-wise paths run.
// Where the GPU does the same fp32 operations in the same order (copies,
// casts, elementwise adds, the embedding backward's sums, the RoPE table) the
// bits must be equal; elsewhere each tolerance says why it is what it is.
// Also: += contracts (outputs pre-filled with nonzero values), overwrite
// contracts (outputs pre-filled with NaN), guard elements never written, and
// identical bits when an op runs twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/bf16.h"
#include "model/backend.h"
#include "model/kernels/cast.h"
#include "model/kernels/embedding.h"
#include "model/kernels/fill.h"
#include "model/kernels/residual.h"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/rope.h"
#include "model/kernels/swiglu.h"
#include "test/gpu_test_support.h"
#include "test/kernel_test_support.h"

namespace {

using llm::Bf16;
using namespace llm::test_support;

const llm::Backend& gpu() { return llm::backend_cuda(); }

// fp32 results whose GPU and CPU computations differ in the order of their
// sums, in fused multiply-adds (nvcc contracts a * b + c by default) or in the
// exp implementation (2 ulp each side): a few ulps of the short sums and
// products involved (<= ~13000 terms of magnitude <= ~4, relative errors of
// order 1e-7 per step); 1e-5 relative plus 1e-5 absolute (for results that
// cancel to near 0) bounds that with a wide margin and still catches any
// wrong term, index or scale.
constexpr Tolerance kReassociation{1e-5, 1e-5};
// A GPU bf16 output against the CPU's fp32 twin on the same (bf16-exact)
// inputs: one round-to-nearest-even moves a value by at most half a bf16 ulp,
// 2^-8 of its magnitude, on top of kReassociation in the fp32 value rounded.
const Tolerance kOneRounding{kReassociation.abs, std::ldexp(1.0, -8) + 2 * kReassociation.rel};
// A GPU bf16 output against the CPU's bf16 twin: both are one rounding of fp32
// values within kReassociation of each other, so where those straddle a
// rounding boundary they land one bf16 ulp apart; an ulp is at most 2^-7 of
// the magnitude (8 significant bits). Twice kOneRounding's half ulp.
const Tolerance kOneBf16Ulp{kReassociation.abs, std::ldexp(1.0, -7) + 2 * kReassociation.rel};

// ---- host data ------------------------------------------------------------------


// Uniform floats rounded through bf16, so both precisions see the same values.
Floats random_bf16_values(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  Floats x = random_floats(n, rng, lo, hi);
  for (float& v : x) v = llm::to_float(llm::to_bf16(v));
  return x;
}


Floats to_floats(const Bf16s& x) {
  Floats out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = llm::to_float(x[i]);
  return out;
}

// ---- comparisons ----------------------------------------------------------------

// |actual - expected| <= abs + rel * |expected| elementwise (NaN fails);
// reports the count of misses and the first few.
void expect_close(const Floats& actual, const Floats& expected, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < actual.size(); i++) {
    const double error = std::fabs((double)actual[i] - expected[i]);
    if (error <= tol.abs + tol.rel * std::fabs(expected[i])) continue;  // false for NaN
    if (++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << actual[i] << " cpu " << expected[i];
  }
  EXPECT_EQ(misses, 0u) << what << ": elements out of tolerance";
}

void expect_close(const Bf16s& actual, const Floats& expected, Tolerance tol,
                  const std::string& what) {
  expect_close(to_floats(actual), expected, tol, what);
}

void expect_close(const Bf16s& actual, const Bf16s& expected, Tolerance tol,
                  const std::string& what) {
  expect_close(to_floats(actual), to_floats(expected), tol, what);
}

template <class T>
void expect_identical(const std::vector<T>& actual, const std::vector<T>& expected,
                      const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < actual.size(); i++) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) == 0) continue;
    if (++misses <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: gpu " << llm::to_float(actual[i]) << " cpu "
                    << llm::to_float(expected[i]) << " (bits differ)";
    }
  }
  EXPECT_EQ(misses, 0u) << what << ": elements with different bits";
}

// ---- device data ----------------------------------------------------------------

// Host data copied `offset` elements into a device buffer, with guard elements
// of a sentinel pattern before it and one after it: offset 1 puts the data off
// 16-byte alignment (DeviceBuffer memory itself is aligned), and the guards
// catch writes outside the range.
template <class T>
class Placed {
 public:
  Placed(const std::vector<T>& host, size_t offset)
      : offset_(offset), count_(host.size()), buffer_(padded(host, offset)) {}

  T* get() const { return buffer_.get() + offset_; }
  std::vector<T> download() const {
    const std::vector<T> all = buffer_.download();
    return std::vector<T>(all.begin() + offset_, all.begin() + offset_ + count_);
  }
  bool guards_intact() const {
    const std::vector<T> all = buffer_.download();
    for (size_t i = 0; i < all.size(); i++) {
      if (i >= offset_ && i < offset_ + count_) continue;
      if (std::memcmp(&all[i], &sentinel(), sizeof(T)) != 0) return false;
    }
    return true;
  }

 private:
  static const T& sentinel() {
    static const T value = [] {
      T v;
      std::memset(&v, 0x7F, sizeof v);  // a huge finite value in fp32 and bf16
      return v;
    }();
    return value;
  }
  static std::vector<T> padded(const std::vector<T>& host, size_t offset) {
    std::vector<T> all(offset + host.size() + 1, sentinel());
    std::copy(host.begin(), host.end(), all.begin() + offset);
    return all;
  }

  size_t offset_, count_;
  DeviceBuffer<T> buffer_;
};

constexpr size_t kOffsets[] = {0, 1};  // aligned, then one element off

// ---- cast -----------------------------------------------------------------------

TEST(GpuCast, F32ToBf16RoundsToNearestEvenLikeTheCpu) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(201);
  for (size_t n : {size_t{1}, size_t{3}, size_t{1001}, size_t{4096 + 3}}) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      // Any bits (inf, NaN, denormals included), plus inf, -0 and ties to even.
      Floats in(n);
      for (float& v : in) v = std::bit_cast<float>((uint32_t)rng());
      in[0] = -0.0f;
      if (n > 3) {
        in[1] = INFINITY;
        in[2] = std::bit_cast<float>(0x3F818000u);  // tie: rounds up to the even 0x3F82
        in[3] = std::bit_cast<float>(0x3F808000u);  // tie: rounds down to the even 0x3F80
      }
      Bf16s expected(n);
      llm::cpu::cast_f32_to_bf16(expected.data(), in.data(), n);

      Placed<float> d_in(in, offset);
      Placed<Bf16> d_out(Bf16s(n, Bf16{0x1234}), offset);
      gpu().cast_f32_to_bf16(d_out.get(), d_in.get(), n);
      const Bf16s out = d_out.download();
      size_t misses = 0;
      for (size_t i = 0; i < n; i++) {
        // A NaN stays a NaN; its payload may differ (the GPU makes it canonical).
        const bool same =
            std::isnan(in[i]) ? std::isnan(llm::to_float(out[i])) : out[i].bits == expected[i].bits;
        if (!same && ++misses <= 5)
          ADD_FAILURE() << "element " << i << ": input bits " << std::hex
                        << std::bit_cast<uint32_t>(in[i]) << " gpu " << out[i].bits << " cpu "
                        << expected[i].bits;
      }
      EXPECT_EQ(misses, 0u);
      EXPECT_TRUE(d_out.guards_intact()) << "wrote outside the range";
    }
  }
}

TEST(GpuCast, Bf16ToF32IsExactForEveryPattern) {
  LLM_SKIP_WITHOUT_GPU();
  Bf16s in(1 << 16);
  for (uint32_t bits = 0; bits < in.size(); bits++) in[bits].bits = (uint16_t)bits;
  for (size_t offset : kOffsets) {
    SCOPED_TRACE(testing::Message() << "offset=" << offset);
    Placed<Bf16> d_in(in, offset);
    Placed<float> d_out(Floats(in.size(), 1.0f), offset);
    gpu().cast_bf16_to_f32(d_out.get(), d_in.get(), in.size());
    const Floats out = d_out.download();
    for (uint32_t bits = 0; bits < in.size(); bits++)
      ASSERT_EQ(std::bit_cast<uint32_t>(out[bits]), bits << 16) << "pattern " << bits;
    EXPECT_TRUE(d_out.guards_intact()) << "wrote outside the range";
  }
}

// ---- fill -----------------------------------------------------------------------

TEST(GpuFill, ZeroesExactlyTheRange) {
  LLM_SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      Placed<float> x(Floats(n, kNaN), offset);
      gpu().f32.fill_zero(x.get(), n);
      for (float v : x.download()) ASSERT_EQ(std::bit_cast<uint32_t>(v), 0u);  // +0
      EXPECT_TRUE(x.guards_intact());

      Placed<Bf16> y(Bf16s(n, llm::to_bf16(kNaN)), offset);
      gpu().bf16.fill_zero(y.get(), n);
      for (Bf16 v : y.download()) ASSERT_EQ(v.bits, 0u);
      EXPECT_TRUE(y.guards_intact());
    }
  }
}

// ---- residual -------------------------------------------------------------------

// One fp32 add, rounded once for bf16, on both sides: identical bits.
TEST(GpuResidual, MatchesCpuBitForBitAndMayAlias) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(202);
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      const Floats a = random_floats(n, rng, -4.0f, 4.0f), b = random_floats(n, rng, -4.0f, 4.0f);
      Floats expected(n);
      llm::cpu::add_vectors(expected.data(), a.data(), b.data(), n);
      const Bf16s a16 = to_bf16s(a), b16 = to_bf16s(b);
      Bf16s expected16(n);
      llm::cpu::add_vectors<Bf16>(expected16.data(), a16.data(), b16.data(), n);

      {  // separate output
        Placed<float> d_a(a, offset), d_b(b, offset), d_out(Floats(n, kNaN), offset);
        gpu().f32.add_vectors(d_out.get(), d_a.get(), d_b.get(), n);
        expect_identical(d_out.download(), expected, "fp32 out");
        EXPECT_TRUE(d_out.guards_intact());
        Placed<Bf16> d_a16(a16, offset), d_b16(b16, offset);
        Placed<Bf16> d_out16(Bf16s(n, llm::to_bf16(kNaN)), offset);
        gpu().bf16.add_vectors(d_out16.get(), d_a16.get(), d_b16.get(), n);
        expect_identical(d_out16.download(), expected16, "bf16 out");
        EXPECT_TRUE(d_out16.guards_intact());
      }
      {  // out aliases a, then b
        Placed<float> d_a(a, offset), d_b(b, offset);
        gpu().f32.add_vectors(d_a.get(), d_a.get(), d_b.get(), n);
        expect_identical(d_a.download(), expected, "fp32 out == a");
        Placed<float> d_a2(a, offset), d_b2(b, offset);
        gpu().f32.add_vectors(d_b2.get(), d_a2.get(), d_b2.get(), n);
        expect_identical(d_b2.download(), expected, "fp32 out == b");
        Placed<Bf16> d_a16(a16, offset), d_b16(b16, offset);
        gpu().bf16.add_vectors(d_b16.get(), d_a16.get(), d_b16.get(), n);
        expect_identical(d_b16.download(), expected16, "bf16 out == b");
      }
    }
  }
}

// ---- embedding ------------------------------------------------------------------

struct EmbeddingShape {
  int N, C, V;
};

// Tiny, repeated tokens (V << N), C off every pack, C spanning several column
// chunks of the backward (> 512), and N beyond the backward's 2048 scanning
// blocks with long runs of one token.
constexpr EmbeddingShape kEmbeddingShapes[] = {{1, 1, 1},     {7, 13, 5},    {40, 70, 3},
                                               {37, 128, 50}, {64, 1032, 9}, {5, 1100, 300},
                                               {3000, 12, 5}, {300, 8, 1}};

TEST(GpuEmbedding, ForwardCopiesRowsExactly) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(203);
  for (const EmbeddingShape& s : kEmbeddingShapes) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message()
                   << "N=" << s.N << " C=" << s.C << " V=" << s.V << " offset=" << offset);
      const Floats wte = random_floats((size_t)s.V * s.C, rng);
      const Ints tokens = random_ints(s.N, s.V, rng);
      Floats expected((size_t)s.N * s.C);
      llm::cpu::embedding_forward(expected.data(), tokens.data(), wte.data(), s.N, s.C);
      const Bf16s wte16 = to_bf16s(wte);
      Bf16s expected16(expected.size());
      llm::cpu::embedding_forward<Bf16>(expected16.data(), tokens.data(), wte16.data(), s.N, s.C);

      DeviceBuffer<int32_t> d_tokens(tokens);
      Placed<float> d_wte(wte, offset), d_out(Floats(expected.size(), kNaN), offset);
      gpu().f32.embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), s.N, s.C);
      expect_identical(d_out.download(), expected, "fp32 out");
      EXPECT_TRUE(d_out.guards_intact());
      Placed<Bf16> d_wte16(wte16, offset);
      Placed<Bf16> d_out16(Bf16s(expected.size(), llm::to_bf16(kNaN)), offset);
      gpu().bf16.embedding_forward(d_out16.get(), d_tokens.get(), d_wte16.get(), s.N, s.C);
      expect_identical(d_out16.download(), expected16, "bf16 out");
      EXPECT_TRUE(d_out16.guards_intact());
    }
  }
}

// The GPU sums each dwte element's contributions in token order onto its old
// value, as the CPU does: the same fp32 adds in the same order, so the same
// bits, onto a nonzero dwte (+=). Run twice for determinism.
TEST(GpuEmbedding, BackwardAccumulatesLikeTheCpuBitForBit) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(204);
  for (const EmbeddingShape& s : kEmbeddingShapes) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message()
                   << "N=" << s.N << " C=" << s.C << " V=" << s.V << " offset=" << offset);
      const Ints tokens = random_ints(s.N, s.V, rng);
      const Floats dout = random_floats((size_t)s.N * s.C, rng);
      const Floats prefill = random_floats((size_t)s.V * s.C, rng);
      Floats expected = prefill;
      llm::cpu::embedding_backward(expected.data(), dout.data(), tokens.data(), s.N, s.C);
      const Bf16s dout16 = to_bf16s(dout);
      Floats expected16 = prefill;
      llm::cpu::embedding_backward<Bf16>(expected16.data(), dout16.data(), tokens.data(), s.N, s.C);

      DeviceBuffer<int32_t> d_tokens(tokens);
      Placed<float> d_dout(dout, offset);
      Placed<Bf16> d_dout16(dout16, offset);
      for (int run = 0; run < 2; run++) {
        SCOPED_TRACE(testing::Message() << "run " << run);
        Placed<float> d_dwte(prefill, offset);
        gpu().f32.embedding_backward(d_dwte.get(), d_dout.get(), d_tokens.get(), s.N, s.C);
        expect_identical(d_dwte.download(), expected, "fp32 dwte");
        EXPECT_TRUE(d_dwte.guards_intact());
        Placed<float> d_dwte16(prefill, offset);
        gpu().bf16.embedding_backward(d_dwte16.get(), d_dout16.get(), d_tokens.get(), s.N, s.C);
        expect_identical(d_dwte16.download(), expected16, "dwte from bf16 dout");
        EXPECT_TRUE(d_dwte16.guards_intact());
      }
    }
  }
}

// ---- rmsnorm --------------------------------------------------------------------

// Off every pack; more columns than one block step (256 threads x 4 fp32 or x 8
// bf16); N above the backward's 1024 row chunks (several rows per chunk); and
// C = 12300, whose backward needs more than 48 KiB of shared memory.
constexpr RowShape kRmsnormShapes[] = {{1, 1},    {3, 7},    {5, 64},    {17, 300},
                                       {4, 1030}, {2, 4104}, {2500, 40}, {3, 12300}};
constexpr float kRmsnormEps = 1e-5f;

TEST(GpuRmsnorm, ForwardMatchesCpu) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(205);
  for (const RowShape& s : kRmsnormShapes) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C << " offset=" << offset);
      const size_t NC = (size_t)s.N * s.C;
      {
        const Floats inp = random_floats(NC, rng, -2.0f, 2.0f), weight = random_floats(s.C, rng);
        Floats out(NC), rstd(s.N);
        llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), s.N, s.C,
                                  kRmsnormEps);
        Placed<float> d_inp(inp, offset), d_weight(weight, offset);
        Placed<float> d_out(Floats(NC, kNaN), offset), d_rstd(Floats(s.N, kNaN), offset);
        gpu().f32.rmsnorm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_weight.get(), s.N, s.C,
                                  kRmsnormEps);
        expect_close(d_out.download(), out, kReassociation, "fp32 out");
        expect_close(d_rstd.download(), rstd, kReassociation, "fp32 rstd");
        EXPECT_TRUE(d_out.guards_intact() && d_rstd.guards_intact());
      }
      {
        const Floats inp = random_bf16_values(NC, rng, -2.0f, 2.0f);
        const Floats weight = random_bf16_values(s.C, rng);
        Floats out(NC), rstd(s.N);  // the fp32 twin on the same values
        llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), s.N, s.C,
                                  kRmsnormEps);
        Bf16s out16(NC);
        Floats rstd16(s.N);
        llm::cpu::rmsnorm_forward<Bf16>(out16.data(), rstd16.data(), to_bf16s(inp).data(),
                                        to_bf16s(weight).data(), s.N, s.C, kRmsnormEps);
        Placed<Bf16> d_inp(to_bf16s(inp), offset), d_weight(to_bf16s(weight), offset);
        Placed<Bf16> d_out(Bf16s(NC, llm::to_bf16(kNaN)), offset);
        Placed<float> d_rstd(Floats(s.N, kNaN), offset);
        gpu().bf16.rmsnorm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_weight.get(), s.N, s.C,
                                   kRmsnormEps);
        const Bf16s gpu_out = d_out.download();
        expect_close(gpu_out, out, kOneRounding, "bf16 out vs fp32 twin");
        expect_close(gpu_out, out16, kOneBf16Ulp, "bf16 out vs bf16 twin");
        expect_close(d_rstd.download(), rstd16, kReassociation, "bf16 rstd");
        EXPECT_TRUE(d_out.guards_intact() && d_rstd.guards_intact());
      }
    }
  }
}

// dinp and dweight are pre-filled (+=); the dot products and the dweight sums
// run in a different order than on the CPU, hence kReassociation.
TEST(GpuRmsnorm, BackwardAccumulatesLikeTheCpu) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(206);
  for (const RowShape& s : kRmsnormShapes) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C << " offset=" << offset);
      const size_t NC = (size_t)s.N * s.C;
      const Floats inp = random_bf16_values(NC, rng, -2.0f, 2.0f);
      const Floats weight = random_bf16_values(s.C, rng);
      const Floats dout = random_bf16_values(NC, rng);
      const Floats dinp_prefill = random_bf16_values(NC, rng);
      const Floats dweight_prefill = random_floats(s.C, rng);
      const Floats rstd = random_floats(s.N, rng, 0.5f, 2.0f);
      {
        Floats dinp = dinp_prefill, dweight = dweight_prefill;
        llm::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(),
                                   weight.data(), rstd.data(), s.N, s.C);
        Placed<float> d_dout(dout, offset), d_inp(inp, offset), d_weight(weight, offset),
            d_rstd(rstd, offset), d_dinp(dinp_prefill, offset), d_dweight(dweight_prefill, offset);
        gpu().f32.rmsnorm_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                   d_weight.get(), d_rstd.get(), s.N, s.C);
        expect_close(d_dinp.download(), dinp, kReassociation, "fp32 dinp");
        expect_close(d_dweight.download(), dweight, kReassociation, "fp32 dweight");
        EXPECT_TRUE(d_dinp.guards_intact() && d_dweight.guards_intact());
      }
      {
        // The fp32 twin on the same values: dinp's pre-fill is bf16-exact, so
        // only the final rounding of dinp separates the precisions.
        Floats dinp = dinp_prefill, dweight = dweight_prefill;
        llm::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(),
                                   weight.data(), rstd.data(), s.N, s.C);
        Bf16s dinp16 = to_bf16s(dinp_prefill);
        Floats dweight16 = dweight_prefill;
        llm::cpu::rmsnorm_backward<Bf16>(dinp16.data(), dweight16.data(), to_bf16s(dout).data(),
                                         to_bf16s(inp).data(), to_bf16s(weight).data(), rstd.data(),
                                         s.N, s.C);
        Placed<Bf16> d_dout(to_bf16s(dout), offset), d_inp(to_bf16s(inp), offset),
            d_weight(to_bf16s(weight), offset), d_dinp(to_bf16s(dinp_prefill), offset);
        Placed<float> d_rstd(rstd, offset), d_dweight(dweight_prefill, offset);
        gpu().bf16.rmsnorm_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                    d_weight.get(), d_rstd.get(), s.N, s.C);
        const Bf16s gpu_dinp = d_dinp.download();
        expect_close(gpu_dinp, dinp, kOneRounding, "bf16 dinp vs fp32 twin");
        expect_close(gpu_dinp, dinp16, kOneBf16Ulp, "bf16 dinp vs bf16 twin");
        expect_close(d_dweight.download(), dweight16, kReassociation, "dweight from bf16");
        EXPECT_TRUE(d_dinp.guards_intact() && d_dweight.guards_intact());
      }
    }
  }
}

// The reductions (sum of squares, dot products, dweight over row chunks) have
// one order per shape: two runs give the same bits, and so do buffers off
// alignment (the element-wise path visits the same columns per thread as the
// vector path).
TEST(GpuRmsnorm, SameBitsEveryRunAndAtAnyAlignment) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(207);
  for (const RowShape& s : {RowShape{2500, 40}, RowShape{9, 1030}, RowShape{3, 4104}}) {
    SCOPED_TRACE(testing::Message() << "N=" << s.N << " C=" << s.C);
    const size_t NC = (size_t)s.N * s.C;
    const Bf16s inp = to_bf16s(random_floats(NC, rng, -2.0f, 2.0f));
    const Bf16s weight = to_bf16s(random_floats(s.C, rng));
    const Bf16s dout = to_bf16s(random_floats(NC, rng));
    auto run = [&](size_t offset) {
      Placed<Bf16> d_inp(inp, offset), d_weight(weight, offset), d_dout(dout, offset);
      Placed<Bf16> d_out(Bf16s(NC), offset), d_dinp(Bf16s(NC), offset);
      Placed<float> d_rstd(Floats(s.N), offset), d_dweight(Floats(s.C), offset);
      gpu().bf16.rmsnorm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_weight.get(), s.N, s.C,
                                 kRmsnormEps);
      gpu().bf16.rmsnorm_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                  d_weight.get(), d_rstd.get(), s.N, s.C);
      Floats all = d_rstd.download();
      const Floats out = to_floats(d_out.download()), dinp = to_floats(d_dinp.download()),
                   dweight = d_dweight.download();
      for (const Floats* part : {&out, &dinp, &dweight})
        all.insert(all.end(), part->begin(), part->end());
      return all;
    };
    const Floats first = run(0);
    expect_same_bits(run(0), first, "second run");
    if (s.C % 8 == 0) expect_same_bits(run(1), first, "one element off alignment");
  }
}

// ---- rope -----------------------------------------------------------------------

struct RopeShape {
  int N, T, n_heads, D, row_stride;
};

// Tiny; D/2 odd (element-wise path); D/2 a multiple of 4 (vector path) with
// heads left unrotated after the first n_heads; an odd row stride (element-wise).
constexpr RopeShape kRopeShapes[] = {{1, 1, 1, 2, 2},
                                     {10, 5, 3, 6, 20},
                                     {8, 4, 4, 16, 80},
                                     {12, 6, 3, 16, 67},
                                     {6, 3, 5, 128, 1024}};
constexpr float kRopeTheta = 10000.0f;

TEST(GpuRope, TableIsTheCpuTableBitForBit) {
  LLM_SKIP_WITHOUT_GPU();
  for (auto [T, D] : {std::pair{1, 2}, std::pair{17, 64}, std::pair{5, 6}, std::pair{300, 128}}) {
    SCOPED_TRACE(testing::Message() << "T=" << T << " D=" << D);
    const size_t count = (size_t)T * (D / 2);
    Floats cos(count), sin(count);
    llm::cpu::rope_table(cos.data(), sin.data(), T, D, kRopeTheta);
    DeviceBuffer<float> d_cos(count), d_sin(count);
    gpu().rope_table(d_cos.get(), d_sin.get(), T, D, kRopeTheta);
    expect_same_bits(d_cos.download(), cos, "cos");
    expect_same_bits(d_sin.download(), sin, "sin");
  }
}

// The same rotation on both sides (fused multiply-adds may differ, hence
// kReassociation); elements outside the rotated heads must come back untouched,
// which the comparison covers since the CPU leaves them as they were.
TEST(GpuRope, ForwardAndBackwardMatchCpu) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(208);
  for (const RopeShape& s : kRopeShapes) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message()
                   << "N=" << s.N << " T=" << s.T << " heads=" << s.n_heads << " D=" << s.D
                   << " stride=" << s.row_stride << " offset=" << offset);
      const size_t half_table = (size_t)s.T * (s.D / 2);
      Floats cos(half_table), sin(half_table);
      llm::cpu::rope_table(cos.data(), sin.data(), s.T, s.D, kRopeTheta);
      Placed<float> d_cos(cos, offset), d_sin(sin, offset);
      const size_t size = (size_t)s.N * s.row_stride;
      const Floats x = random_bf16_values(size, rng, -2.0f, 2.0f);
      for (bool forward : {true, false}) {
        SCOPED_TRACE(forward ? "forward" : "backward");
        auto cpu32 = forward ? llm::cpu::rope_forward<float> : llm::cpu::rope_backward<float>;
        auto cpu16 = forward ? llm::cpu::rope_forward<Bf16> : llm::cpu::rope_backward<Bf16>;
        auto gpu32 = forward ? gpu().f32.rope_forward : gpu().f32.rope_backward;
        auto gpu16 = forward ? gpu().bf16.rope_forward : gpu().bf16.rope_backward;

        Floats expected = x;
        cpu32(expected.data(), cos.data(), sin.data(), s.N, s.T, s.n_heads, s.D, s.row_stride);
        Placed<float> d_x(x, offset);
        gpu32(d_x.get(), d_cos.get(), d_sin.get(), s.N, s.T, s.n_heads, s.D, s.row_stride);
        expect_close(d_x.download(), expected, kReassociation, "fp32 x");
        EXPECT_TRUE(d_x.guards_intact());

        Bf16s expected16 = to_bf16s(x);
        cpu16(expected16.data(), cos.data(), sin.data(), s.N, s.T, s.n_heads, s.D, s.row_stride);
        Placed<Bf16> d_x16(to_bf16s(x), offset);
        gpu16(d_x16.get(), d_cos.get(), d_sin.get(), s.N, s.T, s.n_heads, s.D, s.row_stride);
        const Bf16s gpu_x16 = d_x16.download();
        expect_close(gpu_x16, expected, kOneRounding, "bf16 x vs fp32 twin");
        expect_close(gpu_x16, expected16, kOneBf16Ulp, "bf16 x vs bf16 twin");
        EXPECT_TRUE(d_x16.guards_intact());
      }
    }
  }
}

// ---- swiglu ---------------------------------------------------------------------

constexpr RowShape kSwigluShapes[] = {{1, 1}, {3, 5}, {4, 64}, {7, 1000}, {2, 2056}, {5, 4100}};

// Same expressions on both sides; the exps differ by up to 2 ulp each and
// products may fuse differently: kReassociation. Outputs are pre-filled with
// NaN (forward and backward overwrite).
TEST(GpuSwiglu, ForwardAndBackwardMatchCpu) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(209);
  for (const RowShape& s : kSwigluShapes) {
    for (size_t offset : kOffsets) {
      SCOPED_TRACE(testing::Message() << "N=" << s.N << " F=" << s.C << " offset=" << offset);
      const int N = s.N, F = s.C;
      const size_t NF = (size_t)N * F;
      const Floats h13 = random_bf16_values(2 * NF, rng, -4.0f, 4.0f);
      const Floats dout = random_bf16_values(NF, rng);
      Floats out(NF), dh13(2 * NF);
      llm::cpu::swiglu_forward(out.data(), h13.data(), N, F);
      llm::cpu::swiglu_backward(dh13.data(), dout.data(), h13.data(), N, F);
      {
        Placed<float> d_h13(h13, offset), d_dout(dout, offset);
        Placed<float> d_out(Floats(NF, kNaN), offset), d_dh13(Floats(2 * NF, kNaN), offset);
        gpu().f32.swiglu_forward(d_out.get(), d_h13.get(), N, F);
        gpu().f32.swiglu_backward(d_dh13.get(), d_dout.get(), d_h13.get(), N, F);
        expect_close(d_out.download(), out, kReassociation, "fp32 out");
        expect_close(d_dh13.download(), dh13, kReassociation, "fp32 dh13");
        EXPECT_TRUE(d_out.guards_intact() && d_dh13.guards_intact());
      }
      {
        const Bf16s h13_16 = to_bf16s(h13), dout16 = to_bf16s(dout);
        Bf16s out16(NF), dh13_16(2 * NF);
        llm::cpu::swiglu_forward<Bf16>(out16.data(), h13_16.data(), N, F);
        llm::cpu::swiglu_backward<Bf16>(dh13_16.data(), dout16.data(), h13_16.data(), N, F);
        Placed<Bf16> d_h13(h13_16, offset), d_dout(dout16, offset);
        Placed<Bf16> d_out(Bf16s(NF, llm::to_bf16(kNaN)), offset);
        Placed<Bf16> d_dh13(Bf16s(2 * NF, llm::to_bf16(kNaN)), offset);
        gpu().bf16.swiglu_forward(d_out.get(), d_h13.get(), N, F);
        gpu().bf16.swiglu_backward(d_dh13.get(), d_dout.get(), d_h13.get(), N, F);
        const Bf16s gpu_out = d_out.download(), gpu_dh13 = d_dh13.download();
        expect_close(gpu_out, out, kOneRounding, "bf16 out vs fp32 twin");
        expect_close(gpu_out, out16, kOneBf16Ulp, "bf16 out vs bf16 twin");
        expect_close(gpu_dh13, dh13, kOneRounding, "bf16 dh13 vs fp32 twin");
        expect_close(gpu_dh13, dh13_16, kOneBf16Ulp, "bf16 dh13 vs bf16 twin");
        EXPECT_TRUE(d_out.guards_intact() && d_dh13.guards_intact());
      }
    }
  }
}

}  // namespace
