// The op harness's table and its GoogleTest instantiation: every case of every
// family (op_cases_*.cpp) on each row it declares, as one parameterized test
// per (case, backend, dtype), named <Backend>/Op.Case/<family>_<case>_<dtype>,
// e.g. Cuda/Op.Case/rmsnorm_backward_bf16. The Cpu/ rows run everywhere (ctest
// label cpu); the Cuda/ rows skip with a reason where there is no GPU (ctest
// label gpu). Plus the coverage check: every op of the Backend table has cases
// on both backends (and both storage types where it has them), and that the
// attention choice (training.attention) swaps only the bf16 attention entries.
// Invariant: the table is built on first use, after static initialization, so
// the order of the case files does not matter.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    for (auto family : {cast_fill_residual_cases, embedding_rmsnorm_cases, qk_norm_cases,
                        row_bias_cases, rope_swiglu_cases, attention_cases, kv_cache_cases,
                        matmul_cases, cross_entropy_adamw_cases, columns_cases, fp8_cases,
                        fp8_row_amax_cases, fp8_delayed_cases}) {
      for (OpCase& c : family()) all.push_back(std::move(c));
    }
    return all;
  }();
  return cases;
}

namespace {

struct OpParam {
  const OpCase* op_case;
  OpRow row;
};

// The (case, dtype) rows of one backend, in table order.
std::vector<OpParam> rows_of(Target target) {
  std::vector<OpParam> params;
  for (const OpCase& c : op_cases())
    for (Dtype dtype : {Dtype::f32, Dtype::bf16}) {
      const OpRow row{target, dtype};
      if (c.rows & row_bit(row)) params.push_back({&c, row});
    }
  return params;
}

// What gtest prints for a row (instead of the struct's bytes).
void PrintTo(const OpParam& p, std::ostream* os) {
  *os << p.op_case->family << " " << p.op_case->name << " on " << (p.row.cuda() ? "cuda" : "cpu")
      << (p.row.dtype == Dtype::f32 ? " f32" : " bf16");
}

std::string param_name(const testing::TestParamInfo<OpParam>& info) {
  const OpParam& p = info.param;
  return p.op_case->family + "_" + p.op_case->name + (p.row.dtype == Dtype::f32 ? "_f32" : "_bf16");
}

class Op : public testing::TestWithParam<OpParam> {};

TEST_P(Op, Case) {
  const OpParam& p = GetParam();
  if (p.row.cuda()) LLM_SKIP_WITHOUT_GPU();
  p.op_case->run(p.row);
}

INSTANTIATE_TEST_SUITE_P(Cpu, Op, testing::ValuesIn(rows_of(Target::cpu)), param_name);
INSTANTIATE_TEST_SUITE_P(Cuda, Op, testing::ValuesIn(rows_of(Target::cuda)), param_name);

// A new op is not done without its case: each entry of the Backend table is
// named by some case on every row it has (typed ops: both backends and both
// storage types; untyped ops: both backends).
TEST(OpHarness, EveryOpHasCases) {
  std::vector<std::pair<std::string, unsigned>> expected;
#define LLM_EXPECT_TYPED_OP(name) expected.push_back({#name, kAllRows});
  LLM_TYPED_OPS(LLM_EXPECT_TYPED_OP)
#undef LLM_EXPECT_TYPED_OP
  for (const char* name :
       {"rope_table", "adamw_update", "sum_squares", "column_sum_squares", "gather_columns"})
    expected.push_back({name, kF32Rows});
  for (const char* name :
       {"cast_f32_to_bf16", "cast_bf16_to_f32", "fp8_amax_scale", "fp8_cast_transpose"})
    expected.push_back({name, kBf16Rows});
  for (const auto& [op, rows] : expected) {
    unsigned covered = 0;
    for (const OpCase& c : op_cases())
      for (const std::string& used : c.ops)
        if (used == op) covered |= c.rows;
    EXPECT_EQ(covered & rows, rows) << op << ": rows without a case (mask " << covered << ")";
  }
}

// training.attention picks between two CUDA tables that differ in exactly the
// bf16 attention entries (cuDNN's or the flash kernel's); auto is cuDNN's in a
// cuDNN build. Needs the CUDA build, not a GPU: it only reads the tables.
TEST(OpHarness, AttentionChoiceSwapsOnlyBf16Attention) {
  if (!kBuiltWithCuda) GTEST_SKIP() << "this build has no CUDA backend";
  const Backend& flash = backend_cuda(AttentionKernel::flash);
  const Backend& cudnn = backend_cuda(AttentionKernel::cudnn);
  EXPECT_EQ(&backend_cuda(AttentionKernel::automatic), &cudnn);
  EXPECT_EQ(flash.bf16.attention_forward, &cuda::attention_forward<Bf16>);
  EXPECT_EQ(flash.bf16.attention_backward, &cuda::attention_backward<Bf16>);
  EXPECT_EQ(cudnn.bf16.attention_forward != flash.bf16.attention_forward, kBuiltWithCudnn);
  EXPECT_EQ(cudnn.bf16.attention_backward != flash.bf16.attention_backward, kBuiltWithCudnn);
  TypedOps<Bf16> cudnn_bf16 = cudnn.bf16;
  cudnn_bf16.attention_forward = flash.bf16.attention_forward;
  cudnn_bf16.attention_backward = flash.bf16.attention_backward;
  EXPECT_EQ(std::memcmp(&cudnn_bf16, &flash.bf16, sizeof cudnn_bf16), 0);
  EXPECT_EQ(std::memcmp(&cudnn.f32, &flash.f32, sizeof cudnn.f32), 0);
  EXPECT_EQ(cudnn.adamw_update, flash.adamw_update);
  EXPECT_EQ(cudnn.sum_squares, flash.sum_squares);
}

TEST(OpHarness, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const OpCase& c : op_cases())
    EXPECT_TRUE(names.insert(c.family + "_" + c.name).second) << c.family << " " << c.name;
}

}  // namespace
}  // namespace llm::op_test
