// Arena and BufferPlan: one aligned, zeroed block per arena, carved by bumping;
// and the host's DeviceMemory table (aligned_alloc, memcpy).
#include "runtime/arena.h"

#include <cstdlib>
#include <cstring>

#include "runtime/error.h"

namespace llm {

namespace {

void* host_allocate(size_t bytes) {
  void* block = std::aligned_alloc(kBufferAlignment, align_up(bytes));
  LLM_CHECK(block, "cannot allocate {} bytes of host memory", bytes);
  std::memset(block, 0, bytes);
  return block;
}
void host_copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}
void host_synchronize() {}

}  // namespace

const DeviceMemory& host_memory() {
  static const DeviceMemory memory{host_allocate, std::free, host_copy, host_copy, host_copy,
                                   host_synchronize};
  return memory;
}

Arena::Arena(std::string name, size_t capacity_bytes, const DeviceMemory& memory)
    : name_(std::move(name)), block_(nullptr, Release{memory.release}),
      capacity_(align_up(capacity_bytes)) {
  if (capacity_ == 0) return;
  try {
    block_.reset(memory.allocate(capacity_));
  } catch (const Error& e) {
    LLM_FAIL("arena '{}': {}", name_, e.what());
  }
}

void* Arena::alloc_bytes(size_t bytes) {
  size_t size = align_up(bytes);
  LLM_CHECK(used_ + size <= capacity_, "arena '{}': {} more bytes requested, {} of {} used", name_,
            size, used_, capacity_);
  void* p = static_cast<char*>(block_.get()) + used_;
  used_ += size;
  return p;
}

size_t BufferPlan::bytes() const {
  size_t total = 0;
  for (const Entry& e : entries_) total += align_up(e.bytes);
  return total;
}

void BufferPlan::bind(Arena& arena) const {
  for (const Entry& e : entries_) *e.slot = arena.alloc_bytes(e.bytes);
}

}  // namespace llm
