// Arena and BufferPlan: one aligned, zeroed block per arena, carved by bumping;
// and the host's DeviceMemory table (aligned_alloc, memcpy), which counts the
// bytes it has handed out and not yet taken back (host_memory_live_bytes;
// staging buffers are not device memory and not counted).
// Invariant: each block carries its size in a header one alignment unit
// before the returned address, so release can subtract exactly what
// allocate added.
#include "device/arena.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace llm {

namespace {

std::atomic<size_t> live_host_bytes{0};

void* host_allocate(size_t bytes) {
  const size_t size = align_up(bytes);
  char* block = static_cast<char*>(std::aligned_alloc(kBufferAlignment, kBufferAlignment + size));
  LLM_CHECK(block, "cannot allocate {} bytes of host memory", bytes);
  std::memcpy(block, &size, sizeof(size));
  std::memset(block + kBufferAlignment, 0, bytes);
  live_host_bytes += size;
  return block + kBufferAlignment;
}
void host_release(void* p) {
  if (p == nullptr) return;
  char* block = static_cast<char*>(p) - kBufferAlignment;
  size_t size;
  std::memcpy(&size, block, sizeof(size));
  live_host_bytes -= size;
  std::free(block);
}
void host_copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}
void host_synchronize() {}
// Staging is the host side of a copy, not device memory: it is left out of
// host_memory_live_bytes (which counts what plans allocate).
void* staging_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(kBufferAlignment, align_up(bytes));
  LLM_CHECK(p, "cannot allocate {} bytes of host staging memory", bytes);
  return p;
}
void staging_release(void* p) { std::free(p); }
// The CPU's transfers are done when queued, so every mark is already passed.
uint64_t no_mark() { return 0; }
void no_transfers_to_wait_for(uint64_t) {}

}  // namespace

const DeviceMemory& host_memory() {
  static const DeviceMemory memory{host_allocate,
                                   host_release,
                                   host_copy,
                                   host_copy,
                                   host_copy,
                                   host_synchronize,
                                   staging_allocate,
                                   staging_release,
                                   host_copy,
                                   host_copy,
                                   host_copy,
                                   no_mark,
                                   no_transfers_to_wait_for,
                                   host_synchronize};
  return memory;
}

size_t host_memory_live_bytes() { return live_host_bytes.load(); }

Arena::Arena(std::string name, size_t capacity_bytes, const DeviceMemory& memory)
    : name_(std::move(name)),
      block_(nullptr, Release{memory.release}),
      capacity_(align_up(capacity_bytes)) {
  if (capacity_ == 0) return;
  try {
    block_.reset(memory.allocate(capacity_));
  } catch (const Error& e) {
    LLM_FAIL("arena '{}': {}", name_, e.what());
  }
}

Arena Arena::staging(std::string name, size_t capacity_bytes, const DeviceMemory& memory) {
  Arena arena;
  arena.name_ = std::move(name);
  arena.capacity_ = align_up(capacity_bytes);
  arena.block_ = std::unique_ptr<void, Release>(nullptr, Release{memory.release_staging});
  if (arena.capacity_ == 0) return arena;
  try {
    arena.block_.reset(memory.allocate_staging(arena.capacity_));
  } catch (const Error& e) {
    LLM_FAIL("arena '{}': {}", arena.name_, e.what());
  }
  std::memset(arena.block_.get(), 0, arena.capacity_);
  return arena;
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
