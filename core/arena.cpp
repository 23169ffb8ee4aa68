// Arena and BufferPlan: one aligned, zeroed block per arena, carved by bumping.
#include "core/arena.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace llm {

void Arena::FreeDeleter::operator()(void* p) const { std::free(p); }

Arena::Arena(std::string name, size_t capacity_bytes)
    : name_(std::move(name)), capacity_(align_up(capacity_bytes)) {
  if (capacity_ == 0) return;
  void* block = std::aligned_alloc(kBufferAlignment, capacity_);
  LLM_CHECK(block, "arena '{}': cannot allocate {} bytes", name_, capacity_);
  std::memset(block, 0, capacity_);
  block_.reset(block);
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
