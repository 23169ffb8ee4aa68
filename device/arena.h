// Memory arenas sized up front. A BufferPlan lists every buffer a component
// needs (slot + element count); its byte total is known before anything is
// allocated, so the trainer can refuse a model that does not fit, and then
// binds all slots into one Arena block.
// An arena lives in the memory of one device (host memory by default).
// Invariant: buffers are 64-byte aligned and zero-initialized; nothing is freed
// individually; an Arena never grows.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "device/device_memory.h"

namespace llm {

inline constexpr size_t kBufferAlignment = 64;

inline size_t align_up(size_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

class Arena {
 public:
  Arena() = default;
  Arena(std::string name, size_t capacity_bytes, const DeviceMemory& memory = host_memory());
  // An arena in `memory`'s staging memory (host memory the device copies to
  // and from asynchronously: page-locked on CUDA), zero-filled.
  static Arena staging(std::string name, size_t capacity_bytes, const DeviceMemory& memory);

  void* alloc_bytes(size_t bytes);
  template <class T>
  T* alloc(size_t count) {
    return static_cast<T*>(alloc_bytes(count * sizeof(T)));
  }

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  const std::string& name() const { return name_; }

 private:
  struct Release {
    void (*release)(void*);
    void operator()(void* p) const { release(p); }
  };
  std::string name_;
  std::unique_ptr<void, Release> block_;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

class BufferPlan {
 public:
  template <class T>
  void add(T*& slot, size_t count) {
    entries_.push_back({reinterpret_cast<void**>(&slot), count * sizeof(T)});
  }
  // An untyped slot of `bytes` bytes (element type chosen at run time).
  void add_bytes(void*& slot, size_t bytes) { entries_.push_back({&slot, bytes}); }
  // Another plan's buffers, after these.
  void append(const BufferPlan& other) {
    entries_.insert(entries_.end(), other.entries_.begin(), other.entries_.end());
  }
  size_t bytes() const;
  // Allocates every planned buffer from `arena` and stores its address in its slot.
  void bind(Arena& arena) const;

 private:
  struct Entry {
    void** slot;
    size_t bytes;
  };
  std::vector<Entry> entries_;
};

}  // namespace llm
