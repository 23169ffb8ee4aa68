// nvcuda::wmma under emulation: bf16 16x16x16 tiles with fp32 accumulation,
// the only shape the kernels use. Each operation is a warp rendezvous: the
// last lane to arrive does the whole tile's work for all 32 lanes, each lane
// holding 8 of the tile's 256 elements (lane l: elements 8l..8l+7 in row
// order), so a lane never sees another's part except through memory.
// Invariants: every lane passes the same pointer, leading dimension and
// layout (else the kernel faults, as divergent wmma calls are undefined);
// pointers are 32-byte aligned and leading dimensions a multiple of 16 bytes,
// as the hardware requires; mma_sync sums k in order in fp32 (products of
// bf16 values are exact in fp32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulation has 16x16x16 tiles only");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_same_v<T, float>
                                                 : std::is_same_v<T, __nv_bfloat16>,
                "the emulation has bf16 operands and fp32 accumulators only");
  static constexpr int num_elements = 8;
  T x[num_elements];
};

namespace detail {

constexpr int kTile = 16, kPerLane = 8;

// One lane's part in a warp-wide tile operation.
struct TileCall {
  void* fragment;           // this lane's fragment (the destination of loads, mma's D)
  const void* a = nullptr;  // mma's A, B and C fragments
  const void* b = nullptr;
  const void* c = nullptr;
  void* memory = nullptr;  // load source or store destination
  unsigned ldm = 0;
  bool column_major = false;
};

inline void check_same_call(void** calls, int lanes, const char* what) {
  if (lanes != 32)
    cuda_emulation::kernel_fault("a wmma operation in a warp of fewer than 32 threads");
  const auto* first = static_cast<const TileCall*>(calls[0]);
  for (int lane = 1; lane < lanes; lane++) {
    const auto* call = static_cast<const TileCall*>(calls[lane]);
    if (call->memory != first->memory || call->ldm != first->ldm ||
        call->column_major != first->column_major)
      cuda_emulation::kernel_fault(what);
  }
}

template <class T>
void check_memory(const TileCall& call) {
  if (reinterpret_cast<uintptr_t>(call.memory) % 32 != 0)
    cuda_emulation::kernel_fault("a wmma tile pointer is not 32-byte aligned");
  if (call.ldm * sizeof(T) % 16 != 0)
    cuda_emulation::kernel_fault("a wmma leading dimension is not a multiple of 16 bytes");
}

// Element (row, col) of a tile stored at `memory`.
template <class T>
T& element(const TileCall& call, int row, int col) {
  T* p = static_cast<T*>(call.memory);
  return call.column_major ? p[col * call.ldm + row] : p[row * call.ldm + col];
}

template <class T>
void load_all(void** calls, int lanes) {
  check_same_call(calls, lanes, "lanes of a warp load different wmma tiles");
  check_memory<T>(*static_cast<TileCall*>(calls[0]));
  for (int lane = 0; lane < lanes; lane++) {
    const auto& call = *static_cast<TileCall*>(calls[lane]);
    T* x = static_cast<T*>(call.fragment);
    for (int e = 0; e < kPerLane; e++) {
      const int i = lane * kPerLane + e;
      x[e] = element<T>(call, i / kTile, i % kTile);
    }
  }
}

inline void store_all(void** calls, int lanes) {
  check_same_call(calls, lanes, "lanes of a warp store different wmma tiles");
  check_memory<float>(*static_cast<TileCall*>(calls[0]));
  for (int lane = 0; lane < lanes; lane++) {
    const auto& call = *static_cast<TileCall*>(calls[lane]);
    const float* x = static_cast<const float*>(call.fragment);
    for (int e = 0; e < kPerLane; e++) {
      const int i = lane * kPerLane + e;
      element<float>(call, i / kTile, i % kTile) = x[e];
    }
  }
}

// D = A B + C over the whole warp's fragments.
inline void multiply_all(void** calls, int lanes) {
  if (lanes != 32)
    cuda_emulation::kernel_fault("a wmma operation in a warp of fewer than 32 threads");
  float a[kTile][kTile], b[kTile][kTile], c[kTile][kTile];
  for (int lane = 0; lane < lanes; lane++) {
    const auto& call = *static_cast<TileCall*>(calls[lane]);
    for (int e = 0; e < kPerLane; e++) {
      const int i = lane * kPerLane + e;
      a[i / kTile][i % kTile] = __bfloat162float(static_cast<const __nv_bfloat16*>(call.a)[e]);
      b[i / kTile][i % kTile] = __bfloat162float(static_cast<const __nv_bfloat16*>(call.b)[e]);
      c[i / kTile][i % kTile] = static_cast<const float*>(call.c)[e];
    }
  }
  for (int lane = 0; lane < lanes; lane++) {
    auto& call = *static_cast<TileCall*>(calls[lane]);
    float* d = static_cast<float*>(call.fragment);
    for (int e = 0; e < kPerLane; e++) {
      const int i = lane * kPerLane + e, row = i / kTile, col = i % kTile;
      float sum = c[row][col];
      for (int k = 0; k < kTile; k++) sum += a[row][k] * b[k][col];
      d[e] = sum;
    }
  }
}

}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, T value) {
  for (T& x : f.x) x = value;
}

template <class Use, int M, int N, int K, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, __nv_bfloat16, Layout>& f, const __nv_bfloat16* p,
                      unsigned ldm) {
  detail::TileCall call{f.x};
  call.memory = const_cast<__nv_bfloat16*>(p);
  call.ldm = ldm;
  call.column_major = std::is_same_v<Layout, col_major>;
  cuda_emulation::sync_warp("wmma::load_matrix_sync", &call, detail::load_all<__nv_bfloat16>);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
  detail::TileCall call{f.x};
  call.memory = const_cast<float*>(p);
  call.ldm = ldm;
  call.column_major = layout == mem_col_major;
  cuda_emulation::sync_warp("wmma::load_matrix_sync", &call, detail::load_all<float>);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  detail::TileCall call{const_cast<float*>(f.x)};
  call.memory = p;
  call.ldm = ldm;
  call.column_major = layout == mem_col_major;
  cuda_emulation::sync_warp("wmma::store_matrix_sync", &call, detail::store_all);
}

template <class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  detail::TileCall call{d.x};
  call.a = a.x;
  call.b = b.x;
  call.c = c.x;
  cuda_emulation::sync_warp("wmma::mma_sync", &call, detail::multiply_all);
}

}  // namespace nvcuda::wmma
