// SwiGLU gating on the GPU: out = silu(gate) * up over rows of [gate | up],
// fp32 math rounded once on store, for float or Bf16 storage. One block per
// row; each thread takes 16 bytes of storage at a time (4 fp32 or 8 bf16
// elements) when F and the buffers are aligned for it, one element otherwise;
// with row_amax (either pass), the block also reduces the magnitude bits of
// what it stored (fp8_amax_device.cuh) into the row's amax, and with codes
// (forward) each thread writes the e4m3 codes of what it stored.
// Invariant: purely elementwise per row, the same expressions as the CPU twin
// (which uses its own vectorizable exp, within 2 ulp of expf); backward
// overwrites dh13.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/fp8_amax_device.cuh"
#include "model/kernels/swiglu.h"

namespace llm::cuda {

namespace {

constexpr unsigned kMaxThreads = 256;  // per row

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// ---- kernels --------------------------------------------------------------------

// Row n: out[i] = silu(gate[i]) * up[i], kWidth elements per step (kWidth
// divides F and the rows are aligned for kWidth-wide accesses); row_amax[n]
// = the largest |out[i]| stored, when row_amax is not null; codes (N, F) =
// the e4m3 codes of out as stored, with `scale`, when codes is not null.
template <class T, int kWidth>
__global__ void swiglu_forward_kernel(T* out, const T* h13, int F, float* row_amax, uint8_t* codes,
                                      const Fp8Scale* scale) {
  using Elems = Pack<T, kWidth>;
  const int n = blockIdx.x;
  const T* gate = h13 + (size_t)n * 2 * F;
  const T* up = gate + F;
  T* o = out + (size_t)n * F;
  uint32_t largest = 0;
  for (int i = threadIdx.x * kWidth; i < F; i += blockDim.x * kWidth) {
    const Elems g = *reinterpret_cast<const Elems*>(gate + i);
    const Elems u = *reinterpret_cast<const Elems*>(up + i);
    Elems result;
#pragma unroll
    for (int k = 0; k < kWidth; k++) {
      const float gv = load_f32(&g.v[k]);
      store_f32(&result.v[k], gv * sigmoid(gv) * load_f32(&u.v[k]));
      largest = MaxBits{}(largest, magnitude_bits(result.v[k]));
      if (codes)
        codes[(size_t)n * F + i + k] =
            fp8_code(load_f32(&result.v[k]), scale->scale, Fp8Format::e4m3);
    }
    *reinterpret_cast<Elems*>(o + i) = result;
  }
  if (row_amax) write_block_amax(row_amax + n, largest);  // the same for every thread
}

// Row n: d gate = dout * up * silu'(gate), d up = dout * silu(gate), with
// silu'(g) = sigmoid(g) * (1 + g * (1 - sigmoid(g))); row_amax[n] = the
// largest |d gate|, |d up| stored, when row_amax is not null.
template <class T, int kWidth>
__global__ void swiglu_backward_kernel(T* dh13, const T* dout, const T* h13, int F,
                                       float* row_amax) {
  using Elems = Pack<T, kWidth>;
  const int n = blockIdx.x;
  const T* gate = h13 + (size_t)n * 2 * F;
  const T* up = gate + F;
  const T* d = dout + (size_t)n * F;
  T* dgate = dh13 + (size_t)n * 2 * F;
  T* dup = dgate + F;
  uint32_t largest = 0;
  for (int i = threadIdx.x * kWidth; i < F; i += blockDim.x * kWidth) {
    const Elems g = *reinterpret_cast<const Elems*>(gate + i);
    const Elems u = *reinterpret_cast<const Elems*>(up + i);
    const Elems dy = *reinterpret_cast<const Elems*>(d + i);
    Elems dg, du;
#pragma unroll
    for (int k = 0; k < kWidth; k++) {
      const float gv = load_f32(&g.v[k]), uv = load_f32(&u.v[k]), di = load_f32(&dy.v[k]);
      const float sig = sigmoid(gv);
      const float silu = gv * sig;
      store_f32(&dg.v[k], di * uv * sig * (1.0f + gv * (1.0f - sig)));
      store_f32(&du.v[k], di * silu);
      largest = MaxBits{}(largest, MaxBits{}(magnitude_bits(dg.v[k]), magnitude_bits(du.v[k])));
    }
    *reinterpret_cast<Elems*>(dgate + i) = dg;
    *reinterpret_cast<Elems*>(dup + i) = du;
  }
  if (row_amax) write_block_amax(row_amax + n, largest);  // the same for every thread
}

// ---- launchers ------------------------------------------------------------------

// Runs launch_with(width, threads) with width kPack<T> when F and every buffer allow
// whole 16-byte accesses, else 1.
template <class T, class Launch>
void launch_rows(int F, std::initializer_list<const void*> buffers, Launch launch_with) {
  bool vectorized = F % kPack<T> == 0;
  for (const void* p : buffers) vectorized = vectorized && is_aligned(p, 16);
  const int width = vectorized ? kPack<T> : 1;
  const unsigned slots = (unsigned)(F / width);
  const unsigned threads = std::min(kMaxThreads, (slots + 31) / 32 * 32);
  if (vectorized) {
    launch_with(std::integral_constant<int, kPack<T>>{}, threads);
  } else {
    launch_with(std::integral_constant<int, 1>{}, threads);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void swiglu_forward_fp8(T* out, const T* h13, int N, int F, float* row_amax, uint8_t* codes,
                        const Fp8Scale* scale) {
  if (N <= 0 || F <= 0) return;
  launch_rows<T>(F, {out, h13}, [&](auto width, unsigned threads) {
    launch(swiglu_forward_kernel<T, decltype(width)::value>, N, threads, 0, compute_stream(), out,
           h13, F, row_amax, codes, scale);
  });
}

template <class T>
void swiglu_forward(T* out, const T* h13, int N, int F, float* row_amax) {
  swiglu_forward_fp8(out, h13, N, F, row_amax, nullptr, static_cast<const Fp8Scale*>(nullptr));
}

template <class T>
void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F, float* row_amax) {
  if (N <= 0 || F <= 0) return;
  launch_rows<T>(F, {dh13, dout, h13}, [&](auto width, unsigned threads) {
    launch(swiglu_backward_kernel<T, decltype(width)::value>, N, threads, 0, compute_stream(), dh13,
           dout, h13, F, row_amax);
  });
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(swiglu_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(swiglu_forward_fp8);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(swiglu_backward);

}  // namespace llm::cuda
