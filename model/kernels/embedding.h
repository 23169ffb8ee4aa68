// Token embedding lookup and its gradient, for storage type T (float or Bf16),
// over a slice of the vocabulary: wte holds rows [vocab_begin, vocab_begin +
// vocab_rows) of the full table (the whole table: vocab_begin 0, vocab_rows V),
// as one rank of a vocabulary-parallel split does. Tokens outside the slice
// give zero rows (forward) and no gradient (backward), so summing the outputs
// of every rank's slice gives the full lookup.
// Invariant: backward is deterministic (each row of dwte sums its tokens in
// token order, whatever the thread count), so gradients are reproducible bits;
// dwte is fp32 in both precisions.
#pragma once

#include <cstdint>

#include "base/storage_types.h"

namespace llm::cpu {

// out (N, C) row n = wte (vocab_rows, C) row tokens[n] - vocab_begin when
// tokens[n] lies in [vocab_begin, vocab_begin + vocab_rows), else zeros.
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_begin,
                       int vocab_rows);

// dwte (vocab_rows, C) row v += sum over positions n with tokens[n] ==
// vocab_begin + v of dout[n] (N, C); positions whose token lies outside the
// slice are skipped.
template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C,
                        int vocab_begin, int vocab_rows);

}  // namespace llm::cpu

// CUDA twins (embedding.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_begin,
                       int vocab_rows);
template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C,
                        int vocab_begin, int vocab_rows);

}  // namespace llm::cuda
