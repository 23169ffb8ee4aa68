// The storage types of activation tensors: float (fp32) and Bf16. Each op
// that exists for both is one function template over the storage type, defined
// in its .cpp / .cu file and explicitly instantiated there for exactly these
// two types with LLM_INSTANTIATE_FOR_STORAGE_TYPES(op).
// Invariant: the instantiation repeats no signature (decltype of the template),
// so the header's declaration is the only one to keep in sync.
#pragma once

#include "base/bf16.h"

#define LLM_INSTANTIATE_FOR_STORAGE_TYPES(op) \
  template decltype(op<float>) op<float>;     \
  template decltype(op<::llm::Bf16>) op<::llm::Bf16>
