// cpu_gemm.h through oneDNN's matmul primitive (the default build,
// LLM_ONEDNN=ON). oneDNN picks its kernels for the CPU it runs on (AVX2,
// AVX-512, AVX512-BF16, AMX; Debian's libdnnl is built with the OpenMP
// runtime, so they thread over the caller's team) and JIT-compiles them when
// a primitive is made, which takes milliseconds: each thread keeps the
// primitives it made, one per distinct call (types, transpositions, sizes,
// leading dimensions, beta, thread count). op(A) and op(B) are described by strides, so a
// transposed operand is read in place; beta != 0 is a sum post-op on C.
// bf16 is native when the CPU has bf16 dot products and oneDNN's kernel for a
// bf16 product uses them (its implementation name says bf16 or amx), probed
// once.
// Invariant: one primitive per call shape, so a repeated call runs the same
// kernels with the same blocking and gives the same bits.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>

#include "model/kernels/cpu_gemm.h"
#include "base/error.h"

namespace llm::cpu {

namespace {

using dnnl::memory;
using Dims = memory::dims;
using DataType = memory::data_type;

template <class T>
constexpr DataType data_type() {
  return std::is_same_v<T, float> ? DataType::f32 : DataType::bf16;
}

// (rows, cols) with leading dimension ld, read transposed when op says so.
memory::desc operand(Op op, int rows, int cols, int ld, DataType type) {
  const Dims strides = op == Op::kNone ? Dims{ld, 1} : Dims{1, ld};
  return memory::desc({rows, cols}, type, strides);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::matmul::primitive_desc describe(Op op_a, Op op_b, int M, int N, int K, int lda, int ldb,
                                      int ldc, float beta, DataType in, DataType out) {
  dnnl::primitive_attr attr;
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  const dnnl::matmul::desc desc(operand(op_a, M, K, lda, in), operand(op_b, K, N, ldb, in),
                                operand(Op::kNone, M, N, ldc, out));
  return dnnl::matmul::primitive_desc(desc, attr, cpu_engine());
}

// This thread's primitives, one per distinct call.
struct Primitives {
  dnnl::stream stream{cpu_engine()};
  std::map<std::tuple<DataType, DataType, Op, Op, int, int, int, int, int, int, float, int>,
           dnnl::matmul>
      cache;

  // A primitive splits its work for the thread count it was made under, so
  // that count is part of the call's identity (ThreadLimit changes it).
  template <class In, class Out>
  dnnl::matmul& get(const GemmArgs<In, Out>& g) {
    const auto key = std::make_tuple(data_type<In>(), data_type<Out>(), g.op_a, g.op_b, g.M, g.N,
                                     g.K, g.lda, g.ldb, g.ldc, g.beta, omp_get_max_threads());
    auto found = cache.find(key);
    if (found != cache.end()) return found->second;
    const auto desc = describe(g.op_a, g.op_b, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.beta,
                               data_type<In>(), data_type<Out>());
    return cache.emplace(key, dnnl::matmul(desc)).first->second;
  }
};

// C = beta C for a product with nothing to sum (K = 0), rounded once.
template <class In, class Out>
void scale_only(const GemmArgs<In, Out>& g) {
  for (int i = 0; i < g.M; i++) {
    Out* row = g.c + (size_t)i * g.ldc;
    for (int j = 0; j < g.N; j++) store(row + j, g.beta == 0.0f ? 0.0f : g.beta * to_float(row[j]));
  }
}

template <class In, class Out>
void run(const GemmArgs<In, Out>& g) {
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) {
    scale_only(g);
    return;
  }
  thread_local Primitives primitives;
  try {
    dnnl::matmul& matmul = primitives.get(g);
    const memory a(operand(g.op_a, g.M, g.K, g.lda, data_type<In>()), cpu_engine(),
                   const_cast<In*>(g.a));
    const memory b(operand(g.op_b, g.K, g.N, g.ldb, data_type<In>()), cpu_engine(),
                   const_cast<In*>(g.b));
    const memory c(operand(Op::kNone, g.M, g.N, g.ldc, data_type<Out>()), cpu_engine(), g.c);
    matmul.execute(primitives.stream,
                   {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    primitives.stream.wait();
  } catch (const dnnl::error& e) {
    LLM_FAIL("oneDNN matmul ({} x {} x {}) failed: {}", g.M, g.N, g.K, e.what());
  }
}

// Whether oneDNN runs a bf16 product on this CPU's bf16 instructions: the
// CPU has them (AVX512-BF16 or AMX) and the kernel oneDNN picks for a bf16
// product uses them (not an emulation).
bool cpu_has_native_bf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa != dnnl::cpu_isa::avx512_core_bf16 && isa != dnnl::cpu_isa::avx512_core_amx) return false;
  try {
    const std::string impl =
        describe(Op::kNone, Op::kNone, 64, 64, 64, 64, 64, 64, 0.0f, DataType::bf16, DataType::f32)
            .impl_info_str();
    return impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos;
  } catch (const dnnl::error&) {
    return false;  // no bf16 matmul for this CPU at all
  }
}

std::atomic<bool> bf16_allowed{true};

}  // namespace

void gemm(const GemmArgs<float, float>& g) { run(g); }

bool bf16_gemm_native() {
  static const bool native = cpu_has_native_bf16();
  return native && bf16_allowed.load();
}

void set_bf16_gemm_native(bool allowed) { bf16_allowed.store(allowed); }

void gemm(const GemmArgs<Bf16, float>& g) {
  LLM_CHECK(bf16_gemm_native(), "bf16 GEMM called where it does not run natively");
  run(g);
}

void gemm(const GemmArgs<Bf16, Bf16>& g) {
  LLM_CHECK(bf16_gemm_native(), "bf16 GEMM called where it does not run natively");
  run(g);
}

}  // namespace llm::cpu
