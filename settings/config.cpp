// Config parsing, overrides, validation and dumping. Every table walks its own
// visit_fields() list, so adding a key is one line in config.h.
#include "settings/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "settings/key_values.h"
#include "settings/toml_tables.h"
#include "runtime/cli_values.h"
#include "runtime/error.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// --- walking the tables --------------------------------------------------------

// Every key as "table.key", for "did you mean" suggestions.
std::vector<std::string> all_keys(const Config& config) {
  std::vector<std::string> keys;
  config.visit_tables([&](const char* table_name, auto& section) {
    visit_keys(section, [&](const char* key, auto&, const char*, const KeyRule&) {
      keys.push_back(fmt::format("{}.{}", table_name, key));
    });
  });
  return keys;
}

void apply_override(Config& config, const std::string& assignment) {
  const std::string origin = fmt::format("command line --{}", assignment);
  size_t eq = assignment.find('=');
  size_t dot = assignment.find('.');
  LLM_CHECK(eq != std::string::npos && dot != std::string::npos && dot < eq,
            "{}: expected --section.key=value or --section.key value", origin);
  std::string table_name = assignment.substr(0, dot);
  std::string key = assignment.substr(dot + 1, eq - dot - 1);
  std::string text = assignment.substr(eq + 1);
  bool found = false;
  config.visit_tables([&](const char* name, auto& section) {
    if (table_name != name) return;
    visit_keys(section, [&](const char* field_key, auto& field, const char*, const KeyRule&) {
      if (key != field_key) return;
      read_key_text(text, field, fmt::format("command line --{}.{}", table_name, key));
      found = true;
    });
  });
  const std::string name = assignment.substr(0, eq);
  LLM_CHECK(found, "{}: unknown key '{}'{}", origin, name,
            unknown_key_hint(name, all_keys(config)));
}

fs::path find_config_file(const std::string& path_or_name) {
  for (fs::path candidate : {fs::path(path_or_name), fs::path("configs") / path_or_name,
                             fs::path("configs") / (path_or_name + ".toml")}) {
    if (fs::is_regular_file(candidate)) return candidate;
  }
  LLM_FAIL("config '{}' not found (looked for it as given and in configs/)", path_or_name);
}

}  // namespace

std::string Config::run_dir() const {
  return checkpoint.dir.empty() ? (fs::path("checkpoints") / name).string() : checkpoint.dir;
}

Config config_parse(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides, ConfigImport import) {
  Config config;
  config.path = origin;
  config.name = fs::path(origin).stem().string();
  const toml::table root = parse_toml(toml_text, origin);
  read_toml_tables(config, root, origin, Omitted::keeps_default);
  for (auto&& [table_name, table] : root) {  // every table is one read_toml_tables knows
    for (auto&& [key, value] : *table.as_table())
      config.file_keys.insert(fmt::format("{}.{}", table_name.str(), key.str()));
  }
  config_apply_overrides(config, overrides);
  if (import) import(config);
  config_validate(config);
  return config;
}

void config_apply_overrides(Config& config, const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) apply_override(config, assignment);
  config.overrides.insert(config.overrides.end(), overrides.begin(), overrides.end());
}

CommBackend Config::comm() const {
  if (parallel.comm != CommBackend::automatic) return parallel.comm;
  return device() == Device::cuda ? CommBackend::nccl : CommBackend::mpi;
}

Config config_load(const std::string& path_or_name, const std::vector<std::string>& overrides,
                   ConfigImport import) {
  fs::path path = find_config_file(path_or_name);
  std::ifstream in(path);
  LLM_CHECK(in, "{}: cannot read", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return config_parse(text.str(), path.string(), overrides, import);
}

namespace {

// The command-line override that set `key` last, if any.
std::optional<std::string> override_of(const Config& config, std::string_view key) {
  for (auto it = config.overrides.rbegin(); it != config.overrides.rend(); ++it) {
    if (it->size() > key.size() && it->compare(0, key.size(), key) == 0 &&
        (*it)[key.size()] == '=') {
      return fmt::format("command line --{}", *it);
    }
  }
  return std::nullopt;
}

// Where a key's value came from, for validation errors: the command-line
// override that set it (the last one wins), else the config file when it
// sets it, else where it was imported from, else the config file (a default).
class KeyOrigin {
 public:
  explicit KeyOrigin(const Config& config) : config_(config) {}
  std::string operator()(std::initializer_list<std::string_view> keys) const {
    for (std::string_view key : keys) {
      if (std::optional<std::string> origin = override_of(config_, key)) return *origin;
    }
    for (std::string_view key : keys) {
      if (config_.file_keys.contains(std::string(key))) return config_.path;
      if (auto imported = config_.imported.find(std::string(key));
          imported != config_.imported.end())
        return imported->second;
    }
    return config_.path;
  }
  std::string operator()(std::string_view key) const { return (*this)({key}); }

 private:
  const Config& config_;
};

// `table`'s key `key` as the dumped config writes it, through `visit`.
template <class Table, class Visit>
void visit_key(Table& table, std::string_view key, Visit&& visit) {
  bool found = false;
  visit_keys(table, [&](const char* name, auto& field, const char*, const KeyRule&) {
    if (key != name) return;
    visit(field);
    found = true;
  });
  LLM_CHECK(found, "no key '{}' in this table", key);
}

}  // namespace

std::optional<std::string> config_user_origin(const Config& config, std::string_view key) {
  if (std::optional<std::string> origin = override_of(config, key)) return origin;
  if (config.file_keys.contains(std::string(key))) return config.path;
  return std::nullopt;
}

std::string config_model_value(const ModelConfig& model, std::string_view key) {
  std::ostringstream text;
  visit_key(model, key, [&](const auto& value) { write_key_value(text, value); });
  return text.str();
}

void config_import_model(Config& config, const ModelConfig& source,
                         std::span<const std::string_view> keys, const std::string& origin) {
  for (std::string_view key : keys) {
    const std::string name = fmt::format("model.{}", key);
    visit_key(source, key, [&](const auto& theirs) {
      visit_key(config.model, key, [&](auto& ours) {
        if constexpr (std::is_same_v<std::decay_t<decltype(ours)>,
                                     std::decay_t<decltype(theirs)>>) {
          if (const std::optional<std::string> set_at = config_user_origin(config, name)) {
            if (ours == theirs) return;
            LLM_FAIL("{}: {} = {} but {} says {}; leave {} out to take the checkpoint's", *set_at,
                     name, config_model_value(config.model, key), origin,
                     config_model_value(source, key), name);
          }
          ours = theirs;
          config.imported[name] = origin;
        }
      });
    });
  }
}

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

  parse_duration_seconds(c.parallel.timeout, at("parallel.timeout") + ": parallel.timeout");
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

namespace {

// The type of a key's value, as the reference table names it.
const char* type_name(int) { return "integer"; }
const char* type_name(int64_t) { return "integer"; }
const char* type_name(bool) { return "bool"; }
const char* type_name(double) { return "float"; }
const char* type_name(const std::string&) { return "string"; }
const char* type_name(AutoCount) { return "integer or \"auto\""; }
const char* type_name(const SwitchOrPath&) { return "bool or a directory"; }
template <NamedEnum E>
std::string type_name(E) {
  return "one of " + enum_choices<E>();
}

const char* on_resume_text(OnResume on_resume) {
  switch (on_resume) {
    case OnResume::same_trajectory:
      return "same run";
    case OnResume::changes_trajectory:
      return "changes the run";
    case OnResume::changes_model:
      return "refused";
  }
  return "?";
}

std::string escape_table_cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
    text.replace(at, 1, "\\|");
  }
  return text;
}

}  // namespace

std::string config_reference() {
  const Config defaults;
  std::ostringstream out;
  out << "| key | type | default | range | on resume | meaning |\n|---|---|---|---|---|---|\n";
  defaults.visit_tables([&](const char* table_name, const auto& section) {
    visit_keys(
        section, [&](const char* key, const auto& field, const char* doc, const KeyRule& rule) {
          std::ostringstream value;
          write_key_value(value, field);
          const std::string range = rule.range.unbounded() ? "" : rule.range.text();
          const OnResume on_resume =
              rule.has_on_resume ? rule.on_resume : std::decay_t<decltype(section)>::kOnResume;
          out << "| `" << table_name << "." << key << "` | " << escape_table_cell(type_name(field))
              << " | `" << value.str() << "` | " << range << " | " << on_resume_text(on_resume)
              << " | " << escape_table_cell(doc) << " |\n";
        });
  });
  return out.str();
}

std::string config_to_toml(const Config& config) {
  std::ostringstream out;
  config.visit_tables([&](const char* table_name, const auto& section) {
    out << "[" << table_name << "]\n";
    visit_keys(section, [&](const char* key, const auto& field, const char*, const KeyRule&) {
      out << key << " = ";
      write_key_value(out, field);
      out << "\n";
    });
    out << "\n";
  });
  return out.str();
}

std::optional<OnResume> config_key_on_resume(std::string_view key) {
  std::optional<OnResume> found;
  const Config defaults;
  defaults.visit_tables([&](const char* table_name, const auto& section) {
    visit_keys(section, [&](const char* name, const auto&, const char*, const KeyRule& rule) {
      if (key != fmt::format("{}.{}", table_name, name)) return;
      found = rule.has_on_resume ? rule.on_resume : std::decay_t<decltype(section)>::kOnResume;
    });
  });
  return found;
}

std::optional<std::string> renamed_key(std::string_view key) {
  static const std::pair<std::string_view, std::string_view> kRenamed[] = {
      {"training.activation_checkpointing", "training.recompute"},
      {"training.checkpoint_every", "training.recompute_every"},
  };
  for (const auto& [old_name, new_name] : kRenamed)
    if (key == old_name) return std::string(new_name);
  return std::nullopt;
}

std::string unknown_key_hint(const std::string& name, const std::vector<std::string>& known) {
  if (const std::optional<std::string> renamed = renamed_key(name))
    return fmt::format(" (renamed '{}')", *renamed);
  return did_you_mean(name, known);
}

}  // namespace llm
