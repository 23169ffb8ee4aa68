// cub::DeviceRadixSort::SortPairs on the CPU (include/cub/device/
// device_radix_sort.cuh): a least-significant-digit radix sort, 8 bits a
// pass, each pass a stable counting sort, ping-ponging between the outputs
// and two buffers carved out of the caller's temporary storage (as cub's
// double buffers are), arranged so that the last pass writes the outputs.
// Invariant: the inputs are never written, and the order is cub's: by the key
// bits [begin_bit, end_bit) of the key with its sign bit flipped, ties in
// input order.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <array>
#include <cstring>

#include "cuda_emulation/streams.h"

namespace cuda_emulation {

namespace {

constexpr int kKeyBits = 32;
constexpr int kDigitBits = 8;
// Each buffer starts on this boundary within the storage, as cub aligns its
// temporaries; the reported size has room to align the storage's start too.
constexpr size_t kBufferAlignment = 256;

size_t aligned_bytes(int num_items) {
  const size_t bytes = sizeof(int32_t) * (size_t)num_items;
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

// Room for the alternate keys and values, plus the slack to align them.
size_t required_temp_bytes(int num_items) {
  return kBufferAlignment + 2 * aligned_bytes(num_items);
}

// cub's unsigned image of a signed key: unsigned order of images is signed
// order of keys.
uint32_t ordered_bits(int32_t key) { return static_cast<uint32_t>(key) ^ 0x80000000u; }

struct Pairs {
  const int32_t* keys;
  const int32_t* values;
};
struct OutPairs {
  int32_t* keys;
  int32_t* values;
};

// A stable counting sort of n pairs by the `width` key bits from `shift` up.
void sort_by_digit(Pairs in, OutPairs out, int n, int shift, int width) {
  const uint32_t mask = (1u << width) - 1;
  std::array<size_t, (1 << kDigitBits) + 1> start{};  // start[digit + 1] counts, then offsets
  for (int i = 0; i < n; i++) start[((ordered_bits(in.keys[i]) >> shift) & mask) + 1]++;
  for (size_t digit = 1; digit < start.size(); digit++) start[digit] += start[digit - 1];
  for (int i = 0; i < n; i++) {
    const size_t to = start[(ordered_bits(in.keys[i]) >> shift) & mask]++;
    out.keys[to] = in.keys[i];
    out.values[to] = in.values[i];
  }
}

void sort_pairs(Pairs in, OutPairs out, OutPairs alternate, int n, int begin_bit, int end_bit) {
  const int passes = (end_bit - begin_bit + kDigitBits - 1) / kDigitBits;
  if (passes == 0) {  // no key bits: the stable order is the input order
    std::memcpy(out.keys, in.keys, sizeof(int32_t) * n);
    std::memcpy(out.values, in.values, sizeof(int32_t) * n);
    return;
  }
  for (int pass = 0; pass < passes; pass++) {
    // The last pass writes the outputs, the one before it the alternates, ...
    const OutPairs to = (passes - 1 - pass) % 2 == 0 ? out : alternate;
    const int shift = begin_bit + pass * kDigitBits;
    sort_by_digit(in, to, n, shift, std::min(kDigitBits, end_bit - shift));
    in = {to.keys, to.values};
  }
}

bool overlap(const void* p, size_t p_bytes, const void* q, size_t q_bytes) {
  const uintptr_t p0 = reinterpret_cast<uintptr_t>(p), q0 = reinterpret_cast<uintptr_t>(q);
  return p0 < q0 + q_bytes && q0 < p0 + p_bytes;
}

}  // namespace

cudaError_t radix_sort_pairs(void* temp_storage, size_t& temp_storage_bytes, const int32_t* keys_in,
                             int32_t* keys_out, const int32_t* values_in, int32_t* values_out,
                             int num_items, int begin_bit, int end_bit, cudaStream_t stream) {
  if (num_items < 0) return cudaErrorInvalidValue;
  if (temp_storage == nullptr) {
    temp_storage_bytes = required_temp_bytes(num_items);
    return cudaSuccess;
  }
  if (temp_storage_bytes < required_temp_bytes(num_items) || begin_bit < 0 || begin_bit > end_bit ||
      end_bit > kKeyBits)
    return cudaErrorInvalidValue;
  if (num_items == 0) return cudaSuccess;
  if (!keys_in || !keys_out || !values_in || !values_out) return cudaErrorInvalidValue;
  // Every region written (outputs, storage) must be apart from every other
  // region; the two inputs are only read and may share memory.
  const size_t bytes = sizeof(int32_t) * (size_t)num_items;
  const struct {
    const void* start;
    size_t bytes;
    bool written;
  } regions[] = {{keys_in, bytes, false},
                 {values_in, bytes, false},
                 {keys_out, bytes, true},
                 {values_out, bytes, true},
                 {temp_storage, required_temp_bytes(num_items), true}};
  for (const auto& r : regions)
    for (const auto& s : regions)
      if (&r < &s && (r.written || s.written) && overlap(r.start, r.bytes, s.start, s.bytes))
        return cudaErrorInvalidValue;

  const uintptr_t start = reinterpret_cast<uintptr_t>(temp_storage);
  auto* alternate_keys = reinterpret_cast<int32_t*>((start + kBufferAlignment - 1) /
                                                    kBufferAlignment * kBufferAlignment);
  auto* alternate_values = alternate_keys + aligned_bytes(num_items) / sizeof(int32_t);
  const Pairs in{keys_in, values_in};
  const OutPairs out{keys_out, values_out}, alternate{alternate_keys, alternate_values};
  return enqueue(stream, [=] { sort_pairs(in, out, alternate, num_items, begin_bit, end_bit); });
}

}  // namespace cuda_emulation
