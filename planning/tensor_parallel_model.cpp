// Tensor-parallel collectives of a step (see tensor_parallel_model.h).
#include "planning/tensor_parallel_model.h"

#include "model/transformer.h"
#include "runtime/group.h"

namespace llm {

std::vector<TensorCollective> tensor_parallel_collectives(const Config& config, int unit,
                                                          Pass pass) {
  const int T = config.parallel.tensor_parallel;
  if (T == 1) return {};
  const ModelConfig& m = config.model;
  const TrainingConfig& t = config.training;
  const size_t N = static_cast<size_t>(t.micro_batch_size) * t.seq_len, C = m.dim;
  const size_t a = config.precision() == Precision::bf16 ? 2 : 4;
  const TensorCollective gather{CollectiveOp::all_gather, N / T * C, a};
  const TensorCollective scatter{CollectiveOp::reduce_scatter, N / T * C, a};
  const bool forward = pass == Pass::forward;
  switch (unit_kind(unit, m.n_layers + 2)) {
    case UnitKind::embed:
      return {forward ? scatter : gather};
    case UnitKind::head:
      if (forward) return {gather, {CollectiveOp::all_gather, 2 * N, 4}};
      return {scatter, {CollectiveOp::all_reduce, C, 4}};
    case UnitKind::scalar:
      return {};
    case UnitKind::block:
      break;
  }
  if (forward) return {gather, scatter, gather, scatter};
  std::vector<TensorCollective> out;
  const CheckpointingPlan checkpointing = checkpointing_plan(t);
  if (checkpointing.checkpointed(unit - 1)) {
    if (checkpointing.mode == Recompute::full)
      out = {gather, scatter, gather};
    else
      out = {gather, gather};
  }
  for (const TensorCollective& c :
       {gather, scatter, gather, scatter, TensorCollective{CollectiveOp::all_reduce, 2 * C, 4}}) {
    out.push_back(c);
  }
  return out;
}

void tensor_parallel_step_traffic(const Config& config, int micro_batches, OpTraffic traffic[3]) {
  const int T = config.parallel.tensor_parallel, units = config.model.n_layers + 2;
  for (int u = 0; u < units; ++u) {
    for (Pass pass : {Pass::forward, Pass::backward}) {
      for (const TensorCollective& c : tensor_parallel_collectives(config, u, pass)) {
        const uint64_t bytes = static_cast<uint64_t>(c.count) * c.element_bytes;
        const Traffic one = c.op == CollectiveOp::all_reduce ? all_reduce_traffic(bytes, T)
                                                             : chunked_traffic(bytes, T);
        OpTraffic& x = traffic[static_cast<int>(c.op)];
        x.calls += micro_batches;
        x.payload_bytes += one.payload * micro_batches;
        x.sent_bytes += one.sent * micro_batches;
      }
    }
  }
}

}  // namespace llm
