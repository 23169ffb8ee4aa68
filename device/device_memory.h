// Memory of a device, as a table of plain functions: where a backend's buffers
// live and how bytes cross between them and the host. The CPU's table is host
// memory with memcpy; the CUDA table (device/cuda_runtime.cu) is cudaMalloc,
// copies on the compute stream, and a transfer stream of its own. Code that
// moves state between host and device (initialization, checkpoints, token
// batches, losses, the offloaded optimizer) goes through this table, so it is
// the same code, and tested, on CPU.
// Invariants: allocate returns zero-filled, kBufferAlignment-aligned memory or
// throws; to_device and to_host return when the copy is complete (the host
// buffer may be reused or read at once), so each waits for the device's queued
// work; copy and to_device_async are ordered with the device's kernels and do
// not wait; synchronize waits for everything queued on the device (not the
// transfer queue: wait_for_transfers does).
#pragma once

#include <cstddef>
#include <cstdint>

namespace llm {

struct DeviceMemory {
  void* (*allocate)(size_t bytes);
  void (*release)(void* p);
  void (*to_device)(void* dst, const void* host_src, size_t bytes);
  void (*to_host)(void* host_dst, const void* src, size_t bytes);
  void (*copy)(void* dst, const void* src, size_t bytes);  // within the device
  void (*synchronize)();  // waits for everything queued on the device
  // Staging: host memory the device copies from while the host goes on
  // (page-locked on CUDA, plain on the CPU), and that copy, queued behind the
  // device's work. The host must not rewrite the source until the device has
  // passed the copy: after a later to_host or synchronize.
  void* (*allocate_staging)(size_t bytes);
  void (*release_staging)(void* p);
  void (*to_device_async)(void* dst, const void* staging_src, size_t bytes);
  // The transfer queue: copies between staging memory and the device on a
  // queue of their own (a CUDA stream), so that they overlap the device's
  // compute; on the CPU each is done at once. Each copy starts after the work
  // queued on the device so far. transfer_mark() names the transfers queued
  // so far; wait_for_transfers(mark) returns once they are done (the host
  // side, for staging buffers); device_waits_for_transfers() makes the
  // device's later work wait for every transfer queued so far, without
  // blocking the host. Called from one host thread.
  void (*to_host_queued)(void* staging_dst, const void* src, size_t bytes);
  void (*to_device_queued)(void* dst, const void* staging_src, size_t bytes);
  uint64_t (*transfer_mark)();
  void (*wait_for_transfers)(uint64_t mark);
  void (*device_waits_for_transfers)();
};

const DeviceMemory& host_memory();
// Bytes host_memory().allocate has handed out and release has not taken back
// (rounded up to the alignment): an allocation count independent of any plan.
size_t host_memory_live_bytes();

}  // namespace llm
