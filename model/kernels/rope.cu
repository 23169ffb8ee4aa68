// Rotary position embedding on the GPU, "rotate half" (Hugging Face Llama)
// pairing: element i of a head pairs with element i + D/2. One block per row;
// its threads take the row's (head, pair) slots, four pairs per thread with
// vector loads when the layout is aligned for them. fp32 rotation, rounded
// once on store for bf16; the rotation is rope_device.cuh's, which QK-norm's
// kernel shares.
// Invariants: every element is read and written by one thread only, so the
// in-place rotation needs no barrier; backward is the inverse rotation
// (same cos, negated sin); the table is the CPU twin's, bit for bit (it is
// computed by it, in double, on the host).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/rope.h"
#include "model/kernels/rope_device.cuh"

namespace llm::cuda {

namespace {

constexpr unsigned kMaxThreads = 256;  // per row
constexpr int kPairPack = 4;           // pairs per thread on the vectorized path

// ---- kernels --------------------------------------------------------------------

// Row n (position positions[n], or n % T without positions): rotates pairs (lo[i], hi[i] = lo[i +
// D/2]) of its first n_heads heads by the angle with cosine cos[t][i] and sine sign * sin[t][i],
// kWidth consecutive pairs per step (kWidth divides D/2 and the layout is aligned for kWidth-wide
// accesses when kWidth > 1).
template <class Storage, int kWidth>
__global__ void rope_rotate_kernel(Storage* x, const float* cos, const float* sin, float sign,
                                   const int32_t* positions, int T, int n_heads, int D,
                                   int row_stride) {
  using Elems = Pack<Storage, kWidth>;
  using Angles = Pack<float, kWidth>;
  const int n = blockIdx.x;
  const int half = D / 2;
  const int packs_per_head = half / kWidth;
  const int position = positions ? positions[n] : n % T;
  const float* c = cos + (size_t)position * half;
  const float* s = sin + (size_t)position * half;
  Storage* row = x + (size_t)n * row_stride;
  for (int q = threadIdx.x; q < n_heads * packs_per_head; q += blockDim.x) {
    const int h = q / packs_per_head;
    const int i = (q - h * packs_per_head) * kWidth;
    Storage* lo = row + (size_t)h * D + i;
    Storage* hi = lo + half;
    const Elems a = *reinterpret_cast<const Elems*>(lo);
    const Elems b = *reinterpret_cast<const Elems*>(hi);
    const Angles ci = *reinterpret_cast<const Angles*>(c + i);
    const Angles si = *reinterpret_cast<const Angles*>(s + i);
    Elems new_lo, new_hi;
#pragma unroll
    for (int k = 0; k < kWidth; k++) {
      const float av = load_f32(&a.v[k]), bv = load_f32(&b.v[k]), sk = sign * si.v[k];
      store_f32(&new_lo.v[k], rope_rotated(av, bv, /*second=*/false, ci.v[k], sk));
      store_f32(&new_hi.v[k], rope_rotated(bv, av, /*second=*/true, ci.v[k], sk));
    }
    *reinterpret_cast<Elems*>(lo) = new_lo;
    *reinterpret_cast<Elems*>(hi) = new_hi;
  }
}

// ---- launchers ------------------------------------------------------------------

template <class Storage>
void rope_rotate(Storage* x, const float* cos, const float* sin, float sign,
                 const int32_t* positions, int N, int T, int n_heads, int D, int row_stride) {
  const int half = D / 2;
  if (N <= 0 || n_heads <= 0 || half <= 0) return;
  const bool vectorized = half % kPairPack == 0 && row_stride % kPairPack == 0 &&
                          is_aligned(x, sizeof(Pack<Storage, kPairPack>)) &&
                          is_aligned(cos, sizeof(Pack<float, kPairPack>)) &&
                          is_aligned(sin, sizeof(Pack<float, kPairPack>));
  const int pack = vectorized ? kPairPack : 1;
  const unsigned slots = (unsigned)(n_heads * (half / pack));
  const unsigned threads = std::min(kMaxThreads, (slots + 31) / 32 * 32);
  if (vectorized) {
    launch(rope_rotate_kernel<Storage, kPairPack>, N, threads, 0, compute_stream(), x, cos, sin,
           sign, positions, T, n_heads, D, row_stride);
  } else {
    launch(rope_rotate_kernel<Storage, 1>, N, threads, 0, compute_stream(), x, cos, sin, sign,
           positions, T, n_heads, D, row_stride);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace

// The table is built once per run: computing it on the host with the CPU twin
// gives the same bits on both backends. The host vectors are temporary, so
// the copy is waited for before they go.
void rope_table(float* cos, float* sin, int T, int D, float theta, const RopeScaling& scaling) {
  const size_t count = (size_t)T * (D / 2);
  if (count == 0) return;
  std::vector<float> host_cos(count), host_sin(count);
  cpu::rope_table(host_cos.data(), host_sin.data(), T, D, theta, scaling);
  cudaStream_t stream = compute_stream();
  LLM_CUDA_CHECK(
      cudaMemcpyAsync(cos, host_cos.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream));
  LLM_CUDA_CHECK(
      cudaMemcpyAsync(sin, host_sin.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream));
  wait_for_stream(stream);
}

template <class Storage>
void rope_forward(Storage* x, const float* cos, const float* sin, const int32_t* positions, int N,
                  int T, int n_heads, int D, int row_stride) {
  rope_rotate(x, cos, sin, 1.0f, positions, N, T, n_heads, D, row_stride);
}

template <class Storage>
void rope_backward(Storage* dx, const float* cos, const float* sin, const int32_t* positions, int N,
                   int T, int n_heads, int D, int row_stride) {
  rope_rotate(dx, cos, sin, -1.0f, positions, N, T, n_heads, D, row_stride);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(rope_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rope_backward);

}  // namespace llm::cuda
