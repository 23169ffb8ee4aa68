// Op cases of cross-entropy (forward: losses; fused forward_backward: losses
// and dlogits in place of the logits) on every row, and of the optimizer ops
// (adamw_update, sum_squares; fp32 only) on both backends (see op_harness.h).
// Invariant: losses are max-subtracted (finite on logits of +-1000 and +-5e4);
// the forward leaves the logits untouched; the bf16 entry points exponentiate
// the same widened logits into fp32 as fp32 does (cpu bf16: the same bits,
// dlogits rounded once); adamw is elementwise, so slices update to the bits of
// the whole, and its bf16 copy is the updated params cast to bf16, bit for
// bit; sum_squares sums exact double squares, only reassociated, into a
// double in the backend's memory.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {
namespace {

constexpr float kDloss = 0.37f;  // gradients are of kDloss * sum(losses)

// ---- cross-entropy, cuda rows -----------------------------------------------------

struct LossShape {
  int N, V;
};
// Tiny rows (fewer logits than threads), odd sizes, GPT-2's 50257 and Llama
// 3's 128256 vocabularies (few rows: the CPU twin is the slow side).
constexpr LossShape kCudaLossShapes[] = {{1, 1},     {3, 7},     {4, 513},   {5, 1000},
                                         {2, 32000}, {2, 50257}, {1, 128256}};

// Losses (log V, at most ~12, plus the logit spread): both sides take
// max + log(sum of exp(x - max)) with 2-ulp exps; the sums differ in order
// (CPU: double; GPU: fp32 per thread with online rescaling, then a tree), a
// relative error of a few 1e-7 in the sum, so a few 1e-7 absolute in the log,
// plus the final fp32 rounding of a value up to ~1e5 for the huge logits.
constexpr Tolerance kCudaLossTolerance{1e-5, 1e-6};
constexpr double kBf16Ulp = 0x1p-7;  // bf16 ulp of 1: 8 significant bits

// dlogits: away from the target each is exp(x - max) * (dloss / sum), whose
// relative error is that of the exp (2 ulp per side) and of the sum: 4e-6
// relative is a wide margin. At the target, p * dloss - dloss cancels, so the
// same error is absolute in dloss. 1e-37 absolute: the CPU's exp flushes
// arguments below -87 to 0 where the GPU's expf still gives a denormal-sized
// value. In bf16 the CPU and GPU round fp32 dlogits within that of each
// other: add two bf16 ulps, as for the matmul outputs.
Doubles cuda_dlogit_bounds(const Doubles& expected, const Ints& targets, int V, bool bf16) {
  Doubles bound(expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    const bool at_target = (int)(i % V) == targets[i / V];
    bound[i] = 1e-37 + 4e-6 * (at_target ? std::fabs(kDloss) : std::fabs(expected[i]));
    if (bf16) bound[i] += 2.0 * kBf16Ulp * std::fabs(expected[i]);
  }
  return bound;
}

// Both entry points on logits uniform in [-spread, spread] against the CPU
// twin: losses refilled with NaN before every run (each run must write them),
// the forward leaving logits untouched and repeating bit for bit; with
// `fused`, the fused losses the forward's bits and dlogits (in place) within
// cuda_dlogit_bounds, repeating bit for bit.
template <class T>
void cuda_cross_entropy(const OpRow& row, float spread, uint32_t seed, bool fused) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(seed);
  for (auto [N, V] : kCudaLossShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V << " spread " << spread);
    const std::vector<T> logits = stored<T>(random_floats((size_t)N * V, rng, -spread, spread));
    const Ints targets = random_ints(N, V, rng);
    Floats losses(N), losses_fused(N);
    std::vector<T> dlogits = logits;
    backend_cpu().ops<T>().cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    backend_cpu().ops<T>().cross_entropy_forward_backward(losses_fused.data(), dlogits.data(),
                                                          targets.data(), N, V, kDloss);
    const Backend& be = row.backend();
    Buffer<T> d_logits(be, logits);
    Buffer<int32_t> d_targets(be, targets);
    Buffer<float> d_losses(be, Floats(N));
    auto forward = [&] {
      d_losses.upload(Floats(N, kNaN));
      be.ops<T>().cross_entropy_forward(d_losses.get(), d_logits.get(), d_targets.get(), N, V);
      return d_losses.download();
    };
    auto forward_backward = [&] {
      d_losses.upload(Floats(N, kNaN));
      d_logits.upload(logits);
      be.ops<T>().cross_entropy_forward_backward(d_losses.get(), d_logits.get(), d_targets.get(), N,
                                                 V, kDloss);
      return std::make_pair(d_losses.download(), d_logits.download());
    };
    const Floats gpu_losses = forward();
    expect_identical(d_logits.download(), logits, "logits untouched by the forward");
    expect_all_finite(to_doubles(gpu_losses), "losses");
    expect_close(gpu_losses, losses, kCudaLossTolerance, "losses");
    expect_identical(forward(), gpu_losses, "losses, second run");
    if (!fused) continue;
    const auto [gpu_losses_fused, gpu_dlogits] = forward_backward();
    // The fused loss is the same computation as the forward's.
    expect_identical(gpu_losses_fused, gpu_losses, "fused losses");
    const Doubles gpu_d = to_doubles(gpu_dlogits), cpu_d = to_doubles(dlogits);
    expect_all_finite(gpu_d, "dlogits");
    expect_within(gpu_d, cpu_d, cuda_dlogit_bounds(cpu_d, targets, V, bf16), "dlogits (in place)");
    expect_identical(forward_backward().second, gpu_dlogits, "dlogits, second run");
    EXPECT_TRUE(d_logits.guards_intact() && d_losses.guards_intact());
  }
}

// ---- cross-entropy, every row -----------------------------------------------------

constexpr LossShape kCpuLossShapes[] = {{7, 13}, {1, 1}, {3, 100}};

// cpu bf16 inputs: N = 7, V = 100, logits in [-1, 1] except that row 0's
// target logit leads by 8, so its probability is near 1 and its gradient
// p - 1 is small: rounding p before subtracting the one-hot would be caught.
struct Bf16LossInputs {
  int N = 7, V = 100;
  Floats logits;
  Ints targets;
  explicit Bf16LossInputs(std::mt19937& rng)
      : logits(random_bf16_values((size_t)N * V, rng, -1.0f, 1.0f)), targets(random_ints(N, V, rng)) {
    logits[targets[0]] = 9.0f;
  }
};

// Runs the forward (fused: forward_backward) of the backend under test on
// host logits; returns losses and the logits buffer afterwards.
template <class T>
std::pair<Floats, std::vector<T>> run_loss(const OpRow& row, const std::vector<T>& logits,
                                           const Ints& targets, int N, int V, bool fused, float dloss) {
  Buffer<T> d_logits(row.backend(), logits);
  Buffer<int32_t> d_targets(row.backend(), targets);
  Buffer<float> d_losses(row.backend(), Floats(N, kNaN));
  if (fused)
    row.backend().ops<T>().cross_entropy_forward_backward(d_losses.get(), d_logits.get(),
                                                          d_targets.get(), N, V, dloss);
  else
    row.backend().ops<T>().cross_entropy_forward(d_losses.get(), d_logits.get(), d_targets.get(), N, V);
  EXPECT_TRUE(d_logits.guards_intact() && d_losses.guards_intact());
  return {d_losses.download(), d_logits.download()};
}

// cpu f32: losses against the reference (kForwardTolerance), logits untouched
// (forward) or dlogits against finite differences (kBackwardTolerance); cpu
// bf16: losses the fp32 fused losses' bits, dlogits the fp32 ones rounded once;
// cuda: cuda_cross_entropy on logits in [-4, 4].
template <class T>
void cross_entropy(const OpRow& row, bool fused) {
  if (row.cuda()) {
    cuda_cross_entropy<T>(row, 4.0f, std::is_same_v<T, Bf16> ? 202 : 201, fused);
    return;
  }
  if constexpr (std::is_same_v<T, Bf16>) {
    std::mt19937 rng(116);
    const Bf16LossInputs in(rng);
    Floats losses32(in.N), dlogits32 = in.logits;
    backend_cpu().f32.cross_entropy_forward_backward(losses32.data(), dlogits32.data(),
                                                     in.targets.data(), in.N, in.V, kDloss);
    const auto [losses, after] = run_loss<Bf16>(row, to_bf16s(in.logits), in.targets, in.N, in.V, fused, kDloss);
    expect_identical(losses, losses32, fused ? "losses (forward_backward)" : "losses (forward)");
    if (fused) expect_rounded_once(after, dlogits32, "dlogits");
    else expect_identical(after, to_bf16s(in.logits), "logits untouched");
  } else {
    std::mt19937 rng(fused ? 18 : 17);
    for (auto [N, V] : kCpuLossShapes) {
      SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V);
      const Floats logits = random_floats((size_t)N * V, rng, -5.0f, 5.0f);
      const Ints targets = random_ints(N, V, rng);
      const auto [losses, after] = run_loss<float>(row, logits, targets, N, V, fused, kDloss);
      expect_close(losses, reference::cross_entropy_forward(to_doubles(logits), targets, N, V),
                   kForwardTolerance, "losses");
      if (!fused) {
        expect_identical(after, logits, "logits untouched");
        continue;
      }
      const Vec grad = finite_difference_gradient(
          [&](const Vec& x) { return reference::cross_entropy_forward(x, targets, N, V); },
          to_doubles(logits), Vec(N, kDloss));
      expect_close(after, grad, kBackwardTolerance, "dlogits");
    }
  }
}

template <class T>
void cross_entropy_forward(const OpRow& row) { cross_entropy<T>(row, false); }
template <class T>
void cross_entropy_forward_backward(const OpRow& row) { cross_entropy<T>(row, true); }

// Logits that overflow exp unless max-subtracted. cpu: N = 4, V = 50, each
// row's logit n raised by 1000, one at -1000, row 0's target the huge one; the
// losses match (f32: the reference; bf16: the fp32 bits), every dlogit is
// finite and each row of dlogits sums to zero (softmax sums to one, minus the
// one-hot). cuda: cuda_cross_entropy on logits in [-5e4, 5e4] (losses ~1e5).
template <class T>
void cross_entropy_large_logits(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  if (row.cuda()) {
    cuda_cross_entropy<T>(row, 5e4f, bf16 ? 204 : 203, true);
    return;
  }
  std::mt19937 rng(bf16 ? 117 : 19);
  const int N = 4, V = 50;
  Floats logits = random_values((size_t)N * V, rng, -3.0f, 3.0f, bf16);
  for (int n = 0; n < N; n++) logits[(size_t)n * V + n] = bf16 ? 1000.0f : logits[(size_t)n * V + n] + 1000.0f;
  logits[(size_t)(N - 1) * V] = -1000.0f;
  const Ints targets = {0, 0, 2, 7};  // row 0: the huge logit is the target; others not
  const auto [losses, after] = run_loss<T>(row, stored<T>(logits), targets, N, V, true, 1.0f);
  if (bf16) {
    Floats losses32(N);
    backend_cpu().f32.cross_entropy_forward(losses32.data(), logits.data(), targets.data(), N, V);
    expect_identical(losses, losses32, "losses");
  } else {
    const Vec ref = reference::cross_entropy_forward(to_doubles(logits), targets, N, V);
    expect_close(run_loss<T>(row, stored<T>(logits), targets, N, V, false, 1.0f).first, ref,
                 kForwardTolerance, "losses (forward)");
    expect_close(losses, ref, kForwardTolerance, "losses (forward_backward)");
  }
  const Floats dlogits = to_floats(after);
  for (int n = 0; n < N; n++) {
    ASSERT_TRUE(std::isfinite(losses[n])) << "row " << n;
    double row_sum = 0.0;
    for (int v = 0; v < V; v++) {
      ASSERT_TRUE(std::isfinite(dlogits[(size_t)n * V + v])) << "row " << n << " column " << v;
      row_sum += dlogits[(size_t)n * V + v];
    }
    // f32: the sum of fp32 gradients, 1e-6. bf16: each gradient is rounded to
    // bf16, by at most 2^-8 |g|, and sum |g| <= 2 (probabilities sum to 1,
    // |p_target - 1| <= 1): within 2^-7 of zero.
    EXPECT_NEAR(row_sum, 0.0, bf16 ? std::ldexp(1.0, -7) : 1e-6) << "row " << n;
  }
}

// ---- adamw / sum_squares (fp32 only) ----------------------------------------------

struct AdamwSettings {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f, grad_scale = 0.5f;
};

// cuda against the CPU twin: the same formula, the same order of fp32
// operations; only FMA contraction may differ (g++ -march=native and nvcc
// each fuse some a*b+c), a rounding or two in m, v and the update. 1e-6
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
  const std::vector<size_t> sizes = row.cuda() ? std::vector<size_t>{1, 1000, 100003} : std::vector<size_t>{1001};
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
    for (int threads : row.cuda() ? std::vector<int>{1} : std::vector<int>(std::begin(kThreadCounts), std::end(kThreadCounts))) {
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
// rounded to nearest even: to_bf16 on the host (runtime/bf16.h, tested on
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
// additions differs: a relative error far below 1e-12 (cpu: against a double
// loop; cuda: against the CPU twin). The same bits on a repeat (cpu: at 1, 2
// and 3 threads). 1 << 22 fills the GPU's first pass's capped grid; the
// others leave ragged blocks; n = 0 must write 0.
void sum_squares(const OpRow& row) {
  std::mt19937 rng(302);
  for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{4097}, size_t{100003}, (size_t{1} << 22) + 5}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const Floats x = random_floats(n, rng, -3.0f, 3.0f);
    double expected = 0.0;
    if (row.cuda()) expected = cpu_sum_squares(x);
    else for (float value : x) expected += (double)value * value;
    Buffer<float> d_x(row.backend(), x);
    const double first = with_threads(1, [&] { return backend_sum_squares(row.backend(), d_x); });
    EXPECT_NEAR(first, expected, 1e-12 * expected);
    for (int threads : kThreadCounts) {
      const double again = with_threads(threads, [&] { return backend_sum_squares(row.backend(), d_x); });
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
    if (row.cuda()) exact = cpu_sum_squares(x);
    else for (float v : x) exact += (double)v * v;
    Buffer<float> d_x(row.backend(), x);
    EXPECT_EQ(backend_sum_squares(row.backend(), d_x), exact);
  }
}

}  // namespace

std::vector<OpCase> cross_entropy_adamw_cases() {
  return {
      {"cross_entropy", "forward_keeps_logits", kAllRows, {"cross_entropy_forward"},
       LLM_BY_DTYPE(cross_entropy_forward)},
      {"cross_entropy", "forward_backward_in_place", kAllRows,
       {"cross_entropy_forward", "cross_entropy_forward_backward"},
       LLM_BY_DTYPE(cross_entropy_forward_backward)},
      {"cross_entropy", "large_logits_stay_finite", kAllRows,
       {"cross_entropy_forward", "cross_entropy_forward_backward"},
       LLM_BY_DTYPE(cross_entropy_large_logits)},
      {"adamw", "over_steps", kF32Rows, {"adamw_update"}, adamw_over_steps},
      {"adamw", "slices_give_the_bits_of_the_whole", kF32Rows, {"adamw_update"}, adamw_slices},
      {"adamw", "bf16_copy_is_the_update_rounded_once", kF32Rows,
       {"adamw_update", "cast_f32_to_bf16"}, adamw_bf16_copy},
      {"sum_squares", "matches_and_repeats", kF32Rows, {"sum_squares"}, sum_squares},
      {"sum_squares", "exact_inputs_give_the_exact_sum", kF32Rows, {"sum_squares"},
       sum_squares_exact_inputs},
  };
}

}  // namespace llm::op_test
