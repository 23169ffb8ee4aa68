// cpu_sgemm.h through oneDNN's matmul primitive (the default build,
// LLM_ONEDNN=ON). oneDNN picks its kernels for the CPU it runs on (AVX2,
// AVX-512, AMX; Debian's libdnnl is built with the OpenMP runtime, so they
// thread over the caller's team) and JIT-compiles them when a primitive is
// made, which takes milliseconds: each thread keeps the primitives it made,
// one per distinct call (transpositions, sizes, leading dimensions, beta).
// op(A) and op(B) are described by strides, so a transposed operand is read
// in place; beta != 0 is a sum post-op on C.
// Invariant: one primitive per call shape, so a repeated call runs the same
// kernels with the same blocking and gives the same bits.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstring>
#include <map>
#include <tuple>

#include "model/kernels/cpu_sgemm.h"
#include "runtime/error.h"

namespace llm::cpu {

namespace {

using dnnl::memory;
using Dims = memory::dims;

// (rows, cols) fp32 with leading dimension ld, read transposed when op says so.
memory::desc operand(Op op, int rows, int cols, int ld) {
  const Dims strides = op == Op::kNone ? Dims{ld, 1} : Dims{1, ld};
  return memory::desc({rows, cols}, memory::data_type::f32, strides);
}

struct Primitives {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::tuple<Op, Op, int, int, int, int, int, int, float>, dnnl::matmul> cache;

  dnnl::matmul& get(const SgemmArgs& g) {
    const auto key = std::make_tuple(g.op_a, g.op_b, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.beta);
    auto found = cache.find(key);
    if (found != cache.end()) return found->second;
    dnnl::primitive_attr attr;
    if (g.beta != 0.0f) {
      dnnl::post_ops sum;
      sum.append_sum(g.beta);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::desc desc(operand(g.op_a, g.M, g.K, g.lda), operand(g.op_b, g.K, g.N, g.ldb),
                                  operand(Op::kNone, g.M, g.N, g.ldc));
    return cache.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine))).first->second;
  }
};

// C = beta C for a product with nothing to sum (K = 0).
void scale_only(const SgemmArgs& g) {
  for (int i = 0; i < g.M; i++) {
    float* row = g.c + (size_t)i * g.ldc;
    if (g.beta == 0.0f) std::memset(row, 0, sizeof(float) * g.N);
    else for (int j = 0; j < g.N; j++) row[j] *= g.beta;
  }
}

}  // namespace

void sgemm(const SgemmArgs& g) {
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) {
    scale_only(g);
    return;
  }
  thread_local Primitives primitives;
  try {
    dnnl::matmul& matmul = primitives.get(g);
    const memory a(operand(g.op_a, g.M, g.K, g.lda), primitives.engine, const_cast<float*>(g.a));
    const memory b(operand(g.op_b, g.K, g.N, g.ldb), primitives.engine, const_cast<float*>(g.b));
    const memory c(operand(Op::kNone, g.M, g.N, g.ldc), primitives.engine, g.c);
    matmul.execute(primitives.stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    primitives.stream.wait();
  } catch (const dnnl::error& e) {
    LLM_FAIL("oneDNN matmul ({} x {} x {}) failed: {}", g.M, g.N, g.K, e.what());
  }
}

}  // namespace llm::cpu
