// CPU twin of fill_zero. All-zero bits are +0 in both fp32 and bf16.
#include "model/kernels/fill.h"

#include <cstring>

namespace llm::cpu {

template <class T>
void fill_zero(T* x, size_t n) {
  std::memset(x, 0, n * sizeof(T));
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(fill_zero);

}  // namespace llm::cpu
