// Fiber stacks and the switch between them (see fiber.h), with
// AddressSanitizer's fiber annotations when built with it.
#include "cuda_emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define LLM_FIBER_ASAN 1
#endif

extern "C" void llm_fiber_switch(void** save_stack_pointer, void* load_stack_pointer);
extern "C" void llm_fiber_entry();

namespace cuda_emulation {

namespace {

[[noreturn]] void fatal(const char* what) {
  std::fprintf(stderr, "CUDA emulation: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

// The saved frame fiber_switch.S pops: control words, r15..r12, rbx, rbp, return address.
struct InitialFrame {
  uint32_t mxcsr;
  uint16_t x87_control;
  uint16_t unused;
  uint64_t r15, r14, r13, r12, rbx, rbp;
  uint64_t resume_at;
};

}  // namespace

FiberContext::FiberContext() = default;

FiberContext::FiberContext(void (*function)(void*), void* argument, size_t stack_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  mapping_bytes_ = stack_bytes_ + page;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) fatal("mmap of a fiber stack failed");
  if (mprotect(mapping_, page, PROT_NONE) != 0) fatal("mprotect of a fiber's guard page failed");
  stack_bottom_ = static_cast<char*>(mapping_) + page;
  char* top = static_cast<char*>(mapping_) + mapping_bytes_;
  // A 16-byte aligned frame: once it is popped, llm_fiber_entry starts with
  // the stack aligned as before a call.
  static_assert(sizeof(InitialFrame) % 16 == 0);
  auto* frame = reinterpret_cast<InitialFrame*>(top - 16 - sizeof(InitialFrame));
  std::memset(frame, 0, sizeof *frame);
  uint32_t mxcsr;
  uint16_t x87_control;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87_control));
  frame->mxcsr = mxcsr;
  frame->x87_control = x87_control;
  frame->r12 = reinterpret_cast<uint64_t>(argument);
  frame->r13 = reinterpret_cast<uint64_t>(function);
  frame->resume_at = reinterpret_cast<uint64_t>(&llm_fiber_entry);
  stack_pointer_ = frame;
}

FiberContext::~FiberContext() {
  if (!mapping_) return;
#ifdef LLM_FIBER_ASAN
  // A fiber abandoned mid-kernel leaves its frames' redzones poisoned.
  __asan_unpoison_memory_region(mapping_, mapping_bytes_);
#endif
  munmap(mapping_, mapping_bytes_);
}

void FiberContext::switch_to(FiberContext& from, FiberContext& to) {
  to.resumed_from_ = &from;
#ifdef LLM_FIBER_ASAN
  __sanitizer_start_switch_fiber(&from.fake_stack_, to.stack_bottom_, to.stack_bytes_);
#endif
  llm_fiber_switch(&from.stack_pointer_, to.stack_pointer_);
  // Back in `from`.
#ifdef LLM_FIBER_ASAN
  const void* bottom = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(from.fake_stack_, &bottom, &bytes);
  if (from.resumed_from_ && !from.resumed_from_->mapping_) {
    from.resumed_from_->stack_bottom_ = bottom;
    from.resumed_from_->stack_bytes_ = bytes;
  }
#endif
}

void FiberContext::started() {
#ifdef LLM_FIBER_ASAN
  // The thread's own stack, learned on the first switch away from it.
  const void* bottom = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &bytes);
  if (resumed_from_ && !resumed_from_->mapping_) {
    resumed_from_->stack_bottom_ = bottom;
    resumed_from_->stack_bytes_ = bytes;
  }
#endif
}

}  // namespace cuda_emulation
