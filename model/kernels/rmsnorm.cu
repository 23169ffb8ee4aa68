// RMSNorm on the GPU: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps),
// fp32 math (the sum of squares in double, as the CPU twin) rounded once on
// store, for float or Bf16 storage; the pieces QK-norm shares are in
// rmsnorm_device.cuh, and the chunk-summing stage (sum_gain_partials) is here.
// Forward: one block per row; with row_amax, the block also reduces the
// magnitude bits of what it stored (fp8_amax_device.cuh) into the row's amax,
// and with codes each thread writes the e4m3 codes of what it stored.
// Backward: one block per chunk of consecutive
// rows; for each row it reduces sum(w * dy * x) over the block, adds the row's
// dinp (and, with row_amax, reduces the row's amax of dinp as stored), and
// keeps per-column dweight partial sums of its rows in shared memory
// (each column owned by one thread, rows in order); a second kernel sums the
// chunks' partials per column in chunk order and adds them to dweight.
// Why not one thread per column over all rows: that is only C-way parallel
// with a serial loop of N steps (milliseconds at training shapes); the chunked
// partials keep the whole GPU busy and are still a fixed order.
// Invariants: every reduction has a fixed order that depends only on (N, C) -
// the threads' column sets do not depend on pointer alignment, the row chunks
// on N only - so the same inputs give the same bits run after run, no float
// atomics; backward accumulates (+=) into dinp and dweight. The partials
// scratch is allocated on first use and regrown only when a larger (chunks x C)
// comes, so the step loop does not allocate (see partials_scratch).
#include <algorithm>
#include <cstdint>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/fp8_amax_device.cuh"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/rmsnorm_device.cuh"

namespace llm::cuda {

namespace {

constexpr unsigned kMaxThreads = 256;  // per row (forward) or per row chunk (backward)
// At most this many row chunks in backward: about eight blocks of 256 threads
// per H100 SM, and partials of at most 4 KiB per column.
constexpr int kMaxRowChunks = 1024;
constexpr unsigned kSumThreads = 256;  // threads of the partials-summing kernel
constexpr size_t kDefaultSharedBytes = 48 * 1024;

// Threads of a row's block: enough for one pack each, whole warps, at most kMaxThreads.
template <class T>
unsigned threads_for_row(int C) {
  const unsigned packs = (unsigned)((C + kPack<T> - 1) / kPack<T>);
  return std::min(kMaxThreads, (packs + 31) / 32 * 32);
}

// ---- kernels --------------------------------------------------------------------

// One block per row n: rstd from the double sum of squares, then y = x * s * w
// (and, when row_amax is not null, row_amax[n] = the largest |y| stored;
// padding past C in an unaligned row is 0 and changes no maximum; when codes
// is not null, codes (N, C) = the e4m3 codes of y as stored, with `scale`).
template <class T, bool kAligned>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, int C,
                                       float eps, float* row_amax, uint8_t* codes,
                                       const Fp8Scale* scale) {
  const int n = blockIdx.x;
  const T* x = inp + (size_t)n * C;
  T* y = out + (size_t)n * C;
  const int step = blockDim.x * kPack<T>;

  double sum_sq = 0.0;
  for (int c0 = threadIdx.x * kPack<T>; c0 < C; c0 += step) {
    float xv[kPack<T>];
    load_pack<T, kAligned>(xv, x, c0, C);
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) sum_sq += (double)xv[k] * xv[k];
  }
  sum_sq = block_sum(sum_sq);
  const float s = rmsnorm_rstd(sum_sq, C, eps);

  uint32_t largest = 0;
  for (int c0 = threadIdx.x * kPack<T>; c0 < C; c0 += step) {
    float xv[kPack<T>], wv[kPack<T>], yv[kPack<T>];
    load_pack<T, kAligned>(xv, x, c0, C);
    load_pack<T, kAligned>(wv, weight, c0, C);
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) yv[k] = xv[k] * s * wv[k];
    store_pack<T, kAligned>(y, c0, C, yv);
    if (codes) {
      uint8_t* row_codes = codes + (size_t)n * C;
#pragma unroll
      for (int k = 0; k < kPack<T>; k++)
        if (c0 + k < C)
          row_codes[c0 + k] = fp8_code(stored_value<T>(yv[k]), scale->scale, Fp8Format::e4m3);
    }
    if (row_amax) {
#pragma unroll
      for (int k = 0; k < kPack<T>; k++)
        largest = MaxBits{}(largest, stored_magnitude_bits<T>(yv[k]));
    }
  }
  if (threadIdx.x == 0) rstd[n] = s;
  if (row_amax) write_block_amax(row_amax + n, largest);  // the same for every thread
}

// One block per chunk of rows_per_chunk consecutive rows. For each row:
//   dinp += s * (w * dy - x * coeff), coeff = sum_c(w * dy * x) * s^2 / C,
// and the chunk's dweight partial, partials[chunk][c] = sum over its rows (in
// order) of dy * x * s; when row_amax is not null, row_amax[n] = the largest
// |dinp| stored in row n (columns past C left out). Dynamic shared memory
// holds the partial row (C floats); each thread reads and writes only its own
// columns of it, so it needs no barrier.
template <class T, bool kAligned>
__global__ void rmsnorm_backward_kernel(T* dinp, float* partials, const T* dout, const T* inp,
                                        const T* weight, const float* rstd, int N, int C,
                                        int rows_per_chunk, float* row_amax) {
  LLM_DYNAMIC_SHARED(float, partial);
  const int row_begin = blockIdx.x * rows_per_chunk;
  const int row_end = min(N, row_begin + rows_per_chunk);
  const int step = blockDim.x * kPack<T>;
  for (int c0 = threadIdx.x * kPack<T>; c0 < C; c0 += step) {
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) partial[c0 + k] = 0.0f;  // C is padded to whole packs
  }

  for (int n = row_begin; n < row_end; n++) {
    const T* x = inp + (size_t)n * C;
    const T* dy = dout + (size_t)n * C;
    T* dx = dinp + (size_t)n * C;
    const float s = rstd[n];

    float dot = 0.0f;  // sum_c w * dy * x
    for (int c0 = threadIdx.x * kPack<T>; c0 < C; c0 += step) {
      float xv[kPack<T>], dyv[kPack<T>], wv[kPack<T>];
      load_pack<T, kAligned>(xv, x, c0, C);
      load_pack<T, kAligned>(dyv, dy, c0, C);
      load_pack<T, kAligned>(wv, weight, c0, C);
#pragma unroll
      for (int k = 0; k < kPack<T>; k++) dot += wv[k] * dyv[k] * xv[k];
    }
    dot = block_sum(dot);
    const float coeff = dot * s * s / C;

    uint32_t largest = 0;
    for (int c0 = threadIdx.x * kPack<T>; c0 < C; c0 += step) {
      float xv[kPack<T>], dyv[kPack<T>], wv[kPack<T>], dxv[kPack<T>];
      load_pack<T, kAligned>(xv, x, c0, C);
      load_pack<T, kAligned>(dyv, dy, c0, C);
      load_pack<T, kAligned>(wv, weight, c0, C);
      load_pack<T, kAligned>(dxv, dx, c0, C);
#pragma unroll
      for (int k = 0; k < kPack<T>; k++) {
        dxv[k] += s * (wv[k] * dyv[k] - xv[k] * coeff);
        partial[c0 + k] += dyv[k] * xv[k] * s;
      }
      store_pack<T, kAligned>(dx, c0, C, dxv);
      if (row_amax) {
#pragma unroll
        for (int k = 0; k < kPack<T>; k++)
          if (c0 + k < C) largest = MaxBits{}(largest, stored_magnitude_bits<T>(dxv[k]));
      }
    }
    if (row_amax) write_block_amax(row_amax + n, largest);  // the same for every thread
  }

  float* out = partials + (size_t)blockIdx.x * C;
  for (int c0 = threadIdx.x * kPack<T>; c0 < C; c0 += step) {
#pragma unroll
    for (int k = 0; k < kPack<T>; k++)
      if (c0 + k < C) out[c0 + k] = partial[c0 + k];
  }
}

// dweight[c] += sum over chunks, in chunk order, of partials[chunk][c].
__global__ void sum_gain_partials_kernel(float* dweight, const float* partials, int n_chunks,
                                         int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int chunk = 0; chunk < n_chunks; chunk++) acc += partials[(size_t)chunk * C + c];
  dweight[c] += acc;
}

// ---- scratch --------------------------------------------------------------------

// The dweight partials of backward, (chunks, C) floats (at most
// kMaxRowChunks * C * 4 bytes: 16 MiB for C = 4096).
float* partials_scratch(size_t floats) {
  static GrowingScratch scratch;
  return static_cast<float*>(scratch.reserve(floats * sizeof(float)));
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

void sum_gain_partials(float* dweight, const float* partials, int n_chunks, int C) {
  launch(sum_gain_partials_kernel, blocks_for(C, kSumThreads), kSumThreads, 0, compute_stream(),
         dweight, partials, n_chunks, C);
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void rmsnorm_forward_fp8(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                         float eps, float* row_amax, uint8_t* codes, const Fp8Scale* scale) {
  if (N <= 0 || C <= 0) return;
  const unsigned threads = threads_for_row<T>(C);
  const bool aligned =
      C % kPack<T> == 0 && is_aligned(out, 16) && is_aligned(inp, 16) && is_aligned(weight, 16);
  if (aligned) {
    launch(rmsnorm_forward_kernel<T, true>, N, threads, 0, compute_stream(), out, rstd, inp, weight,
           C, eps, row_amax, codes, scale);
  } else {
    launch(rmsnorm_forward_kernel<T, false>, N, threads, 0, compute_stream(), out, rstd, inp,
           weight, C, eps, row_amax, codes, scale);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps,
                     float* row_amax) {
  rmsnorm_forward_fp8(out, rstd, inp, weight, N, C, eps, row_amax, nullptr,
                      static_cast<const Fp8Scale*>(nullptr));
}

template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                      const float* rstd, int N, int C, float* row_amax) {
  if (N <= 0 || C <= 0) return;
  // The chunking depends on N only, so the dweight sums have one order per shape.
  const int rows_per_chunk = (N + kMaxRowChunks - 1) / kMaxRowChunks;
  const int n_chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
  float* partials = partials_scratch((size_t)n_chunks * C);

  const unsigned threads = threads_for_row<T>(C);
  const int padded_C = (C + kPack<T> - 1) / kPack<T> * kPack<T>;
  const size_t shared_bytes = sizeof(float) * (size_t)padded_C;
  const bool aligned = C % kPack<T> == 0 && is_aligned(dinp, 16) && is_aligned(dout, 16) &&
                       is_aligned(inp, 16) && is_aligned(weight, 16);
  auto launch_backward = [&](auto kernel) {
    // Rows wider than 12K columns need more than the default 48 KiB of shared memory.
    if (shared_bytes > kDefaultSharedBytes) {
      LLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)shared_bytes));
    }
    launch(kernel, n_chunks, threads, shared_bytes, compute_stream(), dinp, partials, dout, inp,
           weight, rstd, N, C, rows_per_chunk, row_amax);
    LLM_CUDA_CHECK_LAUNCH();
  };
  if (aligned) {
    launch_backward(rmsnorm_backward_kernel<T, true>);
  } else {
    launch_backward(rmsnorm_backward_kernel<T, false>);
  }
  sum_gain_partials(dweight, partials, n_chunks, C);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_forward_fp8);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_backward);

}  // namespace llm::cuda
