// Config parsing, overrides, validation and dumping. Every table walks its own
// visit_fields() list, so adding a key is one line in config.h.
#include "config/config.h"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "config/toml_tables.h"
#include "runtime/cli_values.h"
#include "runtime/error.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// --- reading one value from override text ------------------------------------

template <class T>
std::string integer_range() {
  return fmt::format("[{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
}

template <class T>
T parse_number(const std::string& text, const std::string& key, const char* what) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if constexpr (std::is_integral_v<T>) {
    LLM_CHECK(ec != std::errc::result_out_of_range,
              "{}: {} is out of range for a {}-bit integer {}", key, text, 8 * sizeof(T),
              integer_range<T>());
  }
  LLM_CHECK(ec == std::errc() && ptr == end && !text.empty(), "{}: expected {}, got '{}'", key,
            what, text);
  return value;
}

void read_text(const std::string& text, int& out, const std::string& key) {
  out = parse_number<int>(text, key, "an integer");
}
void read_text(const std::string& text, int64_t& out, const std::string& key) {
  out = parse_number<int64_t>(text, key, "an integer");
}
void read_text(const std::string& text, double& out, const std::string& key) {
  out = parse_number<double>(text, key, "a number");
}
void read_text(const std::string& text, bool& out, const std::string& key) {
  LLM_CHECK(text == "true" || text == "false", "{}: expected true or false, got '{}'", key, text);
  out = text == "true";
}
void read_text(const std::string& text, std::string& out, const std::string&) { out = text; }
void read_text(const std::string& text, AutoCount& out, const std::string& key) {
  if (text == "auto") {
    out.value = 0;
    return;
  }
  out.value = parse_number<int>(text, key, "a positive integer or auto");
  LLM_CHECK(out.value >= 1, "{}: expected a positive integer or auto, got '{}'", key, text);
}
void read_text(const std::string& text, SwitchOrPath& out, const std::string& key) {
  LLM_CHECK(!text.empty(), "{}: expected true, false or a directory", key);
  if (text == "true" || text == "false")
    out = {text == "true", ""};
  else
    out = {true, text};
}
template <NamedEnum E>
void read_text(const std::string& text, E& out, const std::string& key) {
  out = parse_enum<E>(text, key);
}

// --- walking the tables --------------------------------------------------------

// Every key as "table.key", for "did you mean" suggestions.
std::vector<std::string> all_keys(Config& config) {
  std::vector<std::string> keys;
  config.visit_tables([&](const char* table_name, auto& section) {
    section.visit_fields([&](const char* key, auto&, const char*) {
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
    section.visit_fields([&](const char* field_key, auto& field, const char*) {
      if (key != field_key) return;
      read_text(text, field, fmt::format("command line --{}.{}", table_name, key));
      found = true;
    });
  });
  const std::string name = assignment.substr(0, eq);
  LLM_CHECK(found, "{}: unknown key '{}'{}", origin, name, did_you_mean(name, all_keys(config)));
}

void write_value(std::ostream& out, int value) { out << value; }
void write_value(std::ostream& out, int64_t value) { out << value; }
void write_value(std::ostream& out, bool value) { out << (value ? "true" : "false"); }
// The shortest text that reads back as the same double (0.003, not
// 0.0030000000000000001), always a TOML float (1.0, not 1).
void write_value(std::ostream& out, double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  out << text;
}
void write_value(std::ostream& out, AutoCount value) {
  if (value.automatic())
    out << "\"auto\"";
  else
    out << value.value;
}
void write_value(std::ostream& out, const std::string& value) {
  out << toml::value<std::string>(value);
}
void write_value(std::ostream& out, const SwitchOrPath& value) {
  if (value.path.empty())
    write_value(out, value.on);
  else
    write_value(out, value.path);
}
template <NamedEnum E>
void write_value(std::ostream& out, E value) {
  out << toml::value<std::string>(to_string(value));
}

fs::path find_config_file(const std::string& path_or_name) {
  for (fs::path candidate : {fs::path(path_or_name), fs::path("train_configs") / path_or_name,
                             fs::path("train_configs") / (path_or_name + ".toml")}) {
    if (fs::is_regular_file(candidate)) return candidate;
  }
  LLM_FAIL("config '{}' not found (looked for it as given and in train_configs/)", path_or_name);
}

}  // namespace

std::string Config::run_dir() const {
  return checkpoint.dir.empty() ? (fs::path("checkpoints") / name).string() : checkpoint.dir;
}

Config config_parse(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides) {
  Config config;
  config.path = origin;
  config.name = fs::path(origin).stem().string();
  read_toml_tables(config, parse_toml(toml_text, origin), origin, Omitted::keeps_default);
  config_apply_overrides(config, overrides);
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

Config config_load(const std::string& path_or_name, const std::vector<std::string>& overrides) {
  fs::path path = find_config_file(path_or_name);
  std::ifstream in(path);
  LLM_CHECK(in, "{}: cannot read", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return config_parse(text.str(), path.string(), overrides);
}

namespace {

// Where a key's value came from, for validation errors: the command-line
// override that set it (the last one wins), else the config file.
class KeyOrigin {
 public:
  explicit KeyOrigin(const Config& config) : config_(config) {}
  std::string operator()(std::initializer_list<std::string_view> keys) const {
    for (std::string_view key : keys) {
      for (auto it = config_.overrides.rbegin(); it != config_.overrides.rend(); ++it) {
        if (it->size() > key.size() && it->compare(0, key.size(), key) == 0 &&
            (*it)[key.size()] == '=') {
          return fmt::format("command line --{}", *it);
        }
      }
    }
    return config_.path;
  }
  std::string operator()(std::string_view key) const { return (*this)({key}); }

 private:
  const Config& config_;
};

// The range a float key must lie in (finiteness is checked for all of them).
struct Range {
  double low, high;
  bool low_open, high_open;
  bool contains(double x) const {
    return (low_open ? x > low : x >= low) && (high_open ? x < high : x <= high);
  }
  std::string text() const {
    if (std::isinf(high)) return fmt::format("{} {}", low_open ? ">" : ">=", low);
    return fmt::format("in {}{}, {}{}", low_open ? '(' : '[', low, high, high_open ? ')' : ']');
  }
};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Range kPositive{0, kInf, true, true}, kNonNegative{0, kInf, false, true};
constexpr Range kUnitClosed{0, 1, false, false}, kUnitHalfOpen{0, 1, false, true};
constexpr Range kUnitOpen{0, 1, true, true};

}  // namespace

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
  // Every float key, present or future: finite, named with its value.
  Config fields = c;
  fields.visit_tables([&](const char* table_name, auto& section) {
    section.visit_fields([&](const char* key, auto& field, const char*) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, double>) {
        const std::string name = fmt::format("{}.{}", table_name, key);
        LLM_CHECK(std::isfinite(field), "{}: {} must be a finite number, got {}", at(name), name,
                  field);
      }
    });
  });
  auto check_range = [&](const char* key, double value, Range range) {
    LLM_CHECK(range.contains(value), "{}: {} must be {}, got {}", at(key), key, range.text(),
              value);
  };

  const ModelConfig& m = c.model;
  LLM_CHECK(m.dim > 0, "{}: model.dim must be positive, got {}", at("model.dim"), m.dim);
  LLM_CHECK(m.n_layers > 0, "{}: model.n_layers must be positive, got {}", at("model.n_layers"),
            m.n_layers);
  LLM_CHECK(m.n_heads > 0, "{}: model.n_heads must be positive, got {}", at("model.n_heads"),
            m.n_heads);
  LLM_CHECK(m.n_kv_heads > 0 && m.n_heads % m.n_kv_heads == 0,
            "{}: model.n_kv_heads ({}) must divide model.n_heads ({})",
            at({"model.n_kv_heads", "model.n_heads"}), m.n_kv_heads, m.n_heads);
  LLM_CHECK(m.dim % m.n_heads == 0, "{}: model.n_heads ({}) must divide model.dim ({})",
            at({"model.n_heads", "model.dim"}), m.n_heads, m.dim);
  LLM_CHECK((m.dim / m.n_heads) % 2 == 0,
            "{}: model.dim / model.n_heads = {} must be even for RoPE",
            at({"model.dim", "model.n_heads"}), m.dim / m.n_heads);
  LLM_CHECK(m.ffn_dim > 0, "{}: model.ffn_dim must be positive, got {}", at("model.ffn_dim"),
            m.ffn_dim);
  LLM_CHECK(m.vocab_size > 1, "{}: model.vocab_size must be at least 2, got {}",
            at("model.vocab_size"), m.vocab_size);
  check_range("model.rope_theta", m.rope_theta, kPositive);
  check_range("model.norm_eps", m.norm_eps, kUnitOpen);
  check_range("model.init_std", m.init_std, kPositive);

  const TrainingConfig& t = c.training;
  LLM_CHECK(t.steps >= 0, "{}: training.steps must be >= 0, got {}", at("training.steps"), t.steps);
  LLM_CHECK(t.stop_at_step >= 0, "{}: training.stop_at_step must be >= 0, got {}",
            at("training.stop_at_step"), t.stop_at_step);
  LLM_CHECK(t.batch_size > 0, "{}: training.batch_size must be positive, got {}",
            at("training.batch_size"), t.batch_size);
  LLM_CHECK(t.micro_batch_size > 0, "{}: training.micro_batch_size must be positive, got {}",
            at("training.micro_batch_size"), t.micro_batch_size);
  LLM_CHECK(t.batch_size % t.micro_batch_size == 0,
            "{}: training.batch_size ({}) must be a multiple of training.micro_batch_size ({})",
            at({"training.batch_size", "training.micro_batch_size"}), t.batch_size,
            t.micro_batch_size);
  LLM_CHECK(t.seq_len > 0, "{}: training.seq_len must be positive, got {}", at("training.seq_len"),
            t.seq_len);
  check_range("training.lr", t.lr, kPositive);
  check_range("training.min_lr_ratio", t.min_lr_ratio, kUnitClosed);
  LLM_CHECK(t.warmup_steps >= 0, "{}: training.warmup_steps must be >= 0, got {}",
            at("training.warmup_steps"), t.warmup_steps);
  check_range("training.weight_decay", t.weight_decay, kNonNegative);
  check_range("training.beta1", t.beta1, kUnitHalfOpen);
  check_range("training.beta2", t.beta2, kUnitHalfOpen);
  check_range("training.adam_eps", t.adam_eps, kPositive);
  check_range("training.grad_clip", t.grad_clip, kNonNegative);
  for (const auto& [key, factor] :
       {std::pair{"training.spike_loss_factor", t.spike_loss_factor},
        std::pair{"training.spike_grad_norm_factor", t.spike_grad_norm_factor}}) {
    check_range(key, factor, kNonNegative);
    LLM_CHECK(factor == 0 || factor > 1, "{}: {} must be 0 (off) or above 1, got {}", at(key), key,
              factor);
  }
  LLM_CHECK(t.spike_window >= 10, "{}: training.spike_window must be >= 10, got {}",
            at("training.spike_window"), t.spike_window);
  LLM_CHECK(t.eval_interval >= 0, "{}: training.eval_interval must be >= 0, got {}",
            at("training.eval_interval"), t.eval_interval);
  LLM_CHECK(t.eval_sequences >= 0, "{}: training.eval_sequences must be >= 0, got {}",
            at("training.eval_sequences"), t.eval_sequences);
  LLM_CHECK(t.checkpoint_every >= 1, "{}: training.checkpoint_every must be >= 1, got {}",
            at("training.checkpoint_every"), t.checkpoint_every);
  LLM_CHECK(t.sample_tokens >= 0, "{}: training.sample_tokens must be >= 0, got {}",
            at("training.sample_tokens"), t.sample_tokens);
  LLM_CHECK(c.parallel.comm != CommBackend::nccl || t.device == Device::cuda,
            "{}: parallel.comm = nccl needs training.device = cuda",
            at({"parallel.comm", "training.device"}));

  LLM_CHECK(!c.data.train.empty(), "{}: data.train must name the training shards",
            at("data.train"));

  parse_duration_seconds(c.parallel.timeout, at("parallel.timeout") + ": parallel.timeout");
  LLM_CHECK(c.parallel.flight_recorder_entries >= 1,
            "{}: parallel.flight_recorder_entries must be at least 1, got {}",
            at("parallel.flight_recorder_entries"), c.parallel.flight_recorder_entries);
  LLM_CHECK(c.parallel.shard_group_size >= 0, "{}: parallel.shard_group_size must be >= 0, got {}",
            at("parallel.shard_group_size"), c.parallel.shard_group_size);
  // Tensor parallelism splits heads (whole, kv heads included), ffn columns
  // and the vocabulary; sequence parallelism splits each micro-batch's rows.
  const int tp = c.parallel.tensor_parallel;
  LLM_CHECK(tp >= 1, "{}: parallel.tensor_parallel must be >= 1, got {}",
            at("parallel.tensor_parallel"), tp);
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
        {"model.dim / model.n_heads (the head dim)", m.dim / m.n_heads},
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
  LLM_CHECK(z.topk_ratio > 0 && z.topk_ratio <= 1,
            "{}: zenflow.topk_ratio must be in (0, 1], got {}", at("zenflow.topk_ratio"),
            z.topk_ratio);
  LLM_CHECK(z.full_warm_up_rounds >= 0, "{}: zenflow.full_warm_up_rounds must be >= 0, got {}",
            at("zenflow.full_warm_up_rounds"), z.full_warm_up_rounds);
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

  const CheckpointConfig& k = c.checkpoint;
  LLM_CHECK(k.interval >= 0, "{}: checkpoint.interval must be >= 0, got {}",
            at("checkpoint.interval"), k.interval);
  LLM_CHECK(k.keep_last >= 0, "{}: checkpoint.keep_last must be >= 0, got {}",
            at("checkpoint.keep_last"), k.keep_last);
  LLM_CHECK(k.keep_every >= 0, "{}: checkpoint.keep_every must be >= 0, got {}",
            at("checkpoint.keep_every"), k.keep_every);
  LLM_CHECK(!k.resume.empty(), "{}: checkpoint.resume must be auto, none or a checkpoint path",
            at("checkpoint.resume"));
  check_range("logging.peak_tflops", c.logging.peak_tflops, kNonNegative);
  LLM_CHECK(c.logging.log_interval > 0, "{}: logging.log_interval must be positive, got {}",
            at("logging.log_interval"), c.logging.log_interval);
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

std::string escape_table_cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
    text.replace(at, 1, "\\|");
  }
  return text;
}

}  // namespace

std::string config_reference() {
  Config defaults;
  std::ostringstream out;
  out << "| key | type | default | meaning |\n|---|---|---|---|\n";
  defaults.visit_tables([&](const char* table_name, auto& section) {
    section.visit_fields([&](const char* key, auto& field, const char* doc) {
      std::ostringstream value;
      write_value(value, field);
      out << "| `" << table_name << "." << key << "` | " << escape_table_cell(type_name(field))
          << " | `" << value.str() << "` | " << escape_table_cell(doc) << " |\n";
    });
  });
  return out.str();
}

std::string config_to_toml(Config& config) {
  std::ostringstream out;
  config.visit_tables([&](const char* table_name, auto& section) {
    out << "[" << table_name << "]\n";
    section.visit_fields([&](const char* key, auto& field, const char*) {
      out << key << " = ";
      write_value(out, field);
      out << "\n";
    });
    out << "\n";
  });
  return out.str();
}

}  // namespace llm
