// cub's DeviceRadixSort as the emulation build sees it: SortPairs on int32
// keys and int32 values, the one sort the project runs (model/kernels/
// embedding.cu), done on the CPU by cuda_emulation/cub_radix_sort.cpp.
// Invariant: as in cub, a call with d_temp_storage == nullptr only reports
// the temporary storage a sort of num_items needs; a call with storage
// validates at once (cudaErrorInvalidValue, nothing queued) and queues a
// stable sort on the stream that reads the inputs and writes only the outputs
// and the temporary storage.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cuda_emulation {

cudaError_t radix_sort_pairs(void* temp_storage, size_t& temp_storage_bytes, const int32_t* keys_in,
                             int32_t* keys_out, const int32_t* values_in, int32_t* values_out,
                             int num_items, int begin_bit, int end_bit, cudaStream_t stream);

}  // namespace cuda_emulation

namespace cub {

struct DeviceRadixSort {
  // Sorts the pairs by the key bits [begin_bit, end_bit), stably, signed keys
  // in signed order (cub flips the sign bit, so negatives come first).
  template <class KeyT, class ValueT>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes,
                               const KeyT* d_keys_in, KeyT* d_keys_out, const ValueT* d_values_in,
                               ValueT* d_values_out, int num_items, int begin_bit = 0,
                               int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_same_v<KeyT, int32_t> && std::is_same_v<ValueT, int32_t>,
                  "the emulated SortPairs sorts int32 keys with int32 values only");
    return cuda_emulation::radix_sort_pairs(d_temp_storage, temp_storage_bytes, d_keys_in,
                                            d_keys_out, d_values_in, d_values_out, num_items,
                                            begin_bit, end_bit, stream);
  }
};

}  // namespace cub
