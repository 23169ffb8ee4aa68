// Op cases of embedding (lookup and its scatter-add backward, over the whole
// vocabulary and over a strict slice of it as one rank of a vocabulary split
// holds) and RMSNorm (forward with rstd, backward), on every row (see
// op_harness.h), plus their determinism: bits independent of the CPU thread
// count, and on CUDA the same bits on a repeat and (rmsnorm bf16) at any
// alignment.
// Invariant: the embedding is exact everywhere (a lookup copies bits or
// writes zeros; its backward adds the same fp32 terms in token order on every
// backend, so the slices of a split give the whole's bits); RMSNorm
// reductions differ only in summation order, within kReassociation. Outputs
// that accumulate (dwte, dinp, dweight) are pre-filled with nonzero values.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {
namespace {

// ---- embedding ------------------------------------------------------------------

struct EmbeddingShape {
  int N, C, V;
};

// cpu rows: small enough for finite differences, V < N so tokens repeat.
constexpr EmbeddingShape kCpuEmbeddingShapes[] = {{7, 13, 5}, {1, 1, 1}, {40, 70, 3}};
// cuda rows: tiny, repeated tokens (V << N), C off every pack, C spanning
// several column chunks of the backward (> 512), and N beyond the backward's
// 2048 scanning blocks with long runs of one token.
constexpr EmbeddingShape kCudaEmbeddingShapes[] = {{1, 1, 1},     {7, 13, 5},    {40, 70, 3},
                                                   {37, 128, 50}, {64, 1032, 9}, {5, 1100, 300},
                                                   {3000, 12, 5}, {300, 8, 1}};

std::vector<EmbeddingShape> embedding_shapes(const OpRow& row) {
  return shapes_for(row, kCpuEmbeddingShapes, kCudaEmbeddingShapes);
}

// A lookup copies bits: no tolerance on any row.
template <class T>
void embedding_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(203);
  for (auto [N, C, V] : embedding_shapes(row)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message()
                   << "N=" << N << " C=" << C << " V=" << V << " offset=" << offset);
      const Floats wte = random_values((size_t)V * C, rng, -1.0f, 1.0f, bf16);
      const Ints tokens = random_ints(N, V, rng);
      const std::vector<T> wte_t = stored<T>(wte);
      Buffer<int32_t> d_tokens(row.backend(), tokens);
      Buffer<T> d_wte(row.backend(), wte_t, offset);
      Buffer<T> d_out(row.backend(), nan_filled<T>((size_t)N * C), offset);
      row.backend().ops<T>().embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), N, C, 0,
                                               V);
      const std::vector<T> out = d_out.download();
      EXPECT_TRUE(d_out.guards_intact());
      if (row.cuda()) {
        std::vector<T> expected(out.size());
        backend_cpu().ops<T>().embedding_forward(expected.data(), tokens.data(), wte_t.data(), N, C,
                                                 0, V);
        expect_identical(out, expected, "out vs cpu twin");
      } else if constexpr (std::is_same_v<T, Bf16>) {
        Floats fp32(out.size());
        backend_cpu().f32.embedding_forward(fp32.data(), tokens.data(), wte.data(), N, C, 0, V);
        expect_rounded_once(out, fp32, "out");
      } else {
        expect_close(out, reference::embedding_forward(tokens, to_doubles(wte), N, C), {0, 0},
                     "out");
      }
    }
  }
}

// dwte (fp32 in both precisions) += the rows of dout by token; the widened bf16
// dout is exact, so the bf16 entry point adds the same terms in the same order
// as fp32 (same bits), and the GPU sums each dwte element's contributions in
// token order onto its old value, as the CPU does (same bits). Run twice.
template <class T>
void embedding_backward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(204);
  for (auto [N, C, V] : embedding_shapes(row)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message()
                   << "N=" << N << " C=" << C << " V=" << V << " offset=" << offset);
      const Ints tokens = random_ints(N, V, rng);
      const Floats dout = random_values((size_t)N * C, rng, -1.0f, 1.0f, bf16);
      const Floats prefill = random_values((size_t)V * C, rng, -1.0f, 1.0f, bf16);
      const std::vector<T> dout_t = stored<T>(dout);
      Floats expected = prefill;
      Vec fd_expected;  // cpu f32: prefill + finite-difference gradient
      if (row.cuda()) {
        backend_cpu().ops<T>().embedding_backward(expected.data(), dout_t.data(), tokens.data(), N,
                                                  C, 0, V);
      } else if (bf16) {
        backend_cpu().f32.embedding_backward(expected.data(), dout.data(), tokens.data(), N, C, 0,
                                             V);
      }
      if (row.cpu() && !bf16) {
        // The gradient of a lookup does not depend on wte; any point will do.
        const Vec wte = to_doubles(random_floats((size_t)V * C, rng));
        const Vec grad = finite_difference_gradient(
            [&](const Vec& w) { return reference::embedding_forward(tokens, w, N, C); }, wte,
            to_doubles(dout));
        fd_expected = add(to_doubles(prefill), grad);
      }
      Buffer<int32_t> d_tokens(row.backend(), tokens);
      Buffer<T> d_dout(row.backend(), dout_t, offset);
      for (int run = 0; run < 2; run++) {
        SCOPED_TRACE(testing::Message() << "run " << run);
        Buffer<float> d_dwte(row.backend(), prefill, offset);
        row.backend().ops<T>().embedding_backward(d_dwte.get(), d_dout.get(), d_tokens.get(), N, C,
                                                  0, V);
        const Floats dwte = d_dwte.download();
        EXPECT_TRUE(d_dwte.guards_intact());
        if (row.cuda() || bf16) {
          expect_identical(dwte, expected, "dwte (+=)");
        } else {
          expect_close(dwte, fd_expected, kBackwardTolerance, "dwte (+=)");
        }
      }
    }
  }
}

// Many repeats of each token, several column blocks; the whole vocabulary and
// a slice of it.
template <class T>
void embedding_backward_deterministic(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(3);
  const int N = 301, C = 150, V = 7;
  const Ints tokens = random_ints(N, V, rng);
  const std::vector<T> dout = stored<T>(random_values((size_t)N * C, rng, -1.0f, 1.0f, bf16));
  const Floats prefill = random_values((size_t)V * C, rng, -1.0f, 1.0f, bf16);
  Buffer<int32_t> d_tokens(row.backend(), tokens);
  Buffer<T> d_dout(row.backend(), dout);
  for (auto [begin, rows] : {std::pair{0, V}, std::pair{2, 4}}) {
    SCOPED_TRACE(testing::Message() << "slice [" << begin << ", " << begin + rows << ")");
    expect_repeatable(
        row,
        [&] {
          Buffer<float> d_dwte(row.backend(),
                               Floats(prefill.begin(), prefill.begin() + (size_t)rows * C));
          row.backend().ops<T>().embedding_backward(d_dwte.get(), d_dout.get(), d_tokens.get(), N,
                                                    C, begin, rows);
          return d_dwte.download();
        },
        "dwte");
  }
}

// ---- embedding over a vocabulary slice ------------------------------------------

// A vocabulary of V rows of which a rank holds [begin, begin + rows), a strict
// sub-range.
struct SliceShape {
  int N, C, V, begin, rows;
};
// cpu rows: the slice at the start, in the middle and one row at the end.
constexpr SliceShape kCpuSliceShapes[] = {{40, 13, 9, 3, 4}, {7, 5, 5, 0, 2}, {30, 3, 6, 5, 1}};
// cuda rows: those, plus C off every pack, C over several column chunks of the
// backward, and N beyond its 2048 scanning blocks with long runs.
constexpr SliceShape kCudaSliceShapes[] = {{40, 13, 9, 3, 4},   {7, 5, 5, 0, 2},
                                           {30, 3, 6, 5, 1},    {37, 128, 50, 10, 20},
                                           {64, 1032, 9, 3, 5}, {3000, 12, 5, 1, 3}};

// The three slices [0, begin), [begin, begin + rows), [begin + rows, V) of a
// split, as (begin, rows); empty ones left out.
std::vector<std::pair<int, int>> split_of(const SliceShape& s) {
  std::vector<std::pair<int, int>> slices;
  for (auto [b, r] : {std::pair{0, s.begin}, std::pair{s.begin, s.rows},
                      std::pair{s.begin + s.rows, s.V - s.begin - s.rows}})
    if (r > 0) slices.push_back({b, r});
  return slices;
}

// Tokens over the whole vocabulary [0, V), the first inside the slice and the
// last outside it, so both kinds are exercised.
Ints slice_tokens(const SliceShape& s, std::mt19937& rng) {
  Ints tokens = random_ints(s.N, s.V, rng);
  tokens.front() = s.begin;
  tokens.back() = s.begin + s.rows < s.V ? s.begin + s.rows : s.begin - 1;
  return tokens;
}

bool in_slice(int32_t token, const SliceShape& s) {
  return token >= s.begin && token < s.begin + s.rows;
}

// The lookup in a slice: rows of tokens inside it are wte's rows, the others
// zeros (the output is NaN-filled first, so they must be written); cuda
// matches the CPU twin bit for bit, cpu bf16 the fp32 twin rounded (exact),
// cpu f32 the reference with the slice applied. On every row, the outputs of
// the split's slices sum to the whole vocabulary's lookup exactly.
template <class T>
void embedding_forward_slice(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  const Backend& be = row.backend();
  std::mt19937 rng(205);
  for (const SliceShape& s : shapes_for(row, kCpuSliceShapes, kCudaSliceShapes)) {
    const auto [N, C, V, begin, rows] = s;
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " V=" << V << " slice ["
                                      << begin << ", " << begin + rows << ") offset=" << offset);
      const Floats wte = random_values((size_t)V * C, rng, -1.0f, 1.0f, bf16);
      const Ints tokens = slice_tokens(s, rng);
      Buffer<int32_t> d_tokens(be, tokens);
      // The op on rows [b, b + r) of wte.
      auto lookup = [&](int b, int r) {
        const Floats slice(wte.begin() + (size_t)b * C, wte.begin() + (size_t)(b + r) * C);
        Buffer<T> d_wte(be, stored<T>(slice), offset);
        Buffer<T> d_out(be, nan_filled<T>((size_t)N * C), offset);
        be.ops<T>().embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), N, C, b, r);
        EXPECT_TRUE(d_out.guards_intact());
        return d_out.download();
      };
      const std::vector<T> out = lookup(begin, rows);
      const Floats slice(wte.begin() + (size_t)begin * C, wte.begin() + (size_t)(begin + rows) * C);
      if (row.cuda()) {
        std::vector<T> expected(out.size());
        backend_cpu().ops<T>().embedding_forward(expected.data(), tokens.data(),
                                                 stored<T>(slice).data(), N, C, begin, rows);
        expect_identical(out, expected, "out vs cpu twin");
      } else if constexpr (bf16) {
        Floats fp32(out.size());
        backend_cpu().f32.embedding_forward(fp32.data(), tokens.data(), slice.data(), N, C, begin,
                                            rows);
        expect_rounded_once(out, fp32, "out");
      } else {
        expect_close(out, reference::embedding_forward(tokens, to_doubles(slice), N, C, begin),
                     {0, 0}, "out");
      }
      const Floats values = to_floats(out);
      for (int n = 0; n < N; n++)
        for (int c = 0; c < C && !in_slice(tokens[n], s); c++)
          ASSERT_EQ(values[(size_t)n * C + c], 0.0f)
              << "token " << tokens[n] << " outside the slice";
      Doubles sum((size_t)N * C, 0.0);
      for (auto [b, r] : split_of(s)) sum = add(sum, to_doubles(to_floats(lookup(b, r))));
      expect_close(sum, to_doubles(to_floats(lookup(0, V))), {0, 0}, "sum of the slices");
    }
  }
}

// The gradient in a slice: dwte (rows, C), pre-filled, gains the dout rows of
// the tokens inside it only; cpu f32 against finite differences of the
// reference with the slice applied, cpu bf16 the fp32 twin's bits, cuda the
// CPU twin's bits. On every row, the split's slices of dwte, concatenated, are
// the whole vocabulary's dwte bit for bit (each element sums the same terms
// in the same order).
template <class T>
void embedding_backward_slice(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  const Backend& be = row.backend();
  std::mt19937 rng(206);
  for (const SliceShape& s : shapes_for(row, kCpuSliceShapes, kCudaSliceShapes)) {
    const auto [N, C, V, begin, rows] = s;
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " V=" << V << " slice ["
                                      << begin << ", " << begin + rows << ") offset=" << offset);
      const Ints tokens = slice_tokens(s, rng);
      const Floats dout = random_values((size_t)N * C, rng, -1.0f, 1.0f, bf16);
      const Floats prefill = random_values((size_t)V * C, rng, -1.0f, 1.0f, bf16);
      const std::vector<T> dout_t = stored<T>(dout);
      Buffer<int32_t> d_tokens(be, tokens);
      Buffer<T> d_dout(be, dout_t, offset);
      // The op on rows [b, b + r) of the pre-filled dwte.
      auto backward = [&](int b, int r) {
        Buffer<float> d_dwte(
            be, Floats(prefill.begin() + (size_t)b * C, prefill.begin() + (size_t)(b + r) * C),
            offset);
        be.ops<T>().embedding_backward(d_dwte.get(), d_dout.get(), d_tokens.get(), N, C, b, r);
        EXPECT_TRUE(d_dwte.guards_intact());
        return d_dwte.download();
      };
      const Floats dwte = backward(begin, rows);
      Floats expected(prefill.begin() + (size_t)begin * C,
                      prefill.begin() + (size_t)(begin + rows) * C);
      if (row.cuda()) {
        backend_cpu().ops<T>().embedding_backward(expected.data(), dout_t.data(), tokens.data(), N,
                                                  C, begin, rows);
        expect_identical(dwte, expected, "dwte (+=) vs cpu twin");
      } else if (bf16) {
        backend_cpu().f32.embedding_backward(expected.data(), dout.data(), tokens.data(), N, C,
                                             begin, rows);
        expect_identical(dwte, expected, "dwte (+=) vs fp32 twin");
      } else {
        const Vec wte = to_doubles(random_floats((size_t)rows * C, rng));
        const Vec grad = finite_difference_gradient(
            [&](const Vec& w) { return reference::embedding_forward(tokens, w, N, C, begin); }, wte,
            to_doubles(dout));
        expect_close(dwte, add(to_doubles(expected), grad), kBackwardTolerance, "dwte (+=)");
      }
      Floats joined;
      for (auto [b, r] : split_of(s)) append(joined, backward(b, r));
      expect_identical(joined, backward(0, V), "the slices' dwte vs the whole vocabulary's");
    }
  }
}

// ---- rmsnorm --------------------------------------------------------------------

constexpr float kRmsnormEps = 1e-5f;
// cpu rows: small enough for finite differences.
constexpr RowShape kCpuRmsnormShapes[] = {{7, 13}, {1, 1}, {5, 64}, {3, 130}};
// cuda rows: off every pack; more columns than one block step (256 threads x 4
// fp32 or x 8 bf16); N above the backward's 1024 row chunks (several rows per
// chunk); and C = 12300, whose backward needs more than 48 KiB of shared memory.
constexpr RowShape kCudaRmsnormShapes[] = {{1, 1},    {3, 7},    {5, 64},    {17, 300},
                                           {4, 1030}, {2, 4104}, {2500, 40}, {3, 12300}};

std::vector<RowShape> rmsnorm_shapes(const OpRow& row) {
  return shapes_for(row, kCpuRmsnormShapes, kCudaRmsnormShapes);
}

// The row's sum of squares may be summed in another order by each
// instantiation and device, so out and rstd are compared within tolerances,
// not bit for bit: kForwardTolerance (cpu f32 vs reference), kOneRounding and
// kReassociation (cpu bf16 out and rstd vs fp32), kReassociation (cuda f32),
// kOneRoundingAcrossDevices / kOneBf16Ulp / kReassociation (cuda bf16 out vs
// the fp32 and bf16 twins, rstd).
template <class T>
void rmsnorm_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(205);
  // cpu f32: |inp| <= 1, where eps is a visible part of mean(inp^2).
  const float range = row.cpu() && !bf16 ? 1.0f : 2.0f;
  for (auto [N, C] : rmsnorm_shapes(row)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " offset=" << offset);
      const size_t NC = (size_t)N * C;
      const Floats inp = small_first_row(random_values(NC, rng, -range, range, bf16), C);
      const Floats weight = random_values(C, rng, -1.0f, 1.0f, bf16);
      const std::vector<T> inp_t = stored<T>(inp), weight_t = stored<T>(weight);
      Buffer<T> d_inp(row.backend(), inp_t, offset), d_weight(row.backend(), weight_t, offset);
      Buffer<T> d_out(row.backend(), nan_filled<T>(NC), offset);
      Buffer<float> d_rstd(row.backend(), Floats(N, kNaN), offset);
      row.backend().ops<T>().rmsnorm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_weight.get(),
                                             N, C, kRmsnormEps, nullptr);
      const std::vector<T> out = d_out.download();
      const Floats rstd = d_rstd.download();
      EXPECT_TRUE(d_out.guards_intact() && d_rstd.guards_intact());
      Floats out32(NC), rstd32(N);  // the fp32 twin on the same values
      backend_cpu().f32.rmsnorm_forward(out32.data(), rstd32.data(), inp.data(), weight.data(), N,
                                        C, kRmsnormEps, nullptr);
      if (row.cuda()) {
        std::vector<T> out_twin(NC);
        Floats rstd_twin(N);
        backend_cpu().ops<T>().rmsnorm_forward(out_twin.data(), rstd_twin.data(), inp_t.data(),
                                               weight_t.data(), N, C, kRmsnormEps, nullptr);
        expect_matches_cpu_twins(out, out32, out_twin, "out");
        expect_close(rstd, rstd_twin, kReassociation, "rstd");
      } else if (bf16) {
        expect_close(out, out32, kOneRounding, "out");
        expect_close(rstd, rstd32, kReassociation, "rstd");
      } else {
        Vec ref_rstd;
        const Vec ref = reference::rmsnorm_forward(to_doubles(inp), to_doubles(weight), N, C,
                                                   kRmsnormEps, &ref_rstd);
        expect_close(out, ref, kForwardTolerance, "out");
        expect_close(rstd, ref_rstd, kForwardTolerance, "rstd");
      }
    }
  }
}

// dinp (storage type) and dweight (fp32) are pre-filled (+=), dinp's prefill
// bf16-exact so that only the final rounding of dinp separates the
// precisions; rstd is the fp32 forward's. Tolerances as for the forward, with
// finite differences (kBackwardTolerance) on the cpu f32 row.
template <class T>
void rmsnorm_backward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(206);
  const float range = row.cpu() && !bf16 ? 1.0f : 2.0f;  // as for the forward
  for (auto [N, C] : rmsnorm_shapes(row)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " offset=" << offset);
      const size_t NC = (size_t)N * C;
      const Floats inp = small_first_row(random_values(NC, rng, -range, range, bf16), C);
      const Floats weight = random_values(C, rng, -1.0f, 1.0f, bf16);
      const Floats dout = random_values(NC, rng, -1.0f, 1.0f, bf16);
      const Floats dinp_prefill = random_values(NC, rng, -1.0f, 1.0f, bf16);
      const Floats dweight_prefill = random_floats(C, rng);
      Floats out32(NC), rstd(N);
      backend_cpu().f32.rmsnorm_forward(out32.data(), rstd.data(), inp.data(), weight.data(), N, C,
                                        kRmsnormEps, nullptr);
      const std::vector<T> inp_t = stored<T>(inp), weight_t = stored<T>(weight);
      const std::vector<T> dout_t = stored<T>(dout);
      const Backend& be = row.backend();
      Buffer<T> d_dout(be, dout_t, offset), d_inp(be, inp_t, offset),
          d_weight(be, weight_t, offset);
      Buffer<T> d_dinp(be, stored<T>(dinp_prefill), offset);
      Buffer<float> d_rstd(be, rstd, offset), d_dweight(be, dweight_prefill, offset);
      be.ops<T>().rmsnorm_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                   d_weight.get(), d_rstd.get(), N, C, nullptr);
      const std::vector<T> dinp = d_dinp.download();
      const Floats dweight = d_dweight.download();
      EXPECT_TRUE(d_dinp.guards_intact() && d_dweight.guards_intact());
      Floats dinp32 = dinp_prefill, dweight32 = dweight_prefill;  // the fp32 twin
      backend_cpu().f32.rmsnorm_backward(dinp32.data(), dweight32.data(), dout.data(), inp.data(),
                                         weight.data(), rstd.data(), N, C, nullptr);
      if (row.cuda()) {
        std::vector<T> dinp_twin = stored<T>(dinp_prefill);
        Floats dweight_twin = dweight_prefill;
        backend_cpu().ops<T>().rmsnorm_backward(dinp_twin.data(), dweight_twin.data(),
                                                dout_t.data(), inp_t.data(), weight_t.data(),
                                                rstd.data(), N, C, nullptr);
        expect_matches_cpu_twins(dinp, dinp32, dinp_twin, "dinp");
        // dweight[c] sums N terms dy * x * s of both signs over the rows (the
        // kernel by row chunks, the twin row by row): bounded by their sum of
        // absolute values, not by the (cancelled) result.
        Doubles abs_term_sums(C);
        for (int c = 0; c < C; c++) {
          abs_term_sums[c] = std::fabs(dweight_prefill[c]);
          for (int n = 0; n < N; n++)
            abs_term_sums[c] += std::fabs((double)to_float(dout_t[(size_t)n * C + c]) *
                                          to_float(inp_t[(size_t)n * C + c]) * rstd[n]);
        }
        const Doubles twin = to_doubles(dweight_twin);
        expect_within(to_doubles(dweight), twin, reordered_sum_bounds(twin, abs_term_sums, N + 1),
                      "dweight (+=)");
      } else if (bf16) {
        expect_close(dinp, dinp32, kOneRounding, "dinp (+=)");
        expect_close(dweight, dweight32, kReassociation, "dweight (+=)");
      } else {
        const Vec x = to_doubles(inp), w = to_doubles(weight), dy = to_doubles(dout);
        const Vec grad_inp = finite_difference_gradient(
            [&](const Vec& xs) { return reference::rmsnorm_forward(xs, w, N, C, kRmsnormEps); }, x,
            dy);
        const Vec grad_weight = finite_difference_gradient(
            [&](const Vec& ws) { return reference::rmsnorm_forward(x, ws, N, C, kRmsnormEps); }, w,
            dy);
        expect_close(dinp, add(to_doubles(dinp_prefill), grad_inp), kBackwardTolerance,
                     "dinp (+=)");
        expect_close(dweight, add(to_doubles(dweight_prefill), grad_weight), kBackwardTolerance,
                     "dweight (+=)");
      }
    }
  }
}

// The reductions (sum of squares, dot products, dweight over row chunks) have
// one order per shape: forward and backward give the same bits at 1, 2 and 3
// CPU threads (N = 97: uneven row splits; C = 200: several column blocks of
// dweight), and on CUDA (bf16) on a repeat and at one element off alignment
// (the element-wise path visits the same columns per thread as the vector path).
template <class T>
void rmsnorm_deterministic(const OpRow& row) {
  std::mt19937 rng(207);
  const std::vector<RowShape> shapes = row.cuda()
                                           ? std::vector<RowShape>{{2500, 40}, {9, 1030}, {3, 4104}}
                                           : std::vector<RowShape>{{97, 200}};
  for (auto [N, C] : shapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    const size_t NC = (size_t)N * C;
    const bool bf16_exact = std::is_same_v<T, Bf16> || row.cuda();
    const float range = row.cuda() ? 2.0f : 1.0f;
    const std::vector<T> inp = stored<T>(random_values(NC, rng, -range, range, bf16_exact));
    const std::vector<T> weight = stored<T>(random_values(C, rng, -1.0f, 1.0f, bf16_exact));
    const std::vector<T> dout = stored<T>(random_values(NC, rng, -1.0f, 1.0f, bf16_exact));
    auto run = [&](size_t offset) {
      const Backend& be = row.backend();
      Buffer<T> d_inp(be, inp, offset), d_weight(be, weight, offset), d_dout(be, dout, offset);
      Buffer<T> d_out(be, stored<T>(Floats(NC)), offset), d_dinp(be, stored<T>(Floats(NC)), offset);
      Buffer<float> d_rstd(be, Floats(N), offset), d_dweight(be, Floats(C), offset);
      be.ops<T>().rmsnorm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_weight.get(), N, C,
                                  kRmsnormEps, nullptr);
      be.ops<T>().rmsnorm_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                                   d_weight.get(), d_rstd.get(), N, C, nullptr);
      Floats all = d_rstd.download();
      append(all, to_floats(d_out.download()));
      append(all, to_floats(d_dinp.download()));
      append(all, d_dweight.download());
      return all;
    };
    expect_repeatable(
        row, [&] { return run(0); }, "rstd, out, dinp and dweight");
    if (row.cuda() && C % 8 == 0) expect_identical(run(1), run(0), "one element off alignment");
  }
}

}  // namespace

std::vector<OpCase> embedding_rmsnorm_cases() {
  return {
      {"embedding",
       "forward_copies_rows",
       kAllRows,
       {"embedding_forward"},
       LLM_BY_DTYPE(embedding_forward)},
      {"embedding",
       "backward_accumulates",
       kAllRows,
       {"embedding_backward"},
       LLM_BY_DTYPE(embedding_backward)},
      {"embedding",
       "backward_deterministic",
       kCpuRows,
       {"embedding_backward"},
       LLM_BY_DTYPE(embedding_backward_deterministic)},
      {"embedding",
       "forward_slice_zeroes_other_tokens",
       kAllRows,
       {"embedding_forward"},
       LLM_BY_DTYPE(embedding_forward_slice)},
      {"embedding",
       "backward_slice_skips_other_tokens",
       kAllRows,
       {"embedding_backward"},
       LLM_BY_DTYPE(embedding_backward_slice)},
      {"rmsnorm", "forward", kAllRows, {"rmsnorm_forward"}, LLM_BY_DTYPE(rmsnorm_forward)},
      {"rmsnorm",
       "backward_accumulates",
       kAllRows,
       {"rmsnorm_backward"},
       LLM_BY_DTYPE(rmsnorm_backward)},
      // cuda f32 is not claimed alignment-independent (its packs are 4 wide).
      {"rmsnorm",
       "deterministic",
       kCpuRows | kCudaBf16,
       {"rmsnorm_forward", "rmsnorm_backward"},
       LLM_BY_DTYPE(rmsnorm_deterministic)},
  };
}

}  // namespace llm::op_test
