// Which devices this build and this machine have. The CUDA answer comes from
// device.cu when the CUDA backend is compiled, else from device_nocuda.cc
// (always zero devices), so callers never need #ifdef.
#pragma once

namespace llm {

enum class Device { cpu, cuda };

// Number of CUDA devices usable by this process (0 in a CPU-only build).
int cuda_device_count();

}  // namespace llm
