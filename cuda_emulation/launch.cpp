// Kernel launches under emulation: the configuration checked as the
// hardware checks it (an H100's limits), the kernel's name found for error
// messages, and its grid queued on the stream (block_scheduler.h).
// Invariants: a bad configuration queues nothing and is returned (and kept
// for cudaGetLastError) at the launch, as CUDA reports it; a fault inside the
// grid becomes the sticky error, naming the kernel, its block and the fault.
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_emulation/block_scheduler.h"
#include "cuda_emulation/streams.h"

namespace cuda_emulation {

namespace {

constexpr unsigned kMaxBlockThreads = 1024;
constexpr unsigned kMaxBlockDimXY = 1024, kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridDimX = 0x7fffffffu, kMaxGridDimYZ = 65535;
// Dynamic shared memory per block: 48 KiB unless the kernel opted in to
// more with cudaFuncSetAttribute, and at most 227 KiB on an H100 (sm_90).
constexpr int kDefaultSharedBytes = 48 << 10;
constexpr int kMaxSharedBytes = 227 << 10;

std::mutex attributes_mutex;
std::map<const void*, int> max_dynamic_shared;  // kernel -> bytes it opted in to

int shared_bytes_allowed(const void* kernel) {
  std::lock_guard<std::mutex> lock(attributes_mutex);
  auto it = max_dynamic_shared.find(kernel);
  return it == max_dynamic_shared.end() ? kDefaultSharedBytes
                                        : std::max(it->second, kDefaultSharedBytes);
}

// Function names from the executable's symbol table (kernels live in
// anonymous namespaces, so they are local symbols dladdr cannot see).
class SymbolNames {
 public:
  std::string name_of(const void* address) {
    std::lock_guard<std::mutex> lock(mutex_);
    Dl_info info{};
    if (dladdr(address, &info) == 0 || !info.dli_fname) return unnamed(address);
    if (loaded_.insert({info.dli_fname, true}).second) load(info.dli_fname, info.dli_fbase);
    auto it = names_.find(address);
    return it == names_.end() ? unnamed(address) : it->second;
  }

 private:
  static std::string unnamed(const void* address) {
    char text[32];
    std::snprintf(text, sizeof text, "kernel at %p", address);
    return text;
  }

  void load(const std::string& path, void* base) {
    std::ifstream file(path == "" ? "/proc/self/exe" : path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    if (bytes.size() < sizeof(Elf64_Ehdr)) return;
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
    const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + header->e_shoff);
    // Position-independent executables are loaded at `base`; others at their addresses.
    const uintptr_t bias = header->e_type == ET_DYN ? reinterpret_cast<uintptr_t>(base) : 0;
    for (int s = 0; s < header->e_shnum; s++) {
      if (sections[s].sh_type != SHT_SYMTAB) continue;
      const Elf64_Shdr& strings = sections[sections[s].sh_link];
      const auto* symbols =
          reinterpret_cast<const Elf64_Sym*>(bytes.data() + sections[s].sh_offset);
      const size_t count = sections[s].sh_size / sizeof(Elf64_Sym);
      for (size_t i = 0; i < count; i++) {
        if (ELF64_ST_TYPE(symbols[i].st_info) != STT_FUNC || symbols[i].st_value == 0) continue;
        const char* mangled = bytes.data() + strings.sh_offset + symbols[i].st_name;
        int status = 0;
        char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
        names_[reinterpret_cast<const void*>(bias + symbols[i].st_value)] =
            status == 0 && demangled ? demangled : mangled;
        std::free(demangled);
      }
    }
  }

  std::mutex mutex_;
  std::map<std::string, bool> loaded_;
  std::map<const void*, std::string> names_;
};

std::string kernel_name(const void* kernel) {
  static SymbolNames* names = new SymbolNames();
  return names->name_of(kernel);
}

bool block_fits(dim3 block) {
  return block.x >= 1 && block.y >= 1 && block.z >= 1 && block.x <= kMaxBlockDimXY &&
         block.y <= kMaxBlockDimXY && block.z <= kMaxBlockDimZ &&
         (uint64_t)block.x * block.y * block.z <= kMaxBlockThreads;
}

bool grid_fits(dim3 grid) {
  return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= kMaxGridDimX &&
         grid.y <= kMaxGridDimYZ && grid.z <= kMaxGridDimYZ;
}

}  // namespace

cudaError_t set_function_attribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  if (!kernel || attribute != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return cudaErrorInvalidValue;
  if (value < 0 || value > kMaxSharedBytes) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(attributes_mutex);
  max_dynamic_shared[kernel] = value;
  return cudaSuccess;
}

cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, std::function<void()> thread) {
  if (cudaError_t error = sticky_error()) return error;
  if (!block_fits(block) || !grid_fits(grid))
    return record_last_error(cudaErrorInvalidConfiguration);
  if (shared_bytes > (size_t)shared_bytes_allowed(kernel))
    return record_last_error(cudaErrorInvalidValue);
  Grid work{grid, block, shared_bytes, std::move(thread)};
  return enqueue(stream, [kernel, work = std::move(work)] {
    const std::string fault = run_grid(work);
    if (!fault.empty())
      fail(cudaErrorLaunchFailure, "kernel " + kernel_name(kernel) + ": " + fault);
  });
}

}  // namespace cuda_emulation
