// tools/gpu_kit/measure_contention.cu: how much a bf16 GEMM slows down while
// a memory-streaming copy kernel runs beside it on another stream, as NCCL's
// kernels do while FSDP overlaps its collectives with compute.
//
// Why: cost_models/contention.h assumes a GEMM beside a collective loses exactly
// the SMs the collective's blocks hold (rate = 1 - blocks / SMs) and that the
// collective's HBM traffic costs the GEMM nothing. This program measures both
// on the GPU it runs on, with a copy kernel standing in for NCCL's: B blocks
// of 512 threads (NCCL: one block per channel, 8-32 channels on an H100),
// each thread moving 4 x 16-byte vectors per iteration (loads before stores,
// as NCCL's unrolled Simple protocol keeps several loads in flight), over a
// 1 GiB source into a 1 GiB destination (far beyond L2: every byte is HBM).
//
// Build and run (CUDA 12 or 13, an sm_90 GPU; other GPUs: change -arch):
//   nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/measure_contention
//        tools/gpu_kit/measure_contention.cu -lcublasLt             (one command)
//   /tmp/measure_contention [--quick] [--csv FILE] [--device N] [--no-sm-target]
// (tools/gpu_kit/run_on_gpu.sh --steps contention builds and runs it.)
// About 30 s on an H100 (--quick: about 10 s); progress goes to stderr.
//
// What it measures, per GEMM shape (M, N, K) and copy width B:
//  - copy alone: the copy kernel by itself at B = 1, 4, 8, 16, 24, 32, 64 and
//    the SM count, one pass over the buffer: GB/s (bytes read + written per
//    second), and on how many distinct SMs its blocks ran;
//  - GEMM alone: R back-to-back GEMMs (R from a first timing, a window of
//    about 40 ms), time per GEMM = window / R;
//  - GEMM under copy: the copy kernel is launched first and loops over the
//    buffer for a fixed time of its own (its clock: three GEMM windows), then
//    the same R GEMMs run on the other stream. Nothing on one stream waits
//    for the other (a first version, whose copy spun until the GEMM stream
//    set a flag, ran into its 4 s timeout on an H100 on 2026-11-24: the GEMMs
//    began only after the copy ended, as where streams share one hardware
//    queue). Events check that the copy began before the GEMM
//    window and ended after it; a copy that ended before the window began
//    means the streams did not run side by side (reported as SERIALIZED);
//    the copy's GB/s over its whole run is its bandwidth beside the GEMMs;
//  - GEMM under copy with cuBLASLt told the SMs left (CUBLASLT_MATMUL_DESC_
//    SM_COUNT_TARGET = SMs - B), what a trainer could do about it
//    (--no-sm-target skips it).
// Trials of every (shape, B) are interleaved round by round (B = 0 included)
// so clock and thermal drift touch all alike; each figure is a median over
// trials. The model's prediction is 1 / (1 - B / SMs) with SMs from
// cudaGetDeviceProperties.
//
// It prints the copy-alone table and the GEMM table to stdout at the end (with
// the algorithm cuBLASLt chose per shape); with --csv FILE it also writes one
// CSV row per measurement as each completes (kind = copy or gemm; the header
// names the columns). Checks: every CUDA and cuBLAS call (file:line, exit 1);
// the GEMM against a float64 host dot product of the same bf16 inputs at 16
// elements, for every algorithm used and once more on a GEMM that ran beside
// the copy (relative error < 1e-2, exit 2); the copy kernel's element count;
// the event order above; the kernels' timeouts (after one, it stops
// measuring). Those last three mark rows INVALID and exit 3 after the tables.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    const cudaError_t status_ = (call);                                              \
    if (status_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(status_), cudaGetErrorName(status_));          \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

#define CUBLAS_CHECK(call)                                                           \
  do {                                                                               \
    const cublasStatus_t status_ = (call);                                           \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call, \
                   cublasLtGetStatusString(status_), static_cast<int>(status_));     \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// After every kernel launch: a bad configuration shows up here, not later.
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

namespace {

constexpr int kCopyThreads = 512;         // NCCL's blocks: 512 threads (Simple, LL), 640 (LL128)
constexpr int kCopyUnroll = 4;            // 16-byte vectors in flight per thread
constexpr int kMaxCopyBlocks = 1024;      // Control::sm_of_block's size
constexpr unsigned kStopCheckEvery = 16;  // copy iterations between clock reads (power of 2)
constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLASLt's recommendation for Hopper
// One pass of the copy alone takes at most ~0.2 s (one block): past this
// limit something is wrong. (Beside the GEMMs the copy's limit is its run.)
constexpr unsigned long long kCopyTimeoutNs = 4ull * 1000 * 1000 * 1000;

// Set after a timeout: every later trial would time out too, so the run
// stops measuring and reports what it has.
bool g_give_up = false;

// ---------------------------------------------------------------- kernels

// Written by the copy kernel; zeroed before every run.
struct Control {
  unsigned int copy_timed_out;  // the copy ran out of its time before its passes
  unsigned long long vectors;   // 16-byte vectors copied, all threads
  int sm_of_block[kMaxCopyBlocks];
};

__device__ unsigned int sm_id() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ uint32_t hash_index(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Uniform values in [-1, 1), rounded to bf16: no zeros to time on.
__global__ void fill_random_bf16(__nv_bfloat16* p, size_t n, uint64_t seed) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = (hash_index(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16(2.0f * u - 1.0f);
  }
}

// Copies src to dst (n 16-byte vectors) `passes` times with a grid-stride
// loop, or until `timeout_ns` of the GPU's clock have passed. Block b records
// its SM.
__global__ void __launch_bounds__(kCopyThreads)
    copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n, int passes,
                Control* ctrl, unsigned long long timeout_ns) {
  if (threadIdx.x == 0) {
    ctrl->sm_of_block[blockIdx.x] = static_cast<int>(sm_id());
  }
  const unsigned long long t0 = global_ns();
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t step = stride * kCopyUnroll;
  unsigned long long copied = 0;
  unsigned int iteration = 0;
  bool stop = false;
  for (int pass = 0; pass < passes && !stop; pass++) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
      int4 v[kCopyUnroll];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; u++)
        if (i + u * stride < n) v[u] = src[i + u * stride];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; u++)
        if (i + u * stride < n) {
          dst[i + u * stride] = v[u];
          copied++;
        }
      if ((++iteration & (kStopCheckEvery - 1)) == 0) {
        if (global_ns() - t0 > timeout_ns) {
          atomicExch(&ctrl->copy_timed_out, 1u);
          stop = true;
          break;
        }
      }
    }
  }
  // Every thread reaches this point (no early return): the warp reduces, then
  // one atomic per warp.
  for (int offset = 16; offset > 0; offset /= 2)
    copied += __shfl_down_sync(0xffffffffu, copied, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(&ctrl->vectors, copied);
}

// ---------------------------------------------------------------- host side

struct Options {
  bool quick = false;
  bool sm_target = true;
  int device = 0;
  std::string csv;
  double window_ms = 40;  // GEMM series per trial
  int trials = 7;
  int copy_trials = 3;
  double warmup_ms = 150;
  size_t copy_bytes = size_t(1) << 30;
};

struct Shape {
  int m, n, k;
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

float bf16_bits_to_float(uint16_t bits) {
  const uint32_t word = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

struct Context {
  int sms = 0;
  cublasLtHandle_t lt = nullptr;
  cudaStream_t gemm_stream = nullptr, copy_stream = nullptr;
  cudaEvent_t copy_start, copy_end, gemm_start, gemm_end;
  Control* ctrl = nullptr;  // device
  int4* src = nullptr;
  int4* dst = nullptr;
  size_t vectors = 0;  // 16-byte vectors per buffer
  void* workspace = nullptr;
};

Control read_control(const Context& ctx) {
  Control c;
  CUDA_CHECK(cudaMemcpy(&c, ctx.ctrl, sizeof c, cudaMemcpyDeviceToHost));
  return c;
}

void reset_control(const Context& ctx) {
  CUDA_CHECK(cudaMemsetAsync(ctx.ctrl, 0, sizeof(Control), ctx.copy_stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.copy_stream));
}

int distinct_sms(const Control& c, int blocks) {
  std::set<int> sms(c.sm_of_block, c.sm_of_block + blocks);
  return static_cast<int>(sms.size());
}

// ---- the copy alone

struct CopyResult {
  int blocks = 0, sms_held = 0;
  double gbs = NAN, ms = NAN;  // median over trials; ms per pass
  bool ok = true;
};

// `passes` over the buffer per trial; ms is per pass.
CopyResult measure_copy_alone(const Context& ctx, int blocks, int passes, int trials,
                              bool* failed) {
  CopyResult r;
  r.blocks = blocks;
  std::vector<double> gbs, ms;
  const unsigned long long expected = static_cast<unsigned long long>(passes) * ctx.vectors;
  for (int t = 0; t < trials; t++) {
    reset_control(ctx);
    CUDA_CHECK(cudaEventRecord(ctx.copy_start, ctx.copy_stream));
    copy_kernel<<<blocks, kCopyThreads, 0, ctx.copy_stream>>>(ctx.src, ctx.dst, ctx.vectors, passes,
                                                              ctx.ctrl, kCopyTimeoutNs);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaEventRecord(ctx.copy_end, ctx.copy_stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.copy_stream));
    float elapsed = 0;
    CUDA_CHECK(cudaEventElapsedTime(&elapsed, ctx.copy_start, ctx.copy_end));
    const Control c = read_control(ctx);
    if (c.copy_timed_out || c.vectors != expected) {
      std::fprintf(stderr, "ERROR: copy alone at %d blocks: %llu vectors copied of %llu%s\n",
                   blocks, c.vectors, expected, c.copy_timed_out ? " (timed out)" : "");
      *failed = true;
      r.ok = false;
      if (c.copy_timed_out) g_give_up = true;
    }
    r.sms_held = distinct_sms(c, blocks);
    ms.push_back(elapsed / passes);
    gbs.push_back(2.0 * 16.0 * double(c.vectors) / (elapsed * 1e-3) / 1e9);
  }
  r.gbs = median(gbs);
  r.ms = median(ms);
  return r;
}

// ---- the GEMM: D (M x N) = A^T B with A stored K x M and B stored K x N,
// column-major (cuBLAS's "TN", its fastest layout for bf16): D(i, j) is the
// dot product of A's column i and B's column j, both contiguous in K.

struct GemmBuffers {
  Shape s{};
  __nv_bfloat16 *a = nullptr, *b = nullptr, *d = nullptr;
};

struct GemmPlan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float waves = 0;
  size_t workspace = 0;
  std::string describe;  // "id 66 tile 23 splitK 1 cluster 2 waves 1.94"
};

void gemm_plan_free(GemmPlan* p) {
  if (p->desc) CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
  if (p->a) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->a));
  if (p->b) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->b));
  if (p->d) CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->d));
  *p = GemmPlan{};
}

// The heuristic's first choice for `s`, targeting `sm_target` SMs (0: all);
// plan.ok false when cuBLASLt offers none (only with a target: exits without).
GemmPlan gemm_plan_create(const Context& ctx, const Shape& s, int sm_target) {
  GemmPlan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                              sizeof trans_a));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                              sizeof trans_b));
  if (sm_target > 0) {
    const int32_t target = sm_target;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                &target, sizeof target));
  }
  // Layouts describe the matrices as stored: rows, columns, leading dimension.
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, uint64_t(s.k), uint64_t(s.m), s.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, uint64_t(s.k), uint64_t(s.n), s.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, uint64_t(s.m), uint64_t(s.n), s.m));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference,
                                                    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx.lt, p.desc, p.a, p.b, p.d, p.d,
                                                               preference, 1, &result, &found);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
  if (status != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: no cuBLASLt algorithm for %dx%dx%d (sm target %d): %s\n",
                 sm_target > 0 ? "warning" : "ERROR", s.m, s.n, s.k, sm_target,
                 status != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(status) : "none found");
    if (sm_target == 0) std::exit(1);
    gemm_plan_free(&p);
    return p;
  }
  p.algo = result.algo;
  p.waves = result.wavesCount;
  p.workspace = result.workspaceSize;
  p.ok = true;
  // For the table only: what the heuristic chose (cublasLt.h's enums; -1
  // where this cuBLASLt does not say).
  int32_t id = -1, splitk = -1;
  uint32_t tile = 0;
  uint16_t cluster = 0;
  auto config = [&](cublasLtMatmulAlgoConfigAttributes_t attribute, void* value, size_t bytes) {
    size_t written = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoConfigGetAttribute(&p.algo, attribute, value, bytes, &written);
    return st == CUBLAS_STATUS_SUCCESS && written == bytes;
  };
  if (!config(CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id)) id = -1;
  const long long tile_id =
      config(CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile) ? static_cast<long long>(tile) : -1;
  if (!config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk)) splitk = -1;
  const int cluster_id =
      config(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster) ? cluster : -1;
  char text[128];
  std::snprintf(text, sizeof text, "id %d tile %lld splitK %d cluster %d waves %.2f", id, tile_id,
                splitk, cluster_id, p.waves);
  p.describe = text;
  return p;
}

void gemm_run(const Context& ctx, const GemmPlan& p, const GemmBuffers& g) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(ctx.lt, p.desc, &alpha, g.a, p.a, g.b, p.b, &beta, g.d, p.d, g.d, p.d,
                              &p.algo, ctx.workspace, kWorkspaceBytes, ctx.gemm_stream));
}

GemmBuffers gemm_buffers_create(const Shape& s, uint64_t seed) {
  GemmBuffers g;
  g.s = s;
  const size_t a_count = size_t(s.k) * size_t(s.m), b_count = size_t(s.k) * size_t(s.n),
               d_count = size_t(s.m) * size_t(s.n);
  CUDA_CHECK(cudaMalloc(&g.a, a_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&g.b, b_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&g.d, d_count * sizeof(__nv_bfloat16)));
  fill_random_bf16<<<1024, 256>>>(g.a, a_count, seed);
  LAUNCH_CHECK();
  fill_random_bf16<<<1024, 256>>>(g.b, b_count, seed + 1);
  LAUNCH_CHECK();
  CUDA_CHECK(cudaMemset(g.d, 0, d_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaDeviceSynchronize());
  return g;
}

void gemm_buffers_free(GemmBuffers* g) {
  CUDA_CHECK(cudaFree(g->a));
  CUDA_CHECK(cudaFree(g->b));
  CUDA_CHECK(cudaFree(g->d));
  *g = GemmBuffers{};
}

// Compares 16 elements of D as the last GEMM left it (four corners and 12
// pseudo-random ones) with float64 dot products of the same bf16 inputs. The
// error is relative to max(|exact|, sqrt(sum of the squared products)), the
// dot product's typical size, so a sum that cancels to near zero does not
// fail on bf16's rounding of the output. Returns the worst relative error.
double gemm_check(const Context& ctx, const GemmBuffers& g) {
  CUDA_CHECK(cudaStreamSynchronize(ctx.gemm_stream));
  const Shape s = g.s;
  std::vector<std::pair<int, int>> at = {{0, 0}, {s.m - 1, s.n - 1}, {s.m - 1, 0}, {0, s.n - 1}};
  uint64_t state = 12345;
  while (at.size() < 16) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int i = int((state >> 33) % uint64_t(s.m));
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int j = int((state >> 33) % uint64_t(s.n));
    at.push_back({i, j});
  }
  std::vector<uint16_t> a_col(s.k), b_col(s.k);
  double worst = 0;
  for (const auto& ij : at) {
    const int i = ij.first, j = ij.second;
    uint16_t d_bits = 0;
    CUDA_CHECK(
        cudaMemcpy(a_col.data(), g.a + size_t(i) * s.k, size_t(s.k) * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(
        cudaMemcpy(b_col.data(), g.b + size_t(j) * s.k, size_t(s.k) * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&d_bits, g.d + size_t(i) + size_t(j) * s.m, 2, cudaMemcpyDeviceToHost));
    double exact = 0, squares = 0;
    for (int k = 0; k < s.k; k++) {
      const double prod =
          double(bf16_bits_to_float(a_col[k])) * double(bf16_bits_to_float(b_col[k]));
      exact += prod;
      squares += prod * prod;
    }
    const double got = bf16_bits_to_float(d_bits);
    const double scale = std::max(std::fabs(exact), std::sqrt(squares));
    const double rel = scale > 0 ? std::fabs(got - exact) / scale : std::fabs(got);
    if (!std::isnan(worst) && !(rel <= worst)) worst = rel;  // a NaN sticks
  }
  return worst;
}

// ---- one trial: R GEMMs, alone (blocks = 0) or beside the copy at `blocks`

struct Trial {
  double gemm_ms = NAN;                 // per GEMM: window / R
  double copy_gbs = NAN;                // over the copy's whole run
  double lead_ms = NAN, tail_ms = NAN;  // copy start -> window start, window end -> copy end
  int sms_held = 0;
  bool ok = true;
};

// alone_ms: one GEMM's time alone (the first timing), which sets the copy's run.
Trial run_trial(const Context& ctx, const GemmPlan& p, const GemmBuffers& g, int repeats,
                int blocks, double alone_ms) {
  Trial t;
  reset_control(ctx);  // and nothing of an earlier trial is still running (synchronized below)
  if (blocks > 0) {
    // The copy's own clock ends it: three windows of the GEMMs alone, so it
    // outlasts them unless they slow down more than threefold.
    const double copy_ns = std::max(20e6, 3e6 * alone_ms * repeats);
    CUDA_CHECK(cudaEventRecord(ctx.copy_start, ctx.copy_stream));
    copy_kernel<<<blocks, kCopyThreads, 0, ctx.copy_stream>>>(
        ctx.src, ctx.dst, ctx.vectors, INT_MAX, ctx.ctrl, static_cast<unsigned long long>(copy_ns));
    LAUNCH_CHECK();
    CUDA_CHECK(cudaEventRecord(ctx.copy_end, ctx.copy_stream));
  }
  CUDA_CHECK(cudaEventRecord(ctx.gemm_start, ctx.gemm_stream));
  for (int r = 0; r < repeats; r++) gemm_run(ctx, p, g);
  CUDA_CHECK(cudaEventRecord(ctx.gemm_end, ctx.gemm_stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.gemm_stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.copy_stream));
  float window = 0;
  CUDA_CHECK(cudaEventElapsedTime(&window, ctx.gemm_start, ctx.gemm_end));
  t.gemm_ms = window / repeats;
  if (blocks == 0) return t;

  const Control c = read_control(ctx);
  float copy_ms = 0, lead = 0, tail = 0;
  CUDA_CHECK(cudaEventElapsedTime(&copy_ms, ctx.copy_start, ctx.copy_end));
  CUDA_CHECK(cudaEventElapsedTime(&lead, ctx.copy_start, ctx.gemm_start));
  CUDA_CHECK(cudaEventElapsedTime(&tail, ctx.gemm_end, ctx.copy_end));
  t.copy_gbs = 2.0 * 16.0 * double(c.vectors) / (copy_ms * 1e-3) / 1e9;
  t.lead_ms = lead;
  t.tail_ms = tail;
  t.sms_held = distinct_sms(c, blocks);
  // The copy is launched first and outlasts the window, so lead and tail are
  // positive; the events' resolution (about 0.5 us) is the only slack allowed.
  if (lead >= copy_ms - 0.001f) {
    std::fprintf(stderr,
                 "ERROR: %dx%dx%d at %d blocks: SERIALIZED: the GEMMs began %.3f ms after the "
                 "copy began, after its %.3f ms run; the two streams did not run side by side "
                 "(CUDA_DEVICE_MAX_CONNECTIONS=%s)\n",
                 g.s.m, g.s.n, g.s.k, blocks, lead, copy_ms,
                 std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")
                     ? std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")
                     : "unset");
    t.ok = false;
    g_give_up = true;
  } else if (lead < -0.001f || tail < -0.001f) {
    std::fprintf(stderr,
                 "ERROR: %dx%dx%d at %d blocks: lead %.4f ms, tail %.4f ms (both must be >= 0: "
                 "the copy must cover the GEMM window)\n",
                 g.s.m, g.s.n, g.s.k, blocks, lead, tail);
    t.ok = false;
  }
  return t;
}

// ---- one shape

struct Row {  // one (shape, blocks, variant) of the GEMM table
  Shape s{};
  int blocks = 0;
  bool sm_target = false;
  std::string algo;
  int repeats = 0, trials = 0, sms_held = 0;
  double gemm_us_alone = NAN, gemm_us = NAN, slowdown = NAN, model = NAN, tflops = NAN;
  double copy_gbs_alone = NAN, copy_gbs = NAN, lead_us = NAN, tail_us = NAN;
  bool host_bound = false, ok = true;
};

std::vector<Row> measure_shape(const Context& ctx, const Options& o, const Shape& s,
                               const std::vector<int>& blocks_list,
                               const std::vector<CopyResult>& copies, bool* failed) {
  std::fprintf(stderr, "[contention] GEMM %dx%dx%d: setup\n", s.m, s.n, s.k);
  GemmBuffers g = gemm_buffers_create(s, 1000 + uint64_t(s.m) * 7 + uint64_t(s.n) * 3 + s.k);
  GemmPlan base = gemm_plan_create(ctx, s, 0);

  // Warm-up (clocks, caches, cuBLASLt's first-call setup), then time a batch
  // to choose R; the host's cost of one launch is timed on a short batch that
  // cannot fill the launch queue.
  gemm_run(ctx, base, g);
  CUDA_CHECK(cudaStreamSynchronize(ctx.gemm_stream));
  double gemm_ms = 0;
  {
    const int batch = 8;
    auto warm_start = std::chrono::steady_clock::now();
    do {
      CUDA_CHECK(cudaEventRecord(ctx.gemm_start, ctx.gemm_stream));
      for (int r = 0; r < batch; r++) gemm_run(ctx, base, g);
      CUDA_CHECK(cudaEventRecord(ctx.gemm_end, ctx.gemm_stream));
      CUDA_CHECK(cudaEventSynchronize(ctx.gemm_end));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, ctx.gemm_start, ctx.gemm_end));
      gemm_ms = ms / batch;
    } while (
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warm_start)
            .count() < o.warmup_ms);
  }
  double host_us = 0;
  {
    const int batch = 64;
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < batch; r++) gemm_run(ctx, base, g);
    host_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        batch;
    CUDA_CHECK(cudaStreamSynchronize(ctx.gemm_stream));
  }
  gemm_ms = std::max(gemm_ms, 1e-4);  // (an event pair's resolution, for safety)
  const int repeats = std::max(3, std::min(5000, int(std::ceil(o.window_ms / gemm_ms))));
  const bool host_bound = host_us > 0.8 * gemm_ms * 1e3;
  std::fprintf(stderr, "[contention]   %s; %.1f us per GEMM, host %.1f us per launch%s, R = %d\n",
               base.describe.c_str(), gemm_ms * 1e3, host_us,
               host_bound ? " (HOST-BOUND: times are the host's)" : "", repeats);

  // Plans told the SMs the copy leaves, one per B; each checked like the base.
  std::vector<GemmPlan> targeted(blocks_list.size());
  if (o.sm_target)
    for (size_t b = 0; b < blocks_list.size(); b++)
      if (blocks_list[b] > 0) targeted[b] = gemm_plan_create(ctx, s, ctx.sms - blocks_list[b]);

  // Checks D as the last GEMM left it; `run` first runs one with `p`.
  auto check = [&](const GemmPlan& p, bool run, const char* what) {
    if (run) gemm_run(ctx, p, g);
    const double err = gemm_check(ctx, g);
    std::fprintf(stderr, "[contention]   check %s (%s): max relative error %.2e\n", what,
                 p.describe.c_str(), err);
    if (!(err < 1e-2)) {
      std::fprintf(stderr, "ERROR: GEMM %dx%dx%d (%s) is wrong: relative error %.3e >= 1e-2\n", s.m,
                   s.n, s.k, what, err);
      std::exit(2);
    }
  };
  check(base, true, "heuristic");
  for (size_t b = 0; b < blocks_list.size(); b++)
    if (targeted[b].ok) {
      char what[64];
      std::snprintf(what, sizeof what, "sm target %d", ctx.sms - blocks_list[b]);
      check(targeted[b], true, what);
    }

  // Trials, interleaved round by round.
  std::vector<std::vector<Trial>> plain(blocks_list.size()), aimed(blocks_list.size());
  for (int t = 0; t < o.trials && !g_give_up; t++) {
    std::fprintf(stderr, "[contention]   trial %d/%d\n", t + 1, o.trials);
    for (size_t b = 0; b < blocks_list.size() && !g_give_up; b++) {
      plain[b].push_back(run_trial(ctx, base, g, repeats, blocks_list[b], gemm_ms));
      if (targeted[b].ok && !g_give_up)
        aimed[b].push_back(run_trial(ctx, targeted[b], g, repeats, blocks_list[b], gemm_ms));
    }
  }
  // The last GEMM of the last trial ran beside the copy at the largest B.
  if (!g_give_up)
    check(targeted.back().ok ? targeted.back() : base, false, "the last GEMM, beside the copy");

  std::vector<double> alone_ms;
  for (const Trial& t : plain[0]) alone_ms.push_back(t.gemm_ms);  // blocks_list[0] == 0
  const double alone = median(alone_ms);
  const double flops = 2.0 * s.m * double(s.n) * s.k;
  std::vector<Row> rows;
  auto summarize = [&](const std::vector<Trial>& trials, int blocks, bool sm_target,
                       const GemmPlan& p) {
    Row r;
    r.s = s;
    r.blocks = blocks;
    r.sm_target = sm_target;
    r.algo = p.describe;
    r.repeats = repeats;
    r.trials = int(trials.size());
    r.host_bound = host_bound;
    std::vector<double> ms, gbs, lead, tail;
    for (const Trial& t : trials) {
      ms.push_back(t.gemm_ms);
      if (blocks > 0) {
        gbs.push_back(t.copy_gbs);
        lead.push_back(t.lead_ms);
        tail.push_back(t.tail_ms);
        r.sms_held = std::max(r.sms_held, t.sms_held);
      }
      r.ok = r.ok && t.ok;
    }
    if (trials.empty()) r.ok = false;  // given up before it ran
    r.gemm_us_alone = alone * 1e3;
    r.gemm_us = median(ms) * 1e3;
    r.slowdown = median(ms) / alone;
    r.model = 1.0 / (1.0 - double(blocks) / ctx.sms);
    r.tflops = flops / (median(ms) * 1e-3) / 1e12;
    for (const CopyResult& c : copies)
      if (c.blocks == blocks) r.copy_gbs_alone = c.gbs;
    if (!lead.empty()) {
      r.copy_gbs = median(gbs);
      r.lead_us = *std::max_element(lead.begin(), lead.end()) * 1e3;
      r.tail_us = *std::max_element(tail.begin(), tail.end()) * 1e3;
    }
    if (!r.ok) *failed = true;
    rows.push_back(r);
  };
  for (size_t b = 0; b < blocks_list.size(); b++) {
    summarize(plain[b], blocks_list[b], false, base);
    if (targeted[b].ok) summarize(aimed[b], blocks_list[b], true, targeted[b]);
  }
  for (GemmPlan& p : targeted)
    if (p.ok) gemm_plan_free(&p);
  gemm_plan_free(&base);
  gemm_buffers_free(&g);
  return rows;
}

int device_attribute(cudaDeviceAttr attribute, int device) {  // -1 when unknown
  int value = -1;
  if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
    (void)cudaGetLastError();  // a failed query is not sticky: clear it
    return -1;
  }
  return value;
}

// "-" (table) or "" (CSV) for a figure that does not apply.
std::string number(double v, const char* format, const char* missing = "-") {
  if (std::isnan(v)) return missing;
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// CSV rows by column name, so no row can shift a column; flushed per row so a
// run that dies part way leaves what it measured.
class CsvWriter {
 public:
  using Row = std::vector<std::pair<const char*, std::string>>;
  static constexpr const char* kColumns[] = {
      "kind",       "device",         "sms",      "m",        "n",
      "k",          "variant",        "blocks",   "sms_held", "repeats",
      "trials",     "gemm_us_alone",  "gemm_us",  "slowdown", "model_slowdown",
      "tflops",     "copy_gbs_alone", "copy_gbs", "lead_us",  "tail_us",
      "host_bound", "valid",          "algo"};

  explicit CsvWriter(FILE* file) : file_(file) {
    if (!file_) return;
    for (size_t c = 0; c < std::size(kColumns); c++)
      std::fprintf(file_, "%s%s", c ? "," : "", kColumns[c]);
    std::fprintf(file_, "\n");
    std::fflush(file_);
  }
  ~CsvWriter() {
    if (file_) std::fclose(file_);
  }
  void write(const Row& row) {
    if (!file_) return;
    for (const auto& field : row)
      if (std::find_if(std::begin(kColumns), std::end(kColumns), [&](const char* c) {
            return std::strcmp(c, field.first) == 0;
          }) == std::end(kColumns)) {
        std::fprintf(stderr, "%s:%d: no CSV column %s\n", __FILE__, __LINE__, field.first);
        std::exit(1);
      }
    for (size_t c = 0; c < std::size(kColumns); c++) {
      std::string value;
      for (const auto& field : row)
        if (std::strcmp(field.first, kColumns[c]) == 0) value = field.second;
      std::fprintf(file_, "%s%s", c ? "," : "", value.c_str());
    }
    std::fprintf(file_, "\n");
    std::fflush(file_);
  }

 private:
  FILE* file_;
};

void usage(FILE* to) {
  std::fprintf(to,
               "measure_contention [--quick] [--csv FILE] [--device N] [--no-sm-target]\n"
               "  a bf16 GEMM's slowdown beside a memory-streaming copy kernel of B blocks\n"
               "  (see the header of tools/gpu_kit/measure_contention.cu)\n"
               "  --quick         3 trials of 10 ms windows (about 10 s) instead of 7 of 40 ms\n"
               "  --csv FILE      also write one CSV row per measurement\n"
               "  --device N      the CUDA device (0)\n"
               "  --no-sm-target  skip the runs with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--no-sm-target") {
      o.sm_target = false;
    } else if (arg == "--csv" && i + 1 < argc) {
      o.csv = argv[++i];
    } else if (arg == "--device" && i + 1 < argc) {
      o.device = std::atoi(argv[++i]);
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "measure_contention: unknown or incomplete option %s\n", arg.c_str());
      usage(stderr);
      return 1;
    }
  }
  if (o.quick) {
    o.window_ms = 10;
    o.trials = 3;
    o.copy_trials = 2;
    o.warmup_ms = 40;
  }
  // The copy kernel runs until the GEMM stream stops it: a launch that waits
  // for its kernel to end would wait for the copy's timeout every trial.
  const char* launch_blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (launch_blocking && std::strcmp(launch_blocking, "0") != 0) {
    std::fprintf(stderr,
                 "measure_contention: unset CUDA_LAUNCH_BLOCKING: the copy and the GEMMs "
                 "must run side by side\n");
    return 1;
  }
  FILE* csv_file = nullptr;
  if (!o.csv.empty() && !(csv_file = std::fopen(o.csv.c_str(), "w"))) {
    std::fprintf(stderr, "measure_contention: cannot write %s\n", o.csv.c_str());
    return 1;
  }
  CsvWriter csv(csv_file);

  Context ctx;
  CUDA_CHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
  ctx.sms = prop.multiProcessorCount;
  int runtime = 0, driver = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  const int sm_khz = device_attribute(cudaDevAttrClockRate, o.device);
  const int mem_khz = device_attribute(cudaDevAttrMemoryClockRate, o.device);
  // HBM: two transfers per memory clock over the bus.
  const double peak_gbs =
      mem_khz > 0 ? 2.0 * mem_khz * 1e3 * (prop.memoryBusWidth / 8.0) / 1e9 : NAN;
  cudaFuncAttributes copy_attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&copy_attributes, copy_kernel));
  std::printf(
      "device: %s (sm_%d%d), %d SMs, SM clock %d MHz, HBM peak %s GB/s, L2 %d MiB; "
      "CUDA runtime %d, driver %d, cuBLASLt %zu\n",
      prop.name, prop.major, prop.minor, ctx.sms, sm_khz / 1000, number(peak_gbs, "%.0f").c_str(),
      prop.l2CacheSize >> 20, runtime, driver, cublasLtGetVersion());
  std::printf(
      "copy kernel: %d threads x %d registers per block, %d x 16-byte vectors in flight "
      "per thread; %zu MiB src -> dst\n",
      kCopyThreads, copy_attributes.numRegs, kCopyUnroll, o.copy_bytes >> 20);
  std::fflush(stdout);

  CUBLAS_CHECK(cublasLtCreate(&ctx.lt));
  CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.gemm_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.copy_stream, cudaStreamNonBlocking));
  for (cudaEvent_t* e : {&ctx.copy_start, &ctx.copy_end, &ctx.gemm_start, &ctx.gemm_end})
    CUDA_CHECK(cudaEventCreate(e));
  CUDA_CHECK(cudaMalloc(&ctx.ctrl, sizeof(Control)));
  CUDA_CHECK(cudaMalloc(&ctx.workspace, kWorkspaceBytes));
  ctx.vectors = o.copy_bytes / sizeof(int4);
  CUDA_CHECK(cudaMalloc(&ctx.src, ctx.vectors * sizeof(int4)));
  CUDA_CHECK(cudaMalloc(&ctx.dst, ctx.vectors * sizeof(int4)));
  fill_random_bf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(ctx.src),
                                  ctx.vectors * (sizeof(int4) / sizeof(__nv_bfloat16)), 7);
  LAUNCH_CHECK();
  CUDA_CHECK(cudaMemset(ctx.dst, 0, ctx.vectors * sizeof(int4)));
  CUDA_CHECK(cudaDeviceSynchronize());

  bool failed = false;
  // B = 0 first: the GEMM alone, the reference of every other row. B stays
  // below the SM count so the GEMM has SMs to run on.
  std::vector<int> gemm_blocks;
  for (int b : {0, 4, 8, 16, 24, 32, 64})
    if (b < ctx.sms && b <= kMaxCopyBlocks) gemm_blocks.push_back(b);
  std::vector<int> copy_blocks;
  for (int b : {1, 4, 8, 16, 24, 32, 64, ctx.sms})
    if (b <= ctx.sms && b <= kMaxCopyBlocks &&
        std::find(copy_blocks.begin(), copy_blocks.end(), b) == copy_blocks.end())
      copy_blocks.push_back(b);
  const std::string device_name = std::string("\"") + prop.name + "\"";

  // ---- the copy alone
  std::fprintf(stderr, "[contention] copy alone: warm-up\n");
  measure_copy_alone(ctx, copy_blocks.back(), 100, 1, &failed);  // ~70 ms on an H100: clocks up
  std::vector<CopyResult> copies;
  for (int b : copy_blocks) {
    if (g_give_up) break;
    std::fprintf(stderr, "[contention] copy alone: %d blocks\n", b);
    copies.push_back(measure_copy_alone(ctx, b, 1, o.copy_trials, &failed));
    const CopyResult& c = copies.back();
    csv.write({{"kind", "copy"},
               {"device", device_name},
               {"sms", std::to_string(ctx.sms)},
               {"blocks", std::to_string(c.blocks)},
               {"sms_held", std::to_string(c.sms_held)},
               {"repeats", "1"},
               {"trials", std::to_string(o.copy_trials)},
               {"copy_gbs_alone", number(c.gbs, "%.1f", "")},
               {"valid", c.ok ? "1" : "0"}});
  }

  // ---- the GEMMs
  const std::vector<Shape> shapes = {
      {8192, 8192, 8192}, {16384, 2048, 2048}, {16384, 5632, 2048}, {4096, 1024, 1024}};
  std::vector<Row> rows;
  for (const Shape& s : shapes) {
    if (g_give_up) {
      std::fprintf(stderr, "[contention] GEMM %dx%dx%d: skipped after a timeout\n", s.m, s.n, s.k);
      failed = true;
      continue;
    }
    for (const Row& r : measure_shape(ctx, o, s, gemm_blocks, copies, &failed)) {
      rows.push_back(r);
      csv.write({{"kind", "gemm"},
                 {"device", device_name},
                 {"sms", std::to_string(ctx.sms)},
                 {"m", std::to_string(r.s.m)},
                 {"n", std::to_string(r.s.n)},
                 {"k", std::to_string(r.s.k)},
                 {"variant", r.sm_target ? "sm_target" : "default"},
                 {"blocks", std::to_string(r.blocks)},
                 {"sms_held", std::to_string(r.sms_held)},
                 {"repeats", std::to_string(r.repeats)},
                 {"trials", std::to_string(r.trials)},
                 {"gemm_us_alone", number(r.gemm_us_alone, "%.3f", "")},
                 {"gemm_us", number(r.gemm_us, "%.3f", "")},
                 {"slowdown", number(r.slowdown, "%.4f", "")},
                 {"model_slowdown", number(r.model, "%.4f", "")},
                 {"tflops", number(r.tflops, "%.1f", "")},
                 {"copy_gbs_alone", number(r.copy_gbs_alone, "%.1f", "")},
                 {"copy_gbs", number(r.copy_gbs, "%.1f", "")},
                 {"lead_us", number(r.lead_us, "%.2f", "")},
                 {"tail_us", number(r.tail_us, "%.2f", "")},
                 {"host_bound", r.host_bound ? "1" : "0"},
                 {"valid", r.ok ? "1" : "0"},
                 {"algo", "\"" + r.algo + "\""}});
    }
  }

  // ---- the tables
  std::printf("\ncopy alone (one pass over the buffer; GB/s = bytes read + written per second):\n");
  std::printf("%7s %9s %9s %11s %9s\n", "blocks", "SMs held", "GB/s", "GB/s/block", "ms");
  for (const CopyResult& c : copies)
    std::printf("%7d %9d %9s %11s %9s%s\n", c.blocks, c.sms_held, number(c.gbs, "%.0f").c_str(),
                number(c.gbs / c.blocks, "%.1f").c_str(), number(c.ms, "%.3f").c_str(),
                c.ok ? "" : " INVALID");
  std::printf(
      "\nGEMM beside the copy: bf16 in, fp32 accumulate, bf16 out (TN); per GEMM, the median"
      " of %d trials\nof R back-to-back GEMMs; slowdown = under / alone; model = 1 / (1 - "
      "B / %d SMs); variant\n'target': cuBLASLt told SMs - B; copy GB/s beside the GEMMs "
      "and alone; lead/tail: the copy's\nrun before and after the GEMM window (max):\n",
      o.trials, ctx.sms);
  std::printf("%-17s %-7s %3s %5s %9s %9s %8s %7s %7s %9s %9s %8s %8s\n", "shape MxNxK", "variant",
              "B", "held", "alone us", "under us", "slowdown", "model", "TFLOPS", "copy GB/s",
              "alone", "lead us", "tail us");
  for (const Row& r : rows) {
    char shape[32];
    std::snprintf(shape, sizeof shape, "%dx%dx%d", r.s.m, r.s.n, r.s.k);
    std::printf("%-17s %-7s %3d %5d %9s %9s %8s %7s %7s %9s %9s %8s %8s%s%s\n", shape,
                r.sm_target ? "target" : "default", r.blocks, r.sms_held,
                number(r.gemm_us_alone, "%.1f").c_str(), number(r.gemm_us, "%.1f").c_str(),
                number(r.slowdown, "%.3f").c_str(), number(r.model, "%.3f").c_str(),
                number(r.tflops, "%.0f").c_str(), number(r.copy_gbs, "%.0f").c_str(),
                number(r.copy_gbs_alone, "%.0f").c_str(), number(r.lead_us, "%.1f").c_str(),
                number(r.tail_us, "%.1f").c_str(), r.host_bound ? " HOST-BOUND" : "",
                r.ok ? "" : " INVALID");
  }
  std::printf("\nalgorithms (cublasLt.h's enums):\n");
  for (const Row& r : rows)
    if (r.blocks == 0 || r.sm_target)
      std::printf(
          "  %dx%dx%d %s: %s\n", r.s.m, r.s.n, r.s.k,
          r.sm_target ? ("sm target " + std::to_string(ctx.sms - r.blocks)).c_str() : "default",
          r.algo.c_str());
  if (!o.csv.empty()) std::printf("\nCSV: %s\n", o.csv.c_str());

  CUDA_CHECK(cudaFree(ctx.src));
  CUDA_CHECK(cudaFree(ctx.dst));
  CUDA_CHECK(cudaFree(ctx.workspace));
  CUDA_CHECK(cudaFree(ctx.ctrl));
  for (cudaEvent_t e : {ctx.copy_start, ctx.copy_end, ctx.gemm_start, ctx.gemm_end})
    CUDA_CHECK(cudaEventDestroy(e));
  CUDA_CHECK(cudaStreamDestroy(ctx.gemm_stream));
  CUDA_CHECK(cudaStreamDestroy(ctx.copy_stream));
  CUBLAS_CHECK(cublasLtDestroy(ctx.lt));
  if (failed) {
    std::fprintf(stderr, "measure_contention: some measurements are INVALID (see ERROR lines)\n");
    return 3;
  }
  return 0;
}
