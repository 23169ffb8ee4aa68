// The key/value cache and attention over it on the GPU (the CUDA twin of
// kv_cache.cpp). Decoding reads each cached key and value once per query
// head, so the kernel is bound by memory, not arithmetic: one block of 128
// threads per (query, query head, batch row) sweeps the visible keys in
// chunks of 128, one key per thread for the score, with an online softmax
// (running max and sum, rescaled per chunk); the threads then split the head
// dim to add the chunk's probability-weighted values.
// Invariants: deterministic (fixed-order block reductions, no atomics); each
// output element is written by one thread; all math fp32, stored once.
#include <cmath>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/kv_cache.h"

namespace llm::cuda {

namespace {

constexpr int kThreads = 128;  // per block; also the keys of one chunk

struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return a > b ? a : b; }
};

template <class Storage>
__global__ void kv_cache_write_kernel(Storage* cache, const Storage* qkv, int T, int start, int H,
                                      int KV, int D, int capacity) {
  const int t = blockIdx.x, b = blockIdx.y;
  const size_t row = (size_t)(H + 2 * KV) * D, cache_row = (size_t)2 * KV * D;
  const Storage* src = qkv + ((size_t)b * T + t) * row + (size_t)H * D;
  Storage* dst = cache + ((size_t)b * capacity + start + t) * cache_row;
  for (size_t i = threadIdx.x; i < cache_row; i += blockDim.x) dst[i] = src[i];
}

// Shared memory: the query (D floats), the output accumulator (D floats) and
// one chunk's probabilities (kThreads floats).
template <class Storage>
__global__ void attention_cached_kernel(Storage* out, const Storage* qkv, const Storage* cache,
                                        int T, int start, int H, int KV, int D, int capacity,
                                        float scale) {
  LLM_DYNAMIC_SHARED(float, shared);
  float* query = shared;
  float* acc = query + D;
  float* probs = acc + D;
  const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const size_t row = (size_t)(H + 2 * KV) * D, cache_row = (size_t)2 * KV * D;
  const Storage* q = qkv + ((size_t)b * T + t) * row + (size_t)h * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    query[d] = load_f32(&q[d]);
    acc[d] = 0.0f;
  }
  __syncthreads();
  const Storage* keys = cache + (size_t)b * capacity * cache_row + (size_t)(h / (H / KV)) * D;
  const Storage* values = keys + (size_t)KV * D;
  const int visible = start + t + 1;
  float max = -INFINITY, sum = 0.0f;
  for (int base = 0; base < visible; base += kThreads) {
    const int s = base + threadIdx.x;
    float score = -INFINITY;
    if (s < visible) {
      const Storage* k = keys + (size_t)s * cache_row;
      score = 0.0f;
      for (int d = 0; d < D; d++) score += query[d] * load_f32(&k[d]);
      score *= scale;
    }
    const float new_max = fmaxf(max, block_reduce(score, -INFINITY, Max{}));
    const float p = s < visible ? expf(score - new_max) : 0.0f;
    probs[threadIdx.x] = p;
    const float rescale = expf(max - new_max);  // 0 on the first chunk
    sum = sum * rescale + block_sum(p);         // block_sum's barrier publishes probs
    max = new_max;
    const int n = min(kThreads, visible - base);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float a = acc[d] * rescale;
      for (int j = 0; j < n; j++)
        a += probs[j] * load_f32(&values[(size_t)(base + j) * cache_row + d]);
      acc[d] = a;
    }
    __syncthreads();  // probs is rewritten by the next chunk
  }
  Storage* o = out + ((size_t)b * T + t) * ((size_t)H * D) + (size_t)h * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) store_f32(&o[d], acc[d] / sum);
}

}  // namespace

template <class Storage>
void kv_cache_write(Storage* cache, const Storage* qkv, int B, int T, int start, int H, int KV,
                    int D, int capacity) {
  if (B <= 0 || T <= 0) return;
  launch(kv_cache_write_kernel<Storage>, dim3(T, B), kThreads, 0, compute_stream(), cache, qkv, T,
         start, H, KV, D, capacity);
  LLM_CUDA_CHECK_LAUNCH();
}

template <class Storage>
void attention_cached(Storage* out, const Storage* qkv, const Storage* cache, int B, int T,
                      int start, int H, int KV, int D, int capacity) {
  if (B <= 0 || T <= 0 || H <= 0) return;
  const size_t shared = (2 * (size_t)D + kThreads) * sizeof(float);
  launch(attention_cached_kernel<Storage>, dim3(T, H, B), kThreads, shared, compute_stream(), out,
         qkv, cache, T, start, H, KV, D, capacity, 1.0f / std::sqrt((float)D));
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(kv_cache_write);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_cached);

}  // namespace llm::cuda
