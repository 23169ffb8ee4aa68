// Op cases of QK-norm (a per-head RMSNorm of the q and k heads of fused qkv
// rows, v heads passed through): forward with rstd, backward (dinp
// overwritten, both gain gradients accumulated), on every row (see
// op_harness.h), plus their determinism: bits independent of the CPU thread
// count, and on CUDA the same bits on a repeat and at any alignment; with
// RoPE in the same pass, the bits of the composition with rope_forward /
// rope_backward, for token positions, packed documents and a decode offset.
// Invariant: the v heads are bits copied on every row (out from inp, dinp
// from dout); the q and k heads are RMSNorm's math, whose reductions differ
// between rows only in summation order, so the tolerances are rmsnorm's
// (op_cases_embedding_rmsnorm.cpp), with the gain gradients bounded by the
// length of their sums over rows and heads.
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "test/op_harness.h"
#include "test/op_rope_angles.h"

namespace llm::op_test {
namespace {

// N rows of H q heads, KV k heads and KV v heads of D values each.
struct QkShape {
  int N, H, KV, D;

  int row_width() const { return (H + 2 * KV) * D; }
  size_t values() const { return (size_t)N * row_width(); }
  size_t normed_heads() const { return (size_t)N * (H + KV); }
};

constexpr float kQkNormEps = 1e-6f;  // Qwen3's
// cpu rows: small enough for finite differences; grouped (H > KV) and not,
// D = 64 and 128, odd D, one value.
constexpr QkShape kCpuQkShapes[] = {
    {5, 3, 1, 13}, {1, 1, 1, 1}, {3, 4, 2, 64}, {2, 2, 1, 128}, {4, 2, 2, 8}};
// cuda rows: heads per launch not a multiple of the 8 per block (N = 7, 5);
// odd D and D off the bf16 pack (300: several packs per lane); D = 1600 and
// 4000, where fewer warps fit backward's shared memory (3 and 1); N = 2051,
// above backward's 1024 row chunks (3 rows each, the last one short).
constexpr QkShape kCudaQkShapes[] = {{1, 1, 1, 1},    {7, 3, 1, 13},  {5, 4, 2, 64},
                                     {3, 2, 2, 128},  {2, 1, 1, 300}, {2051, 2, 1, 8},
                                     {4, 2, 1, 1600}, {2, 1, 1, 4000}};

std::vector<QkShape> qk_shapes(const OpRow& row) {
  return shapes_for(row, kCpuQkShapes, kCudaQkShapes);
}

// The v heads of every row of `rows` (a tensor of s's layout), in order.
template <class T>
std::vector<T> v_heads(const std::vector<T>& rows, const QkShape& s) {
  std::vector<T> v;
  for (int n = 0; n < s.N; n++) {
    const auto first = rows.begin() + (size_t)n * s.row_width() + (size_t)(s.H + s.KV) * s.D;
    v.insert(v.end(), first, first + (size_t)s.KV * s.D);
  }
  return v;
}

// Inputs of one shape: inp with its first row small (so eps shows), the gains.
struct QkInputs {
  Floats inp, q_weight, k_weight;
};

QkInputs random_qk_inputs(const QkShape& s, std::mt19937& rng, float range, bool bf16_exact) {
  QkInputs in;
  in.inp =
      small_first_row(random_values(s.values(), rng, -range, range, bf16_exact), s.row_width());
  in.q_weight = random_values(s.D, rng, -1.0f, 1.0f, bf16_exact);
  in.k_weight = random_values(s.D, rng, -1.0f, 1.0f, bf16_exact);
  return in;
}

// out and rstd against the row's oracle, within rmsnorm's forward tolerances:
// kForwardTolerance (cpu f32 vs the double reference), kOneRounding and
// kReassociation (cpu bf16 vs the fp32 twin), the cpu twins (cuda). The v
// heads of out are inp's bits on every row.
template <class T>
void qk_norm_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(301);
  // cpu f32: |inp| <= 1, where eps is a visible part of mean(inp^2).
  const float range = row.cpu() && !bf16 ? 1.0f : 2.0f;
  for (const QkShape& s : qk_shapes(row)) {
    const auto [N, H, KV, D] = s;
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " H=" << H << " KV=" << KV << " D=" << D
                                      << " offset=" << offset);
      const QkInputs in = random_qk_inputs(s, rng, range, bf16);
      const std::vector<T> inp_t = stored<T>(in.inp), q_weight_t = stored<T>(in.q_weight),
                           k_weight_t = stored<T>(in.k_weight);
      const Backend& be = row.backend();
      Buffer<T> d_inp(be, inp_t, offset), d_q_weight(be, q_weight_t, offset),
          d_k_weight(be, k_weight_t, offset);
      Buffer<T> d_out(be, nan_filled<T>(s.values()), offset);
      Buffer<float> d_rstd(be, Floats(s.normed_heads(), kNaN), offset);
      be.ops<T>().qk_norm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_q_weight.get(),
                                  d_k_weight.get(), N, H, KV, D, kQkNormEps, {});
      const std::vector<T> out = d_out.download();
      const Floats rstd = d_rstd.download();
      EXPECT_TRUE(d_out.guards_intact() && d_rstd.guards_intact());
      expect_identical(v_heads(out, s), v_heads(inp_t, s), "out's v heads vs inp's");

      Floats out32(s.values()), rstd32(s.normed_heads());  // the fp32 twin on the same values
      backend_cpu().f32.qk_norm_forward(out32.data(), rstd32.data(), in.inp.data(),
                                        in.q_weight.data(), in.k_weight.data(), N, H, KV, D,
                                        kQkNormEps, {});
      if (row.cuda()) {
        std::vector<T> out_twin(s.values());
        Floats rstd_twin(s.normed_heads());
        backend_cpu().ops<T>().qk_norm_forward(out_twin.data(), rstd_twin.data(), inp_t.data(),
                                               q_weight_t.data(), k_weight_t.data(), N, H, KV, D,
                                               kQkNormEps, {});
        expect_matches_cpu_twins(out, out32, out_twin, "out");
        expect_close(rstd, rstd_twin, kReassociation, "rstd");
      } else if (bf16) {
        expect_close(out, out32, kOneRounding, "out");
        expect_close(rstd, rstd32, kReassociation, "rstd");
      } else {
        Vec ref_rstd;
        const Vec ref =
            reference::qk_norm_forward(to_doubles(in.inp), to_doubles(in.q_weight),
                                       to_doubles(in.k_weight), N, H, KV, D, kQkNormEps, &ref_rstd);
        expect_close(out, ref, kForwardTolerance, "out");
        expect_close(rstd, ref_rstd, kForwardTolerance, "rstd");
      }
    }
  }
}

// Bounds for a gain gradient of a cuda row against its CPU twin: element c
// sums, over the `first`..`first + count` heads of every row, terms
// dy * x * s of both signs (the kernel by warps and row chunks, the twin in
// (row, head) order), so the bound scales with their absolute sum and the
// sum's length, not with the (cancelled) result.
template <class T>
Doubles gain_gradient_bounds(const Doubles& twin, const Floats& prefill, const std::vector<T>& dout,
                             const std::vector<T>& inp, const Floats& rstd, const QkShape& s,
                             int first, int count) {
  Doubles abs_term_sums(s.D);
  for (int d = 0; d < s.D; d++) {
    abs_term_sums[d] = std::fabs(prefill[d]);
    for (int n = 0; n < s.N; n++)
      for (int h = first; h < first + count; h++) {
        const size_t at = (size_t)n * s.row_width() + (size_t)h * s.D + d;
        abs_term_sums[d] += std::fabs((double)to_float(dout[at]) * to_float(inp[at]) *
                                      rstd[(size_t)n * (s.H + s.KV) + h]);
      }
  }
  return reordered_sum_bounds(twin, abs_term_sums, (size_t)s.N * count + 1);
}

// dinp is NaN-filled (the op overwrites it: a read would show); dq_weight and
// dk_weight (fp32) are pre-filled (+=); rstd is the fp32 forward's. Every
// row: dinp's v heads are dout's bits. cpu f32: dinp, dq_weight and dk_weight
// against central finite differences of the reference (kBackwardTolerance);
// cpu bf16: the fp32 twin (kOneRounding, kReassociation); cuda: the cpu twins,
// the gains within gain_gradient_bounds.
template <class T>
void qk_norm_backward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(302);
  const float range = row.cpu() && !bf16 ? 1.0f : 2.0f;  // as for the forward
  for (const QkShape& s : qk_shapes(row)) {
    const auto [N, H, KV, D] = s;
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " H=" << H << " KV=" << KV << " D=" << D
                                      << " offset=" << offset);
      const QkInputs in = random_qk_inputs(s, rng, range, bf16);
      const Floats dout = random_values(s.values(), rng, -1.0f, 1.0f, bf16);
      const Floats dq_prefill = random_floats(D, rng), dk_prefill = random_floats(D, rng);
      Floats out32(s.values()), rstd(s.normed_heads());
      backend_cpu().f32.qk_norm_forward(out32.data(), rstd.data(), in.inp.data(),
                                        in.q_weight.data(), in.k_weight.data(), N, H, KV, D,
                                        kQkNormEps, {});
      const std::vector<T> inp_t = stored<T>(in.inp), q_weight_t = stored<T>(in.q_weight),
                           k_weight_t = stored<T>(in.k_weight), dout_t = stored<T>(dout);
      const Backend& be = row.backend();
      Buffer<T> d_dout(be, dout_t, offset), d_inp(be, inp_t, offset),
          d_q_weight(be, q_weight_t, offset), d_k_weight(be, k_weight_t, offset);
      Buffer<T> d_dinp(be, nan_filled<T>(s.values()), offset);
      Buffer<float> d_rstd(be, rstd, offset), d_dq(be, dq_prefill, offset),
          d_dk(be, dk_prefill, offset);
      be.ops<T>().qk_norm_backward(d_dinp.get(), d_dq.get(), d_dk.get(), d_dout.get(), d_inp.get(),
                                   d_q_weight.get(), d_k_weight.get(), d_rstd.get(), N, H, KV, D,
                                   {});
      const std::vector<T> dinp = d_dinp.download();
      const Floats dq = d_dq.download(), dk = d_dk.download();
      EXPECT_TRUE(d_dinp.guards_intact() && d_dq.guards_intact() && d_dk.guards_intact());
      expect_identical(v_heads(dinp, s), v_heads(dout_t, s), "dinp's v heads vs dout's");

      Floats dinp32(s.values()), dq32 = dq_prefill, dk32 = dk_prefill;  // the fp32 twin
      backend_cpu().f32.qk_norm_backward(dinp32.data(), dq32.data(), dk32.data(), dout.data(),
                                         in.inp.data(), in.q_weight.data(), in.k_weight.data(),
                                         rstd.data(), N, H, KV, D, {});
      if (row.cuda()) {
        std::vector<T> dinp_twin(s.values());
        Floats dq_twin = dq_prefill, dk_twin = dk_prefill;
        backend_cpu().ops<T>().qk_norm_backward(dinp_twin.data(), dq_twin.data(), dk_twin.data(),
                                                dout_t.data(), inp_t.data(), q_weight_t.data(),
                                                k_weight_t.data(), rstd.data(), N, H, KV, D, {});
        expect_matches_cpu_twins(dinp, dinp32, dinp_twin, "dinp");
        expect_within(
            to_doubles(dq), to_doubles(dq_twin),
            gain_gradient_bounds(to_doubles(dq_twin), dq_prefill, dout_t, inp_t, rstd, s, 0, H),
            "dq_weight (+=)");
        expect_within(
            to_doubles(dk), to_doubles(dk_twin),
            gain_gradient_bounds(to_doubles(dk_twin), dk_prefill, dout_t, inp_t, rstd, s, H, KV),
            "dk_weight (+=)");
      } else if (bf16) {
        expect_close(dinp, dinp32, kOneRounding, "dinp");
        expect_close(dq, dq32, kReassociation, "dq_weight (+=)");
        expect_close(dk, dk32, kReassociation, "dk_weight (+=)");
      } else {
        const Vec x = to_doubles(in.inp), wq = to_doubles(in.q_weight),
                  wk = to_doubles(in.k_weight), dy = to_doubles(dout);
        auto forward = [&](const Vec& xs, const Vec& wqs, const Vec& wks) {
          return reference::qk_norm_forward(xs, wqs, wks, N, H, KV, D, kQkNormEps);
        };
        const Vec grad_inp =
            finite_difference_gradient([&](const Vec& xs) { return forward(xs, wq, wk); }, x, dy);
        const Vec grad_q =
            finite_difference_gradient([&](const Vec& ws) { return forward(x, ws, wk); }, wq, dy);
        const Vec grad_k =
            finite_difference_gradient([&](const Vec& ws) { return forward(x, wq, ws); }, wk, dy);
        expect_close(dinp, grad_inp, kBackwardTolerance, "dinp");
        expect_close(dq, add(to_doubles(dq_prefill), grad_q), kBackwardTolerance, "dq_weight (+=)");
        expect_close(dk, add(to_doubles(dk_prefill), grad_k), kBackwardTolerance, "dk_weight (+=)");
      }
    }
  }
}

// The reductions (sums of squares and dot products per head, the gains over
// rows and heads) have one order per shape: forward and backward give the
// same bits at 1, 2 and 3 CPU threads (N = 97: uneven row splits; D = 200:
// several column blocks of the gain sums), and on CUDA on a repeat and at one
// element off alignment (the element-wise path visits the same columns per
// lane as the vector path, and its multiply-adds are the same fmaf calls).
template <class T>
void qk_norm_deterministic(const OpRow& row) {
  std::mt19937 rng(303);
  const std::vector<QkShape> shapes =
      row.cuda() ? std::vector<QkShape>{{2051, 2, 1, 8}, {9, 4, 2, 128}, {3, 1, 1, 1600}}
                 : std::vector<QkShape>{{97, 4, 2, 64}, {37, 3, 1, 200}};
  for (const QkShape& s : shapes) {
    const auto [N, H, KV, D] = s;
    SCOPED_TRACE(testing::Message() << "N=" << N << " H=" << H << " KV=" << KV << " D=" << D);
    const bool bf16_exact = std::is_same_v<T, Bf16> || row.cuda();
    const QkInputs in = random_qk_inputs(s, rng, row.cuda() ? 2.0f : 1.0f, bf16_exact);
    const std::vector<T> inp = stored<T>(in.inp), q_weight = stored<T>(in.q_weight),
                         k_weight = stored<T>(in.k_weight);
    const std::vector<T> dout = stored<T>(random_values(s.values(), rng, -1.0f, 1.0f, bf16_exact));
    auto run = [&](size_t offset) {
      const Backend& be = row.backend();
      Buffer<T> d_inp(be, inp, offset), d_q_weight(be, q_weight, offset),
          d_k_weight(be, k_weight, offset), d_dout(be, dout, offset);
      Buffer<T> d_out(be, stored<T>(Floats(s.values())), offset),
          d_dinp(be, stored<T>(Floats(s.values())), offset);
      Buffer<float> d_rstd(be, Floats(s.normed_heads()), offset), d_dq(be, Floats(D), offset),
          d_dk(be, Floats(D), offset);
      be.ops<T>().qk_norm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_q_weight.get(),
                                  d_k_weight.get(), N, H, KV, D, kQkNormEps, {});
      be.ops<T>().qk_norm_backward(d_dinp.get(), d_dq.get(), d_dk.get(), d_dout.get(), d_inp.get(),
                                   d_q_weight.get(), d_k_weight.get(), d_rstd.get(), N, H, KV, D,
                                   {});
      Floats all = d_rstd.download();
      append(all, to_floats(d_out.download()));
      append(all, to_floats(d_dinp.download()));
      append(all, d_dq.download());
      append(all, d_dk.download());
      return all;
    };
    expect_repeatable(
        row, [&] { return run(0); }, "rstd, out, dinp, dq_weight and dk_weight");
    if (row.cuda() && D % 8 == 0) expect_identical(run(1), run(0), "one element off alignment");
  }
}

// ---- QK-norm with RoPE in the same pass -------------------------------------

// B sequences of T rows of s's heads.
struct QkRopeShape {
  int B, T, H, KV, D;

  QkShape qk() const { return {B * T, H, KV, D}; }
};

// cpu rows: D = 64 and 128, grouped and not, odd D (its last value is in no
// pair), one pair. cuda rows: the vector path (D/2 a multiple of the pack),
// D = 24 whose halves are off the bf16 pack while the head is on it, odd D,
// D = 300 (several packs per lane, element-wise), N = 2051 rows (backward's
// row chunks, the last short).
constexpr QkRopeShape kCpuQkRopeShapes[] = {
    {2, 5, 4, 2, 64}, {1, 4, 2, 2, 128}, {3, 3, 3, 1, 13}, {2, 2, 1, 1, 2}};
constexpr QkRopeShape kCudaQkRopeShapes[] = {{2, 5, 4, 2, 64},  {3, 3, 2, 1, 24},
                                             {2, 3, 3, 1, 13},  {1, 4, 1, 1, 300},
                                             {293, 7, 2, 1, 8}, {1, 3, 2, 2, 128}};

// Forward with RoPE against qk_norm_forward without it, then rope_forward on
// its out, on the same backend: out and rstd the same bits (the fused pass
// rounds y to T where the composition stores it, then rotates it with
// rope's products). out also differs from the unrotated out somewhere, so
// the angles were applied.
template <class T>
void qk_norm_rope_forward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(304);
  for_each_rope_case(
      row, kCpuQkRopeShapes, kCudaQkRopeShapes,
      [&](const QkRopeShape& rs, AngleSource source, size_t offset) {
        const QkShape s = rs.qk();
        const auto [N, H, KV, D] = s;
        const QkInputs in = random_qk_inputs(s, rng, 2.0f, bf16 || row.cuda());
        const Backend& be = row.backend();
        const RopeCaseAngles angles(be, rs.B, rs.T, D, source, offset, rng);
        Buffer<T> d_inp(be, stored<T>(in.inp), offset), d_q(be, stored<T>(in.q_weight), offset),
            d_k(be, stored<T>(in.k_weight), offset);
        Buffer<T> d_fused(be, nan_filled<T>(s.values()), offset),
            d_composed(be, nan_filled<T>(s.values()), offset);
        Buffer<float> d_rstd(be, Floats(s.normed_heads(), kNaN), offset),
            d_rstd_composed(be, Floats(s.normed_heads(), kNaN), offset);
        be.ops<T>().qk_norm_forward(d_fused.get(), d_rstd.get(), d_inp.get(), d_q.get(), d_k.get(),
                                    N, H, KV, D, kQkNormEps, angles.fused);
        be.ops<T>().qk_norm_forward(d_composed.get(), d_rstd_composed.get(), d_inp.get(), d_q.get(),
                                    d_k.get(), N, H, KV, D, kQkNormEps, {});
        const std::vector<T> unrotated = d_composed.download();
        be.ops<T>().rope_forward(d_composed.get(), angles.cos.get(), angles.sin.get(),
                                 angles.composed_positions, N, rs.T, H + KV, D, s.row_width());
        const std::vector<T> fused = d_fused.download();
        EXPECT_TRUE(d_fused.guards_intact() && d_rstd.guards_intact());
        expect_identical(fused, d_composed.download(), "out vs qk_norm then rope_forward");
        expect_identical(d_rstd.download(), d_rstd_composed.download(), "rstd");
        if (D > 1) {
          EXPECT_NE(std::memcmp(fused.data(), unrotated.data(), fused.size() * sizeof(T)), 0)
              << "out is the unrotated out";
        }
      });
}

// Backward with RoPE against rope_backward on dout, then qk_norm_backward
// without RoPE, on the same backend: dinp and both (prefilled, +=) gain
// gradients the same bits; dout is left as it was.
template <class T>
void qk_norm_rope_backward(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(305);
  for_each_rope_case(
      row, kCpuQkRopeShapes, kCudaQkRopeShapes,
      [&](const QkRopeShape& rs, AngleSource source, size_t offset) {
        const QkShape s = rs.qk();
        const auto [N, H, KV, D] = s;
        const QkInputs in = random_qk_inputs(s, rng, 2.0f, bf16 || row.cuda());
        const std::vector<T> dout = stored<T>(random_values(s.values(), rng, -1.0f, 1.0f, true));
        const Floats dq_prefill = random_floats(D, rng), dk_prefill = random_floats(D, rng);
        const Backend& be = row.backend();
        const RopeCaseAngles angles(be, rs.B, rs.T, D, source, offset, rng);
        Buffer<T> d_inp(be, stored<T>(in.inp), offset), d_q(be, stored<T>(in.q_weight), offset),
            d_k(be, stored<T>(in.k_weight), offset), d_dout(be, dout, offset),
            d_dout_turned(be, dout, offset);
        Buffer<T> d_dinp(be, nan_filled<T>(s.values()), offset),
            d_dinp_composed(be, nan_filled<T>(s.values()), offset);
        Buffer<float> d_rstd(be, Floats(s.normed_heads()), offset), d_dq(be, dq_prefill, offset),
            d_dk(be, dk_prefill, offset), d_dq_composed(be, dq_prefill, offset),
            d_dk_composed(be, dk_prefill, offset);
        Buffer<T> d_out(be, nan_filled<T>(s.values()), offset);  // the forward, for rstd
        be.ops<T>().qk_norm_forward(d_out.get(), d_rstd.get(), d_inp.get(), d_q.get(), d_k.get(), N,
                                    H, KV, D, kQkNormEps, angles.fused);
        be.ops<T>().qk_norm_backward(d_dinp.get(), d_dq.get(), d_dk.get(), d_dout.get(),
                                     d_inp.get(), d_q.get(), d_k.get(), d_rstd.get(), N, H, KV, D,
                                     angles.fused);
        be.ops<T>().rope_backward(d_dout_turned.get(), angles.cos.get(), angles.sin.get(),
                                  angles.composed_positions, N, rs.T, H + KV, D, s.row_width());
        be.ops<T>().qk_norm_backward(d_dinp_composed.get(), d_dq_composed.get(),
                                     d_dk_composed.get(), d_dout_turned.get(), d_inp.get(),
                                     d_q.get(), d_k.get(), d_rstd.get(), N, H, KV, D, {});
        EXPECT_TRUE(d_dinp.guards_intact() && d_dq.guards_intact() && d_dk.guards_intact());
        expect_identical(d_dout.download(), dout, "dout after backward");
        expect_identical(d_dinp.download(), d_dinp_composed.download(),
                         "dinp vs rope_backward then qk_norm");
        expect_identical(d_dq.download(), d_dq_composed.download(), "dq_weight (+=)");
        expect_identical(d_dk.download(), d_dk_composed.download(), "dk_weight (+=)");
      });
}

}  // namespace

std::vector<OpCase> qk_norm_cases() {
  return {
      {"qk_norm", "forward", kAllRows, {"qk_norm_forward"}, LLM_BY_DTYPE(qk_norm_forward)},
      {"qk_norm",
       "backward_accumulates_gains",
       kAllRows,
       {"qk_norm_backward"},
       LLM_BY_DTYPE(qk_norm_backward)},
      {"qk_norm",
       "deterministic",
       kAllRows,
       {"qk_norm_forward", "qk_norm_backward"},
       LLM_BY_DTYPE(qk_norm_deterministic)},
      {"qk_norm",
       "rope_forward_is_the_composition",
       kAllRows,
       {"qk_norm_forward", "rope_forward"},
       LLM_BY_DTYPE(qk_norm_rope_forward)},
      {"qk_norm",
       "rope_backward_is_the_composition",
       kAllRows,
       {"qk_norm_backward", "rope_backward"},
       LLM_BY_DTYPE(qk_norm_rope_backward)},
  };
}

}  // namespace llm::op_test
