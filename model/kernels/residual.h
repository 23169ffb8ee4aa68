// Elementwise vector sum out = a + b of n elements of storage type T (float or
// Bf16; in bf16 the sum is taken in fp32 and rounded once). It is named for what
// it does, not for one caller: the sharding engine accumulates a received
// gradient shard into its reduced gradients with it. (The transformer's
// residual connections are added in the GEMM epilogue instead, by
// matmul_forward_residual; their backward is the identity, so there is no
// backward kernel.)
// Invariant: each element is read before it is written, so out may alias a or b.
#pragma once

#include <cstddef>

#include "base/storage_types.h"

namespace llm::cpu {

template <class T>
void add_vectors(T* out, const T* a, const T* b, size_t n);

}  // namespace llm::cpu

// CUDA twins (residual.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void add_vectors(T* out, const T* a, const T* b, size_t n);

}  // namespace llm::cuda
