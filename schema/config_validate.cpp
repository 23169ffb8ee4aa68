// The config's own rules (see config_validate.h).
#include "schema/config_validate.h"

#include "base/cli_values.h"
#include "base/error.h"
#include "schema/key_origin.h"
#include "schema/key_values.h"

namespace llm {

UnevenSplit tensor_parallel_uneven_split(const Config& c, int tp) {
  const ModelConfig& m = c.model;
  for (auto [key, value] : {std::pair{"model.n_heads", m.n_heads},
                            {"model.n_kv_heads", m.n_kv_heads},
                            {"model.ffn_dim", m.ffn_dim},
                            {"model.vocab_size", m.vocab_size},
                            {"training.seq_len", c.training.seq_len}}) {
    if (value % tp != 0) return {key, value};
  }
  return {};
}

void config_validate(const Config& c) {
  const KeyOrigin at(c);
  // Every key's own rule (config.h): floats finite, numbers in their range.
  c.visit_tables([&](const char* table_name, const auto& section) {
    visit_keys(section, [&](const char* key, const auto& field, const char*, const KeyRule& rule) {
      using T = std::decay_t<decltype(field)>;
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        const std::string name = fmt::format("{}.{}", table_name, key);
        const std::string violation = range_violation(name, field, rule.range);
        LLM_CHECK(violation.empty(), "{}: {}", at(name), violation);
      }
    });
  });

  // Rules that relate keys.
  const ModelConfig& m = c.model;
  LLM_CHECK(m.n_heads % m.n_kv_heads == 0,
            "{}: model.n_kv_heads ({}) must divide model.n_heads ({})",
            at({"model.n_kv_heads", "model.n_heads"}), m.n_kv_heads, m.n_heads);
  if (m.head_dim == 0) {
    LLM_CHECK(m.dim % m.n_heads == 0,
              "{}: model.n_heads ({}) must divide model.dim ({}), or model.head_dim must be set",
              at({"model.n_heads", "model.dim"}), m.n_heads, m.dim);
    LLM_CHECK((m.dim / m.n_heads) % 2 == 0,
              "{}: model.dim / model.n_heads = {} must be even for RoPE",
              at({"model.dim", "model.n_heads"}), m.dim / m.n_heads);
  } else {
    LLM_CHECK(m.head_dim % 2 == 0, "{}: model.head_dim = {} must be even for RoPE",
              at("model.head_dim"), m.head_dim);
  }
  LLM_CHECK(m.rope_scaling_factor == 1 || m.rope_high_freq_factor > m.rope_low_freq_factor,
            "{}: model.rope_high_freq_factor ({}) must be above model.rope_low_freq_factor ({}) "
            "when model.rope_scaling_factor is not 1",
            at({"model.rope_high_freq_factor", "model.rope_low_freq_factor"}),
            m.rope_high_freq_factor, m.rope_low_freq_factor);

  const TrainingConfig& t = c.training;
  LLM_CHECK(t.batch_size % t.micro_batch_size == 0,
            "{}: training.batch_size ({}) must be a multiple of training.micro_batch_size ({})",
            at({"training.batch_size", "training.micro_batch_size"}), t.batch_size,
            t.micro_batch_size);
  for (const auto& [key, factor] :
       {std::pair{"training.spike_loss_factor", t.spike_loss_factor},
        std::pair{"training.spike_grad_norm_factor", t.spike_grad_norm_factor}}) {
    LLM_CHECK(factor == 0 || factor > 1, "{}: {} must be 0 (off) or above 1, got {}", at(key), key,
              factor);
  }
  LLM_CHECK(c.parallel.comm != CommBackend::nccl || t.device == Device::cuda,
            "{}: parallel.comm = nccl needs training.device = cuda",
            at({"parallel.comm", "training.device"}));

  // CUDA graphs hold the kernels between unit boundaries; tensor
  // parallelism's collectives run inside them (model/captured_segments.h).
  LLM_CHECK(!t.cuda_graphs || t.device == Device::cuda,
            "{}: training.cuda_graphs = true needs training.device = cuda",
            at({"training.cuda_graphs", "training.device"}));
  LLM_CHECK(!t.cuda_graphs || c.parallel.tensor_parallel == 1,
            "{}: training.cuda_graphs = true needs parallel.tensor_parallel = 1 (its collectives "
            "run inside every block, where a graph cannot hold them)",
            at({"training.cuda_graphs", "parallel.tensor_parallel"}));

  LLM_CHECK(!c.data.train.empty(), "{}: data.train must name the training shards",
            at("data.train"));
  // What only the tokenizer gives: text for samples, where documents meet.
  LLM_CHECK(t.sample_tokens == 0 || !c.data.tokenizer.empty(),
            "{}: training.sample_tokens = {} needs data.tokenizer (or set sample_tokens = 0)",
            at({"training.sample_tokens", "data.tokenizer"}), t.sample_tokens);
  LLM_CHECK(!c.data.document_masking || !c.data.tokenizer.empty(),
            "{}: data.document_masking needs data.tokenizer (its BOS or EOS marks where "
            "documents meet)",
            at({"data.document_masking", "data.tokenizer"}));
  LLM_CHECK(c.data.document_masking || !c.data.resets_positions(),
            "{}: data.reset_positions = true needs data.document_masking = true (positions "
            "restart at the documents it finds)",
            at({"data.reset_positions", "data.document_masking"}));
  // Hybrid sharding shards within groups of shard_group_size ranks.
  const ParallelConfig& p = c.parallel;
  LLM_CHECK(p.mode == ParallelMode::hybrid || p.shard_group_size == 0,
            "{}: parallel.shard_group_size is only used by mode hybrid (mode is {})",
            at({"parallel.shard_group_size", "parallel.mode"}), to_string(p.mode));
  LLM_CHECK(p.mode != ParallelMode::hybrid || p.shard_group_size > 0,
            "{}: parallel.mode = hybrid needs parallel.shard_group_size, the ranks that shard "
            "among themselves",
            at({"parallel.mode", "parallel.shard_group_size"}));

  parse_duration_seconds(c.parallel.timeout, at("parallel.timeout") + ": parallel.timeout");
  if (!p.memory_per_rank.empty())
    parse_bytes(p.memory_per_rank, at("parallel.memory_per_rank") + ": parallel.memory_per_rank");
  // Tensor parallelism splits heads (whole, kv heads included), ffn columns
  // and the vocabulary; sequence parallelism splits each micro-batch's rows.
  const int tp = c.parallel.tensor_parallel;
  const UnevenSplit uneven = tensor_parallel_uneven_split(c, tp);
  LLM_CHECK(!uneven.key, "{}: parallel.tensor_parallel ({}) must divide {} ({})",
            at({"parallel.tensor_parallel", uneven.key}), tp, uneven.key, uneven.value);
  // FP8 (docs/training.md#fp8-linear-layers): gradients are reduced in fp32
  // or bf16; on the GPU, cuBLASLt's FP8 GEMMs stride over every dimension of
  // the block matmuls (dim, head dim, ffn columns per rank, tokens of a
  // micro-batch) in 16-byte steps of one-byte codes.
  LLM_CHECK(c.parallel.reduce_dtype != Precision::fp8,
            "{}: parallel.reduce_dtype must be fp32 or bf16, got fp8", at("parallel.reduce_dtype"));
  // Delayed scaling scales FP8 inputs.
  LLM_CHECK(t.fp8_scaling == Fp8Scaling::current || t.precision == Precision::fp8,
            "{}: training.fp8_scaling = delayed needs training.precision = fp8 (it is {})",
            at({"training.fp8_scaling", "training.precision"}), to_string(t.precision));
  if (t.precision == Precision::fp8 && t.device == Device::cuda) {
    const std::pair<const char*, int64_t> dims[] = {
        {"model.dim", m.dim},
        {"the head dim (model.head_dim, or model.dim / model.n_heads)", m.resolved_head_dim()},
        {"model.ffn_dim / parallel.tensor_parallel", m.ffn_dim / tp},
        {"training.micro_batch_size x training.seq_len",
         static_cast<int64_t>(t.micro_batch_size) * t.seq_len}};
    for (const auto& [what, value] : dims)
      LLM_CHECK(value % 16 == 0,
                "{}: training.precision = fp8 on cuda needs {} to be a multiple of 16 (cuBLASLt's "
                "FP8 GEMMs), got {}",
                at({"training.precision", "training.device"}), what, value);
  }
  // Pipeline parallelism: stages of whole blocks; a tied LM head would need
  // the embedding on both ends of the pipeline.
  const int pp = c.parallel.pipeline_parallel;
  LLM_CHECK(pp >= 1 && pp <= m.n_layers,
            "{}: parallel.pipeline_parallel must be in [1, model.n_layers = {}] (a stage holds "
            "whole blocks), got {}",
            at({"parallel.pipeline_parallel", "model.n_layers"}), m.n_layers, pp);
  LLM_CHECK(pp == 1 || !m.tie_embeddings,
            "{}: parallel.pipeline_parallel = {} needs model.tie_embeddings = false (the embedding "
            "sits on the first stage, the LM head on the last)",
            at({"parallel.pipeline_parallel", "model.tie_embeddings"}), pp);
  const ZenFlowConfig& z = c.zenflow;
  LLM_CHECK(z.select_interval.automatic() || z.update_interval.automatic() ||
                z.select_interval.value % z.update_interval.value == 0,
            "{}: zenflow.select_interval ({}) must be a multiple of zenflow.update_interval ({}): "
            "columns are chosen again only when the host holds no partial accumulation",
            at({"zenflow.select_interval", "zenflow.update_interval"}), z.select_interval.value,
            z.update_interval.value);
  LLM_CHECK(!(z.enabled && c.offload.delayed_update),
            "{}: offload.delayed_update is plain offload's overlap; with ZenFlow use "
            "zenflow.overlap_step",
            at({"offload.delayed_update", "zenflow.enabled"}));

  LLM_CHECK(!c.checkpoint.resume.empty(),
            "{}: checkpoint.resume must be auto, none or a checkpoint path",
            at("checkpoint.resume"));
}

}  // namespace llm
