// Buffer fill: sets n elements of storage type T (float or Bf16) to +0, the
// start of an accumulation.
#pragma once

#include <cstddef>

#include "base/storage_types.h"

namespace llm::cpu {

template <class T>
void fill_zero(T* x, size_t n);

}  // namespace llm::cpu

// CUDA twins (fill.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void fill_zero(T* x, size_t n);

}  // namespace llm::cuda
