// Op cases of cross-entropy over a vocabulary split (cross_entropy_partials,
// then cross_entropy_combine over every rank's partials: losses and, fused,
// dlogits in place of the logits) on every row, and of the optimizer ops
// (adamw_update, sum_squares; fp32 only) on both backends (see op_harness.h).
// The ranks of a split are simulated one after the other on one backend: each
// slice's partials, concatenated in rank order (an all-gather's output), then
// each slice's combination.
// Invariant: losses are max-subtracted (finite on logits of +-1000 and +-5e4);
// a split (2 or 3 uneven slices, one of them empty) reproduces the whole
// vocabulary's losses and dlogits within the fp32 rounding of the slices'
// logsumexps; every rank gets the same loss bits; forward only (null logits)
// leaves the logits untouched and gives the fused losses' bits; the bf16 entry
// points exponentiate the same widened logits into fp32 as fp32 does (cpu
// bf16: the same loss bits, dlogits rounded once); adamw is elementwise, so
// slices update to the bits of the whole, and its bf16 copy is the updated
// params cast to bf16, bit for bit; sum_squares sums exact double squares,
// only reassociated, into a double in the backend's memory.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "data/targets.h"
#include "test/op_harness.h"

namespace llm::op_test {
namespace {

constexpr float kDloss = 0.37f;  // gradients are of kDloss * sum(losses)

// ---- cross-entropy: the split form, rank by rank ------------------------------------

// The widths of a split's slices of [0, V), in rank order.
using Widths = std::vector<int>;

// The whole vocabulary, 2 uneven slices, 3 uneven slices, and 3 with an empty
// one (a rank may hold no row of a tiny vocabulary); splits only for V >= 3.
std::vector<Widths> splits_of(int V) {
  if (V < 3) return {{V}};
  return {
      {V}, {V - V / 3, V / 3}, {V / 6 + 1, V / 2, V - V / 6 - 1 - V / 2}, {V / 2, 0, V - V / 2}};
}

std::string describe(const Widths& widths) {
  std::string s = "slices";
  for (int w : widths) s.append(" ").append(std::to_string(w));
  return s;
}

// What a split run leaves: the losses (every rank's, the same bits) and the
// slices' logits buffers put back side by side (dlogits, or the logits when
// forward only).
template <class T>
struct LossRun {
  Floats losses;         // (N)
  std::vector<T> after;  // (N, V)
};

// The split cross-entropy of logits (N, V) on backend `be`: rank r's partials
// from its columns, all ranks' partials concatenated in rank order, then each
// rank's combination with its slice (with_gradient) or null logits. Partials
// and losses are NaN-filled first (each run must write them); every rank's
// losses must be the same bits; every buffer's guards must be intact.
template <class T>
LossRun<T> run_split(const Backend& be, const std::vector<T>& logits, const Ints& targets, int N,
                     int V, const Widths& widths, bool with_gradient, float dloss = kDloss) {
  const int ranks = (int)widths.size();
  Buffer<int32_t> d_targets(be, targets);
  std::vector<std::unique_ptr<Buffer<T>>> d_slices;
  Floats gathered;  // (ranks, N, 2)
  for (int r = 0, begin = 0; r < ranks; begin += widths[r], r++) {
    const int w = widths[r];
    std::vector<T> slice((size_t)N * w);
    for (int n = 0; n < N; n++)
      std::copy_n(logits.begin() + (size_t)n * V + begin, w, slice.begin() + (size_t)n * w);
    d_slices.push_back(std::make_unique<Buffer<T>>(be, slice));
    Buffer<float> d_partials(be, Floats(2 * (size_t)N, kNaN));
    be.ops<T>().cross_entropy_partials(d_partials.get(), d_slices[r]->get(), d_targets.get(), N, w,
                                       begin);
    EXPECT_TRUE(d_partials.guards_intact());
    append(gathered, d_partials.download());
  }
  Buffer<float> d_gathered(be, gathered);
  LossRun<T> run{{}, std::vector<T>((size_t)N * V)};
  for (int r = 0, begin = 0; r < ranks; begin += widths[r], r++) {
    const int w = widths[r];
    Buffer<float> d_losses(be, Floats(N, kNaN));
    be.ops<T>().cross_entropy_combine(d_losses.get(), with_gradient ? d_slices[r]->get() : nullptr,
                                      d_gathered.get(), d_targets.get(), N, w, begin, ranks, dloss);
    EXPECT_TRUE(d_losses.guards_intact() && d_slices[r]->guards_intact() &&
                d_gathered.guards_intact());
    const Floats losses = d_losses.download();
    if (r == 0)
      run.losses = losses;
    else
      expect_identical(losses, run.losses, "losses of rank " + std::to_string(r) + " vs rank 0");
    const std::vector<T> slice = d_slices[r]->download();
    for (int n = 0; n < N; n++)
      std::copy_n(slice.begin() + (size_t)n * w, w, run.after.begin() + (size_t)n * V + begin);
  }
  return run;
}

// ---- cross-entropy: tolerances ------------------------------------------------------

// fp32 ulp at x: 2^-23 of the power of two at or below |x|.
double fp32_ulp(double x) {
  int exponent;
  std::frexp(std::fabs(x), &exponent);
  return std::ldexp(1.0, exponent - 24);
}

// Row n's logsumexp in double: the scale of the fp32 errors below.
Doubles row_lse(const Floats& logits, int N, int V) {
  Doubles lse(N);
  for (int n = 0; n < N; n++) {
    const float* row = logits.data() + (size_t)n * V;
    double max = row[0], sum = 0.0;
    for (int v = 0; v < V; v++) max = std::fmax(max, (double)row[v]);
    for (int v = 0; v < V; v++) sum += std::exp(row[v] - max);
    lse[n] = max + std::log(sum);
  }
  return lse;
}

// Two evaluations of the losses (against each other or one against the
// double reference): each takes the fp32 logsumexps of its slices (rounded
// once, within half an ulp of lse, plus a few 1e-7 relative from the sums of
// 2-ulp exps in another order) and combines them in double, the loss rounded
// to fp32 at the end. So they differ by at most ~2 ulps of lse and one of the
// loss: 2 ulps of lse, plus 1e-5 absolute (the sums' error, a few 1e-7, with
// a wide margin) and 1e-6 relative (the final rounding, 6e-8).
Doubles loss_bounds(const Doubles& expected, const Doubles& lse) {
  Doubles bound(expected.size());
  for (size_t n = 0; n < expected.size(); n++)
    bound[n] = 1e-5 + 1e-6 * std::fabs(expected[n]) + 2.0 * fp32_ulp(lse[n]);
  return bound;
}

// Two evaluations of dlogits: each is exp(x - lse32) * dloss (minus dloss at
// the target) with lse32 within 2 ulps of lse (as above) and x - lse32 rounded
// (half an ulp of it), so the exponent is off by at most 2 ulp(lse) + ulp(x -
// lse) / 2 absolute, which is a relative error of the probability p; the exp
// adds 2 ulps (2.4e-7), the product one rounding. Twice that per element
// (two evaluations), relative to |p * dloss| away from the target and to
// dloss at it (where p - 1 cancels). 1e-37 absolute: the CPU's exp flushes
// arguments below -87 to 0 where the GPU's expf still gives a denormal-sized
// value. In bf16 each side rounds fp32 dlogits within that of each other: add
// two bf16 ulps, as for the matmul outputs.
constexpr double kBf16Ulp = 0x1p-7;  // bf16 ulp of 1: 8 significant bits
Doubles dlogit_bounds(const Doubles& expected, const Floats& logits, const Ints& targets,
                      const Doubles& lse, int V, bool bf16) {
  Doubles bound(expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    const size_t n = i / V;
    const bool at_target = (int)(i % V) == targets[n];
    const double exponent_error = 2.0 * fp32_ulp(lse[n]) + 0.5 * fp32_ulp(logits[i] - lse[n]);
    const double relative = 2.0 * (exponent_error + 3e-7);
    bound[i] = 1e-37 + relative * (at_target ? std::fabs(kDloss) : std::fabs(expected[i]));
    if (bf16) bound[i] += 2.0 * kBf16Ulp * std::fabs(expected[i]);
  }
  return bound;
}

// The losses and dlogits of `actual` within the bounds above of `expected`.
template <class T>
void expect_loss_run_close(const LossRun<T>& actual, const LossRun<T>& expected,
                           const Floats& logits, const Ints& targets, int N, int V,
                           const std::string& what) {
  const Doubles lse = row_lse(logits, N, V);
  const Doubles losses = to_doubles(expected.losses);
  const Doubles dlogits = to_doubles(to_floats(expected.after));
  expect_all_finite(to_doubles(actual.losses), what + " losses");
  expect_within(to_doubles(actual.losses), losses, loss_bounds(losses, lse), what + " losses");
  const Doubles actual_d = to_doubles(to_floats(actual.after));
  expect_all_finite(actual_d, what + " dlogits");
  expect_within(actual_d, dlogits,
                dlogit_bounds(dlogits, logits, targets, lse, V, std::is_same_v<T, Bf16>),
                what + " dlogits");
}

// ---- cross-entropy: shapes and inputs ----------------------------------------------

struct LossShape {
  int N, V;
};
constexpr LossShape kCpuLossShapes[] = {{7, 13}, {1, 1}, {3, 100}, {9, 31}};
// Tiny rows (fewer logits than threads), odd sizes, GPT-2's 50257 and Llama
// 3's 128256 vocabularies (few rows: the CPU twin is the slow side).
constexpr LossShape kCudaLossShapes[] = {{1, 1},     {3, 7},     {4, 513},   {5, 1000},
                                         {2, 32000}, {2, 50257}, {1, 128256}};

std::vector<LossShape> loss_shapes(const OpRow& row) {
  return shapes_for(row, kCpuLossShapes, kCudaLossShapes);
}

// Targets over the whole vocabulary, the first row's the last column and the
// second row's the first, so both end slices of a split hold some.
Ints loss_targets(int N, int V, std::mt19937& rng) {
  Ints targets = random_ints(N, V, rng);
  targets[0] = V - 1;
  if (N > 1) targets[1] = 0;
  return targets;
}

// ---- cross-entropy: cases ----------------------------------------------------------

// The CUDA split form against the CPU twin's on logits uniform in [-spread,
// spread], for every split of every shape: losses and dlogits within the
// bounds above, the GPU's repeating bit for bit.
template <class T>
void cuda_cross_entropy(const OpRow& row, float spread, uint32_t seed, bool only_whole) {
  std::mt19937 rng(seed);
  for (auto [N, V] : kCudaLossShapes) {
    const Floats values = random_floats((size_t)N * V, rng, -spread, spread);
    const std::vector<T> logits = stored<T>(values);
    const Floats logits_f = to_floats(logits);
    const Ints targets = loss_targets(N, V, rng);
    for (const Widths& widths : splits_of(V)) {
      if (only_whole && widths.size() > 1) break;
      SCOPED_TRACE(testing::Message()
                   << "N=" << N << " V=" << V << " " << describe(widths) << " spread " << spread);
      const LossRun<T> cpu = run_split(backend_cpu(), logits, targets, N, V, widths, true);
      const LossRun<T> gpu = run_split(row.backend(), logits, targets, N, V, widths, true);
      expect_loss_run_close(gpu, cpu, logits_f, targets, N, V, "gpu vs cpu twin");
      const LossRun<T> again = run_split(row.backend(), logits, targets, N, V, widths, true);
      expect_identical(again.losses, gpu.losses, "losses, second run");
      expect_identical(again.after, gpu.after, "dlogits, second run");
    }
  }
}

// cpu bf16 inputs: N = 7, V = 100, logits in [-1, 1] except that row 0's
// target logit leads by 8, so its probability is near 1 and its gradient
// p - 1 is small: rounding p before subtracting the one-hot would be caught.
struct Bf16LossInputs {
  int N = 7, V = 100;
  Floats logits;
  Ints targets;
  explicit Bf16LossInputs(std::mt19937& rng)
      : logits(random_bf16_values((size_t)N * V, rng, -1.0f, 1.0f)),
        targets(random_ints(N, V, rng)) {
    logits[targets[0]] = 9.0f;
  }
};

// One rank holding the whole vocabulary. cpu f32: losses against the double
// reference (loss_bounds), dlogits against the reference's analytic gradient
// (dlogit_bounds) and against finite differences of the reference losses
// (kBackwardTolerance); cpu bf16: losses the fp32 twin's bits, dlogits the
// fp32 twin's rounded once; cuda: cuda_cross_entropy on logits in [-4, 4].
template <class T>
void cross_entropy_whole(const OpRow& row) {
  if (row.cuda()) {
    cuda_cross_entropy<T>(row, 4.0f, std::is_same_v<T, Bf16> ? 202 : 201, true);
    return;
  }
  if constexpr (std::is_same_v<T, Bf16>) {
    std::mt19937 rng(116);
    const Bf16LossInputs in(rng);
    const LossRun<float> fp32 =
        run_split(backend_cpu(), in.logits, in.targets, in.N, in.V, {in.V}, true);
    const LossRun<Bf16> run =
        run_split(row.backend(), to_bf16s(in.logits), in.targets, in.N, in.V, {in.V}, true);
    expect_identical(run.losses, fp32.losses, "losses");
    expect_rounded_once(run.after, fp32.after, "dlogits");
  } else {
    std::mt19937 rng(18);
    for (auto [N, V] : kCpuLossShapes) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V);
      const Floats logits = random_floats((size_t)N * V, rng, -5.0f, 5.0f);
      const Ints targets = loss_targets(N, V, rng);
      const LossRun<float> run = run_split(row.backend(), logits, targets, N, V, {V}, true);
      const Doubles lse = row_lse(logits, N, V);
      const Vec losses = reference::cross_entropy_forward(to_doubles(logits), targets, N, V);
      expect_within(to_doubles(run.losses), losses, loss_bounds(losses, lse), "losses");
      const Vec dlogits =
          reference::cross_entropy_backward(to_doubles(logits), targets, N, V, kDloss);
      expect_within(to_doubles(run.after), dlogits,
                    dlogit_bounds(dlogits, logits, targets, lse, V, false), "dlogits (analytic)");
      const Vec grad = finite_difference_gradient(
          [&](const Vec& x) { return reference::cross_entropy_forward(x, targets, N, V); },
          to_doubles(logits), Vec(N, kDloss));
      expect_close(run.after, grad, kBackwardTolerance, "dlogits (finite differences)");
    }
  }
}

// The vocabulary split into 2 and 3 uneven slices (and 3 with an empty one)
// gives the whole vocabulary's losses and dlogits on the same backend, within
// loss_bounds and dlogit_bounds (in bf16 both sides round fp32 dlogits within
// those of each other, hence the two bf16 ulps), on logits in [-8, 8]. cpu f32:
// the split also against the double reference; cuda: the split also against
// the CPU twin's split (cuda_cross_entropy).
template <class T>
void cross_entropy_split(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  if (row.cuda()) cuda_cross_entropy<T>(row, 8.0f, bf16 ? 206 : 205, false);
  std::mt19937 rng(bf16 ? 208 : 207);
  for (auto [N, V] : loss_shapes(row)) {
    const std::vector<T> logits = stored<T>(random_values((size_t)N * V, rng, -8.0f, 8.0f, bf16));
    const Floats logits_f = to_floats(logits);
    const Ints targets = loss_targets(N, V, rng);
    const LossRun<T> whole = run_split(row.backend(), logits, targets, N, V, {V}, true);
    for (const Widths& widths : splits_of(V)) {
      if (widths.size() == 1) continue;
      SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V << " " << describe(widths));
      const LossRun<T> split = run_split(row.backend(), logits, targets, N, V, widths, true);
      expect_loss_run_close(split, whole, logits_f, targets, N, V, "split vs whole");
      if (row.cpu() && !bf16) {
        const Doubles lse = row_lse(logits_f, N, V);
        const Vec losses = reference::cross_entropy_forward(to_doubles(logits_f), targets, N, V);
        expect_within(to_doubles(split.losses), losses, loss_bounds(losses, lse),
                      "split losses vs reference");
        const Vec dlogits =
            reference::cross_entropy_backward(to_doubles(logits_f), targets, N, V, kDloss);
        expect_within(to_doubles(to_floats(split.after)), dlogits,
                      dlogit_bounds(dlogits, logits_f, targets, lse, V, false),
                      "split dlogits vs reference");
      }
    }
  }
}

// Forward only (null logits in the combination), whole and split: the logits
// come back untouched bit for bit (neither op writes them) and the losses are
// the fused run's bits (the same combination of the same partials).
template <class T>
void cross_entropy_forward_only(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(bf16 ? 210 : 209);
  for (auto [N, V] : loss_shapes(row)) {
    const std::vector<T> logits = stored<T>(random_values((size_t)N * V, rng, -5.0f, 5.0f, bf16));
    const Ints targets = loss_targets(N, V, rng);
    for (const Widths& widths : splits_of(V)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V << " " << describe(widths));
      const LossRun<T> forward = run_split(row.backend(), logits, targets, N, V, widths, false);
      const LossRun<T> fused = run_split(row.backend(), logits, targets, N, V, widths, true);
      expect_identical(forward.after, logits, "logits after the forward");
      expect_identical(forward.losses, fused.losses, "forward losses vs fused");
      if (V > 1) {  // a gradient differs from its logits: the fused run did write them
        EXPECT_NE(std::memcmp(fused.after.data(), logits.data(), sizeof(T) * logits.size()), 0);
      }
    }
  }
}

// Logits that overflow exp unless max-subtracted. cpu: N = 4, V = 50, each
// row's logit n raised by 1000, one at -1000, row 0's target the huge one;
// whole and split: the losses match (f32: the reference; bf16: the fp32
// twin's bits), every dlogit is finite and each row of dlogits sums to zero
// (softmax sums to one, minus the one-hot) within the fp32 rounding of lse.
// cuda: cuda_cross_entropy on logits in [-5e4, 5e4] (losses ~1e5).
template <class T>
void cross_entropy_large_logits(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  if (row.cuda()) {
    cuda_cross_entropy<T>(row, 5e4f, bf16 ? 204 : 203, false);
    return;
  }
  std::mt19937 rng(bf16 ? 117 : 19);
  const int N = 4, V = 50;
  Floats logits = random_values((size_t)N * V, rng, -3.0f, 3.0f, bf16);
  for (int n = 0; n < N; n++)
    logits[(size_t)n * V + n] = bf16 ? 1000.0f : logits[(size_t)n * V + n] + 1000.0f;
  logits[(size_t)(N - 1) * V] = -1000.0f;
  const Ints targets = {0, 0, 2, 7};  // row 0: the huge logit is the target; others not
  const Doubles lse = row_lse(logits, N, V);
  for (const Widths& widths : splits_of(V)) {
    SCOPED_TRACE(describe(widths));
    const LossRun<T> run =
        run_split(row.backend(), stored<T>(logits), targets, N, V, widths, true, 1.0f);
    if (bf16) {
      const LossRun<float> fp32 =
          run_split(backend_cpu(), logits, targets, N, V, widths, true, 1.0f);
      expect_identical(run.losses, fp32.losses, "losses");
    } else {
      const Vec ref = reference::cross_entropy_forward(to_doubles(logits), targets, N, V);
      expect_within(to_doubles(run.losses), ref, loss_bounds(ref, lse), "losses");
    }
    const Floats dlogits = to_floats(run.after);
    for (int n = 0; n < N; n++) {
      ASSERT_TRUE(std::isfinite(run.losses[n])) << "row " << n;
      double row_sum = 0.0;
      for (int v = 0; v < V; v++) {
        ASSERT_TRUE(std::isfinite(dlogits[(size_t)n * V + v])) << "row " << n << " column " << v;
        row_sum += dlogits[(size_t)n * V + v];
      }
      // The probabilities sum to exp(lse - lse32) (1e-6 for the exps and the
      // sum): within 2 ulps of lse of one. bf16: each gradient is rounded to
      // bf16, by at most 2^-8 |g|, and sum |g| <= 2 (probabilities sum to 1,
      // |p_target - 1| <= 1): within 2^-7 more of zero.
      EXPECT_NEAR(row_sum, 0.0, 1e-6 + 2.0 * fp32_ulp(lse[n]) + (bf16 ? std::ldexp(1.0, -7) : 0.0))
          << "row " << n;
    }
  }
}

// Ignored targets (kIgnoredTarget, a loss mask's dropped ones) on every row,
// whole and split: such a row's loss is exactly 0 and its dlogits exactly 0
// on every rank (NaN-free: the logits are overwritten, not scaled), forward
// only gives the same losses, and every other row is the bits of the run
// with no target ignored (rows are independent), which the other cases check
// against the reference and the CPU twin.
template <class T>
void cross_entropy_ignored_targets(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(bf16 ? 212 : 211);
  for (auto [N, V] : loss_shapes(row)) {
    const std::vector<T> logits = stored<T>(random_values((size_t)N * V, rng, -5.0f, 5.0f, bf16));
    const Ints targets = loss_targets(N, V, rng);
    Ints masked = targets;
    for (int n = 0; n < N; n += 2) masked[n] = kIgnoredTarget;  // row 0 (and 2, ...) ignored
    for (const Widths& widths : splits_of(V)) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V << " " << describe(widths));
      const LossRun<T> all = run_split(row.backend(), logits, targets, N, V, widths, true);
      const LossRun<T> run = run_split(row.backend(), logits, masked, N, V, widths, true);
      const LossRun<T> forward = run_split(row.backend(), logits, masked, N, V, widths, false);
      expect_identical(forward.losses, run.losses, "forward losses vs fused");
      for (int n = 0; n < N; n++) {
        const bool ignored = masked[n] == kIgnoredTarget;
        if (ignored) {
          EXPECT_EQ(run.losses[n], 0.0f) << "row " << n;
        } else {
          EXPECT_EQ(std::memcmp(&run.losses[n], &all.losses[n], sizeof(float)), 0) << "row " << n;
        }
        const T* got = run.after.data() + (size_t)n * V;
        const std::vector<T> zeros(V, stored<T>(Floats{0.0f})[0]);
        const T* expected = ignored ? zeros.data() : all.after.data() + (size_t)n * V;
        EXPECT_EQ(std::memcmp(got, expected, sizeof(T) * V), 0)
            << "dlogits of row " << n << (ignored ? " (ignored: all zero)" : " (kept)");
      }
    }
  }
}

// ---- adamw / sum_squares (fp32 only) ----------------------------------------------

struct AdamwSettings {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f,
        grad_scale = 0.5f;
};

// cuda against the CPU twin: the same formula, the same order of fp32
// operations; only FMA contraction may differ (nvcc fuses some a*b+c, the
// CPU library none), a rounding or two in m, v and the update. 1e-6
// relative is ~8 ulps. The absolute floors cover values that cancel towards 0:
// m (terms <= 0.1, so an ulp of them is < 1e-8) and params near 0 (left with
// the update, up to a few lr, whose few-ulp error is < 2e-8). v is a sum of
// positive terms: relative.
constexpr Tolerance kCudaParamTolerance{2e-8, 1e-6};
constexpr Tolerance kCudaMomentTolerance{1e-7, 1e-6};
constexpr Tolerance kCudaSecondMomentTolerance{1e-12, 1e-6};

// Several steps; after each, params, m and v against the row's oracle (cpu:
// the double reference from zero moments, kForwardTolerance; cuda: the CPU
// twin from random moments, continuing from the CPU's state so errors do not
// compound).
void adamw_over_steps(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 301 : 20);
  const AdamwSettings a;
  const std::vector<size_t> sizes =
      row.cuda() ? std::vector<size_t>{1, 1000, 100003} : std::vector<size_t>{1001};
  for (size_t n : sizes) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Floats params = random_floats(n, rng);
    Floats m = row.cuda() ? random_floats(n, rng, -0.1f, 0.1f) : Floats(n, 0.0f);
    Floats v = row.cuda() ? random_floats(n, rng, 0.0f, 0.01f) : Floats(n, 0.0f);
    Vec ref_params = to_doubles(params), ref_m = to_doubles(m), ref_v = to_doubles(v);
    Buffer<float> d_params(row.backend(), params), d_m(row.backend(), m), d_v(row.backend(), v);
    Buffer<float> d_grads(row.backend(), Floats(n));
    for (int t = 1; t <= (row.cuda() ? 3 : 5); t++) {
      SCOPED_TRACE(testing::Message() << "step " << t);
      const Floats grads = random_floats(n, rng);
      d_grads.upload(grads);
      row.backend().adamw_update(d_params.get(), nullptr, d_grads.get(), d_m.get(), d_v.get(), n,
                                 a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
      if (row.cpu()) {
        reference::adamw_update(ref_params, to_doubles(grads), ref_m, ref_v, a.lr, a.beta1, a.beta2,
                                a.eps, a.weight_decay, a.grad_scale, t);
        expect_close(d_params.download(), ref_params, kForwardTolerance, "params");
        expect_close(d_m.download(), ref_m, kForwardTolerance, "m");
        expect_close(d_v.download(), ref_v, kForwardTolerance, "v");
        continue;
      }
      backend_cpu().adamw_update(params.data(), nullptr, grads.data(), m.data(), v.data(), n, a.lr,
                                 a.beta1, a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
      expect_close(d_params.download(), params, kCudaParamTolerance, "params");
      expect_close(d_m.download(), m, kCudaMomentTolerance, "m");
      expect_close(d_v.download(), v, kCudaSecondMomentTolerance, "v");
      d_params.upload(params);
      d_m.upload(m);
      d_v.upload(v);
    }
    EXPECT_TRUE(d_params.guards_intact() && d_m.guards_intact() && d_v.guards_intact());
  }
}

// The sharding invariant of model/kernels/adamw.h: updating two slices gives
// the bits of one update of the whole (on the CPU at 1, 2 and 3 threads),
// the bf16 copy included (written through pointers offset like the params).
void adamw_slices(const OpRow& row) {
  std::mt19937 rng(21);
  const AdamwSettings a;
  for (auto [n, split] : {std::pair<size_t, size_t>{1001, 389}, {1000, 333}, {100003, 33334}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " split=" << split);
    const Floats params0 = random_floats(n, rng), grads = random_floats(n, rng);
    const Floats m0 = random_floats(n, rng), v0 = random_floats(n, rng, 0.0f, 1.0f);
    auto run = [&](bool sliced) {
      Buffer<float> p(row.backend(), params0), g(row.backend(), grads), m(row.backend(), m0),
          v(row.backend(), v0);
      Buffer<Bf16> p16(row.backend(), nan_filled<Bf16>(n));
      auto update = [&](size_t begin, size_t end) {
        row.backend().adamw_update(p.get() + begin, p16.get() + begin, g.get() + begin,
                                   m.get() + begin, v.get() + begin, end - begin, a.lr, a.beta1,
                                   a.beta2, a.eps, a.weight_decay, a.grad_scale, 3);
      };
      if (sliced) {
        update(0, split);
        update(split, n);
      } else {
        update(0, n);
      }
      Floats all = p.download();
      append(all, m.download());
      append(all, v.download());
      append(all, to_floats(p16.download()));
      EXPECT_TRUE(p16.guards_intact());
      return all;
    };
    const Floats whole = with_threads(1, [&] { return run(false); });
    for (int threads : row.cuda()
                           ? std::vector<int>{1}
                           : std::vector<int>(std::begin(kThreadCounts), std::end(kThreadCounts))) {
      expect_identical(with_threads(threads, [&] { return run(false); }), whole,
                       "whole, threads " + std::to_string(threads));
      expect_identical(with_threads(threads, [&] { return run(true); }), whole,
                       "sliced, threads " + std::to_string(threads));
    }
  }
}

// The bf16 copy written in the update's pass: over several steps, with and
// without it, from the same state. Writing it changes nothing else (params, m
// and v the same bits as without), and it is exactly the updated params
// rounded to nearest even: to_bf16 on the host (base/bf16.h, tested on
// its own against hand-made ties in test_bf16.cpp) and the bits the
// backend's own cast_f32_to_bf16 gives, the separate pass it replaces. The
// copy's buffer sits one element off alignment on cuda rows (offsets_for),
// with guards around it; it starts NaN, so an element left unwritten fails.
void adamw_bf16_copy(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 304 : 22);
  const AdamwSettings a;
  const Backend& be = row.backend();
  for (size_t offset : offsets_for(row)) {
    for (size_t n : {size_t{1}, size_t{1001}, size_t{100003}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " offset=" << offset);
      const Floats params0 = random_floats(n, rng), m0 = random_floats(n, rng, -0.1f, 0.1f),
                   v0 = random_floats(n, rng, 0.0f, 0.01f);
      Buffer<float> p_plain(be, params0), m_plain(be, m0), v_plain(be, v0);
      Buffer<float> p(be, params0, offset), m(be, m0), v(be, v0), grads(be, Floats(n));
      Buffer<Bf16> p16(be, nan_filled<Bf16>(n), offset), cast16(be, nan_filled<Bf16>(n));
      for (int t = 1; t <= 3; t++) {
        SCOPED_TRACE(testing::Message() << "step " << t);
        grads.upload(random_floats(n, rng));
        be.adamw_update(p_plain.get(), nullptr, grads.get(), m_plain.get(), v_plain.get(), n, a.lr,
                        a.beta1, a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
        be.adamw_update(p.get(), p16.get(), grads.get(), m.get(), v.get(), n, a.lr, a.beta1,
                        a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
        const Floats params = p.download();
        expect_identical(params, p_plain.download(), "params");
        expect_identical(m.download(), m_plain.download(), "m");
        expect_identical(v.download(), v_plain.download(), "v");
        const Bf16s copy = p16.download();
        expect_rounded_once(copy, params, "bf16 copy");
        be.cast_f32_to_bf16(cast16.get(), p.get(), n);
        expect_identical(copy, cast16.download(), "bf16 copy vs cast_f32_to_bf16");
      }
      EXPECT_TRUE(p.guards_intact() && p16.guards_intact());
    }
  }
}

// sum_squares on the backend under test, its double result placed in that
// backend's memory (NaN before, so a result never written fails; guarded) and
// read back.
double backend_sum_squares(const Backend& be, const Buffer<float>& x) {
  Buffer<double> result(be, {std::nan("")});
  be.sum_squares(result.get(), x.get(), x.size());
  EXPECT_TRUE(result.guards_intact());
  return result.download()[0];
}

double cpu_sum_squares(const Floats& x) {
  double result = std::nan("");
  backend_cpu().sum_squares(&result, x.data(), x.size());
  return result;
}

// Squares of floats are exact in double; only the order of <= 4M double
// additions differs: a relative error far below 1e-12 (cpu: against a loop in
// long double, whose 64-bit significand keeps its own error near 2^-64 n, well
// under the backend's; a plain double loop's own error reached 1.4e-12 at
// n = 4M, which is the reference failing, not the op; cuda: against the CPU
// twin). The same bits on a repeat (cpu: at 1, 2
// and 3 threads). 1 << 22 fills the GPU's first pass's capped grid; the
// others leave ragged blocks; n = 0 must write 0.
void sum_squares(const OpRow& row) {
  std::mt19937 rng(302);
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{13}, size_t{4097}, size_t{100003}, (size_t{1} << 22) + 5}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const Floats x = random_floats(n, rng, -3.0f, 3.0f);
    double expected = 0.0;
    if (row.cuda()) {
      expected = cpu_sum_squares(x);
    } else {
      long double sum = 0.0L;
      for (float value : x) sum += (long double)value * value;
      expected = (double)sum;
    }
    Buffer<float> d_x(row.backend(), x);
    const double first = with_threads(1, [&] { return backend_sum_squares(row.backend(), d_x); });
    EXPECT_NEAR(first, expected, 1e-12 * expected);
    for (int threads : kThreadCounts) {
      const double again =
          with_threads(threads, [&] { return backend_sum_squares(row.backend(), d_x); });
      EXPECT_EQ(std::memcmp(&again, &first, sizeof(double)), 0) << first << " then " << again;
    }
  }
}

// Inputs built so every partial sum is exact in double (multiples of 1/16 up
// to 4 in magnitude: squares are multiples of 2^-8 below 16, and 2^20 of them
// sum below 2^24, far inside double's 53 bits): any order must give the exact
// sum (cpu: a double loop; cuda: the CPU twin's bits), so a dropped or doubled
// element cannot hide in a tolerance.
void sum_squares_exact_inputs(const OpRow& row) {
  std::mt19937 rng(303);
  std::uniform_int_distribution<int> sixteenths(-64, 64);
  for (size_t n : {size_t{7}, size_t{65537}, size_t{1} << 20}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Floats x(n);
    for (float& v : x) v = sixteenths(rng) / 16.0f;
    double exact = 0.0;
    if (row.cuda())
      exact = cpu_sum_squares(x);
    else
      for (float v : x) exact += (double)v * v;
    Buffer<float> d_x(row.backend(), x);
    EXPECT_EQ(backend_sum_squares(row.backend(), d_x), exact);
  }
}

}  // namespace

std::vector<OpCase> cross_entropy_adamw_cases() {
  return {
      {"cross_entropy",
       "whole_vocabulary_matches_reference",
       kAllRows,
       {"cross_entropy_partials", "cross_entropy_combine"},
       LLM_BY_DTYPE(cross_entropy_whole)},
      {"cross_entropy",
       "split_matches_whole",
       kAllRows,
       {"cross_entropy_partials", "cross_entropy_combine"},
       LLM_BY_DTYPE(cross_entropy_split)},
      {"cross_entropy",
       "forward_only_keeps_logits",
       kAllRows,
       {"cross_entropy_partials", "cross_entropy_combine"},
       LLM_BY_DTYPE(cross_entropy_forward_only)},
      {"cross_entropy",
       "large_logits_stay_finite",
       kAllRows,
       {"cross_entropy_partials", "cross_entropy_combine"},
       LLM_BY_DTYPE(cross_entropy_large_logits)},
      {"cross_entropy",
       "ignored_targets_have_no_loss_nor_gradient",
       kAllRows,
       {"cross_entropy_partials", "cross_entropy_combine"},
       LLM_BY_DTYPE(cross_entropy_ignored_targets)},
      {"adamw", "over_steps", kF32Rows, {"adamw_update"}, adamw_over_steps},
      {"adamw", "slices_give_the_bits_of_the_whole", kF32Rows, {"adamw_update"}, adamw_slices},
      {"adamw",
       "bf16_copy_is_the_update_rounded_once",
       kF32Rows,
       {"adamw_update", "cast_f32_to_bf16"},
       adamw_bf16_copy},
      {"sum_squares", "matches_and_repeats", kF32Rows, {"sum_squares"}, sum_squares},
      {"sum_squares",
       "exact_inputs_give_the_exact_sum",
       kF32Rows,
       {"sum_squares"},
       sum_squares_exact_inputs},
  };
}

}  // namespace llm::op_test
