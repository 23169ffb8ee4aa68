// Token embedding lookup and its gradient on the GPU, over the vocabulary
// slice [vocab_begin, vocab_begin + vocab_rows) that wte holds.
// Forward: one block per output row copies its token's row of wte, 16 bytes per
// access when rows and buffers allow it (zeros for a token outside the slice).
// Backward, deterministic without float atomics: the positions are sorted by
// token with a stable radix sort (CUB), so each token's positions form one run
// in increasing position order; then, for each run and each column, one thread
// adds the run's dout rows onto dwte in that order (runs of tokens outside
// the slice are skipped). That is exactly the CPU twin's order (dwte[v][c] +=
// dout[n][c] for n ascending), so both give the same bits.
// Invariant: no float is ever added by two threads; the only scratch (sort
// buffers) is allocated on first use and grown only when a larger N comes, so
// the step loop does not allocate (see SortScratch).
#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/embedding.h"

namespace llm::cuda {

namespace {

constexpr unsigned kCopyThreads = 256;    // most threads per row copy
constexpr unsigned kRunThreads = 128;     // threads per (run, column chunk) block
constexpr unsigned kMaxRunBlocks = 2048;  // blocks scanning sorted positions; they loop beyond
constexpr int kColumnPack = 4;            // columns per thread in the backward pass
constexpr int kRunBatch = 8;              // rows of a run loaded together in the backward pass

// One thread's kColumnPack columns, moved by one access.
template <class T>
using ColumnPack = Pack<T, kColumnPack>;

// ---- kernels --------------------------------------------------------------------

// The row of the slice that holds `token`, or -1 when the slice does not.
__device__ __forceinline__ int slice_row(int32_t token, int vocab_begin, int vocab_rows) {
  const long long row = (long long)token - vocab_begin;
  return row >= 0 && row < vocab_rows ? (int)row : -1;
}

// out row n = wte row tokens[n] - vocab_begin, or zeros for a token outside
// the slice, copied as `Word`s (uint4 or the element type; Word{} is all-zero
// bits, +0 in fp32 and bf16).
template <class Word>
__global__ void gather_rows_kernel(Word* out, const int32_t* tokens, const Word* wte, int row_words,
                                   int vocab_begin, int vocab_rows) {
  const int n = blockIdx.x;
  const int row = slice_row(tokens[n], vocab_begin, vocab_rows);
  Word* dst = out + (size_t)n * row_words;
  if (row < 0) {
    for (int w = threadIdx.x; w < row_words; w += blockDim.x) dst[w] = Word{};
    return;
  }
  const Word* src = wte + (size_t)row * row_words;
  for (int w = threadIdx.x; w < row_words; w += blockDim.x) dst[w] = src[w];
}

__global__ void iota_kernel(int32_t* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i;
}

// Blocks stride over the sorted positions; a block whose index starts a run
// (the first position of its token) of a token inside the slice adds the
// run's dout rows, in sorted (= position) order, onto the token's dwte row
// (row token - vocab_begin), for the kColumnPack columns
// of each thread of its column chunk (blockIdx.y). Each dwte element is
// therefore read, summed in one thread's registers and written once. The run
// is read kRunBatch rows at a time, all loads of a batch issued before its
// adds, so a long run (a frequent token) is not one load latency per row.
template <class T, bool kVectorized>
__global__ void accumulate_runs_kernel(float* dwte, const T* dout, const int32_t* sorted_tokens,
                                       const int32_t* sorted_positions, int N, int C,
                                       int vocab_begin, int vocab_rows) {
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * kColumnPack;
  if (c0 >= C) return;
  const int width = min(kColumnPack, C - c0);
  for (int i = blockIdx.x; i < N; i += gridDim.x) {
    const int32_t token = sorted_tokens[i];
    if (i > 0 && sorted_tokens[i - 1] == token) continue;  // inside a run another block owns
    const int row = slice_row(token, vocab_begin, vocab_rows);
    if (row < 0) continue;  // a token of another slice: no gradient here
    float* dst = dwte + (size_t)row * C + c0;
    float acc[kColumnPack];
    if constexpr (kVectorized) {
      const ColumnPack<float> old = *reinterpret_cast<const ColumnPack<float>*>(dst);
#pragma unroll
      for (int k = 0; k < kColumnPack; k++) acc[k] = old.v[k];
    } else {
#pragma unroll
      for (int k = 0; k < kColumnPack; k++) acc[k] = k < width ? dst[k] : 0.0f;
    }
    for (int j = i;; j += kRunBatch) {
      // The run's positions among j..j+kRunBatch-1 (sorted, so they come
      // first); -1 marks the end of the run.
      int32_t position[kRunBatch];
#pragma unroll
      for (int b = 0; b < kRunBatch; b++) {
        const bool in_run = j + b < N && sorted_tokens[j + b] == token;
        position[b] = in_run ? sorted_positions[j + b] : -1;
      }
      float row[kRunBatch][kColumnPack];
#pragma unroll
      for (int b = 0; b < kRunBatch; b++) {
        const T* src = dout + (size_t)max(position[b], 0) * C + c0;
        if (position[b] < 0) {
#pragma unroll
          for (int k = 0; k < kColumnPack; k++) row[b][k] = 0.0f;
        } else if constexpr (kVectorized) {
          const ColumnPack<T> p = *reinterpret_cast<const ColumnPack<T>*>(src);
#pragma unroll
          for (int k = 0; k < kColumnPack; k++) row[b][k] = load_f32(&p.v[k]);
        } else {
#pragma unroll
          for (int k = 0; k < kColumnPack; k++) row[b][k] = k < width ? load_f32(src + k) : 0.0f;
        }
      }
      // In position order; rows past the run's end are skipped, not added as
      // zeros (x + 0 would turn a -0 sum into +0, unlike the CPU).
#pragma unroll
      for (int b = 0; b < kRunBatch; b++) {
        if (position[b] < 0) continue;
#pragma unroll
        for (int k = 0; k < kColumnPack; k++) acc[k] += row[b][k];
      }
      if (position[kRunBatch - 1] < 0) break;
    }
    if constexpr (kVectorized) {
      ColumnPack<float> sum;
#pragma unroll
      for (int k = 0; k < kColumnPack; k++) sum.v[k] = acc[k];
      *reinterpret_cast<ColumnPack<float>*>(dst) = sum;
    } else {
#pragma unroll
      for (int k = 0; k < kColumnPack; k++)
        if (k < width) dst[k] = acc[k];
    }
  }
}

// ---- scratch --------------------------------------------------------------------

// The sort's buffers (GrowingScratch each): positions 0..N-1 (the values
// sorted along with the tokens, written when the buffer grows: the sort does
// not modify its input), the sorted tokens and positions, and CUB's
// temporary storage.
struct SortScratch {
  GrowingScratch positions, sorted_tokens, sorted_positions, temp;
};
struct SortedPositions {
  const int32_t* sorted_tokens;
  const int32_t* sorted_positions;
};

// tokens[0..N) sorted stably by token, with their positions.
SortedPositions sort_positions_by_token(const int32_t* tokens, int N) {
  static SortScratch scratch;
  cudaStream_t stream = compute_stream();
  const size_t bytes = sizeof(int32_t) * (size_t)N;
  const bool grows = bytes > scratch.positions.capacity();
  auto* positions = static_cast<int32_t*>(scratch.positions.reserve(bytes));
  if (grows) {
    launch(iota_kernel, std::min(blocks_for(N, 256), 1024u), 256, 0, stream, positions, N);
    LLM_CUDA_CHECK_LAUNCH();
  }
  auto* sorted_tokens = static_cast<int32_t*>(scratch.sorted_tokens.reserve(bytes));
  auto* sorted_positions = static_cast<int32_t*>(scratch.sorted_positions.reserve(bytes));
  size_t temp_bytes = 0;
  LLM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, sorted_tokens,
                                                 positions, sorted_positions, N, 0,
                                                 sizeof(int32_t) * 8, stream));
  void* temp = scratch.temp.reserve(temp_bytes);
  LLM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, positions,
                                                 sorted_positions, N, 0, sizeof(int32_t) * 8,
                                                 stream));
  return {sorted_tokens, sorted_positions};
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_begin,
                       int vocab_rows) {
  if (N <= 0 || C <= 0) return;
  const size_t row_bytes = sizeof(T) * (size_t)C;
  auto launch_copy = [&](auto word) {
    using Word = decltype(word);
    const int row_words = (int)(row_bytes / sizeof(Word));
    const unsigned threads = std::min(kCopyThreads, (unsigned)(row_words + 31) / 32 * 32);
    launch(gather_rows_kernel<Word>, N, threads, 0, compute_stream(), reinterpret_cast<Word*>(out),
           tokens, reinterpret_cast<const Word*>(wte), row_words, vocab_begin, vocab_rows);
  };
  // Whole rows of 16-byte words when every row starts 16-byte aligned.
  if (row_bytes % 16 == 0 && is_aligned(out, 16) && is_aligned(wte, 16)) {
    launch_copy(uint4{});
  } else {
    launch_copy(T{});
  }
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C,
                        int vocab_begin, int vocab_rows) {
  if (N <= 0 || C <= 0) return;
  const SortedPositions sorted = sort_positions_by_token(tokens, N);
  const unsigned columns_per_block = kRunThreads * kColumnPack;
  const dim3 grid(std::min((unsigned)N, kMaxRunBlocks),
                  (C + columns_per_block - 1) / columns_per_block);
  const bool vectorized = C % kColumnPack == 0 && is_aligned(dwte, sizeof(ColumnPack<float>)) &&
                          is_aligned(dout, sizeof(ColumnPack<T>));
  if (vectorized) {
    launch(accumulate_runs_kernel<T, true>, grid, kRunThreads, 0, compute_stream(), dwte, dout,
           sorted.sorted_tokens, sorted.sorted_positions, N, C, vocab_begin, vocab_rows);
  } else {
    launch(accumulate_runs_kernel<T, false>, grid, kRunThreads, 0, compute_stream(), dwte, dout,
           sorted.sorted_tokens, sorted.sorted_positions, N, C, vocab_begin, vocab_rows);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(embedding_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(embedding_backward);

}  // namespace llm::cuda
