// Config parsing, overrides, validation and dumping. Every table walks its own
// visit_fields() list, so adding a key is one line in config.h.
#include "config/config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "runtime/error.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// --- reading one value from a TOML node or from override text ---------------

void read_node(const toml::node& node, int& out, const std::string& key) {
  auto value = node.value_exact<int64_t>();
  LLM_CHECK(value.has_value(), "{}: expected an integer", key);
  LLM_CHECK(*value >= std::numeric_limits<int>::min() && *value <= std::numeric_limits<int>::max(),
            "{}: {} does not fit in a 32-bit integer", key, *value);
  out = static_cast<int>(*value);
}
void read_node(const toml::node& node, int64_t& out, const std::string& key) {
  auto value = node.value_exact<int64_t>();
  LLM_CHECK(value.has_value(), "{}: expected an integer", key);
  out = *value;
}
void read_node(const toml::node& node, double& out, const std::string& key) {
  LLM_CHECK(node.is_number(), "{}: expected a number", key);
  out = *node.value<double>();
}
void read_node(const toml::node& node, bool& out, const std::string& key) {
  auto value = node.value_exact<bool>();
  LLM_CHECK(value.has_value(), "{}: expected true or false", key);
  out = *value;
}
void read_node(const toml::node& node, std::string& out, const std::string& key) {
  auto value = node.value_exact<std::string>();
  LLM_CHECK(value.has_value(), "{}: expected a string", key);
  out = *value;
}

template <class T> T parse_number(const std::string& text, const std::string& key, const char* what) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
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

// --- walking the tables --------------------------------------------------------

void apply_table(Config& config, const toml::table& root, const std::string& origin) {
  std::set<std::string> tables;
  config.visit_tables([&](const char* table_name, auto& section) {
    tables.insert(table_name);
    const toml::node* node = root.get(table_name);
    if (!node) return;
    const toml::table* table = node->as_table();
    LLM_CHECK(table, "{}: [{}] must be a table", origin, table_name);
    std::set<std::string> known;
    section.visit_fields([&](const char* key, auto& field, const char*) {
      known.insert(key);
      if (const toml::node* value = table->get(key)) {
        read_node(*value, field, fmt::format("{}: {}.{}", origin, table_name, key));
      }
    });
    for (auto&& [key, value] : *table) {
      LLM_CHECK(known.count(std::string(key.str())), "{}: unknown key {}.{}", origin, table_name,
                key.str());
    }
  });
  for (auto&& [key, value] : root) {
    LLM_CHECK(tables.count(std::string(key.str())), "{}: unknown table or key '{}'", origin,
              key.str());
  }
}

void apply_override(Config& config, const std::string& assignment) {
  size_t eq = assignment.find('=');
  size_t dot = assignment.find('.');
  LLM_CHECK(eq != std::string::npos && dot != std::string::npos && dot < eq,
            "override '--{}': expected --section.key=value", assignment);
  std::string table_name = assignment.substr(0, dot);
  std::string key = assignment.substr(dot + 1, eq - dot - 1);
  std::string text = assignment.substr(eq + 1);
  bool found = false;
  config.visit_tables([&](const char* name, auto& section) {
    if (table_name != name) return;
    section.visit_fields([&](const char* field_key, auto& field, const char*) {
      if (key != field_key) return;
      read_text(text, field, fmt::format("--{}.{}", table_name, key));
      found = true;
    });
  });
  LLM_CHECK(found, "override '--{}': unknown key {}.{}", assignment, table_name, key);
}

void write_value(std::ostream& out, int value) { out << value; }
void write_value(std::ostream& out, int64_t value) { out << value; }
void write_value(std::ostream& out, bool value) { out << (value ? "true" : "false"); }
void write_value(std::ostream& out, double value) { out << fmt::format("{:.17g}", value); }
void write_value(std::ostream& out, const std::string& value) {
  out << toml::value<std::string>(value);
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
                    const std::vector<std::string>& overrides) {
  Config config;
  config.path = origin;
  config.name = fs::path(origin).stem().string();
  try {
    toml::table root = toml::parse(toml_text, origin);
    apply_table(config, root, origin);
  } catch (const toml::parse_error& e) {
    LLM_FAIL("{}:{}: {}", origin, e.source().begin.line, e.description());
  }
  for (const std::string& assignment : overrides) apply_override(config, assignment);
  config_validate(config);
  return config;
}

std::string Config::comm() const {
  if (parallel.comm != "auto") return parallel.comm;
  return device() == Device::cuda ? "nccl" : "mpi";
}

Config config_load(const std::string& path_or_name, const std::vector<std::string>& overrides) {
  fs::path path = find_config_file(path_or_name);
  std::ifstream in(path);
  LLM_CHECK(in, "{}: cannot read", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return config_parse(text.str(), path.string(), overrides);
}

void config_validate(const Config& c) {
  const std::string& f = c.path;
  const ModelConfig& m = c.model;
  LLM_CHECK(m.dim > 0, "{}: model.dim must be positive, got {}", f, m.dim);
  LLM_CHECK(m.n_layers > 0, "{}: model.n_layers must be positive, got {}", f, m.n_layers);
  LLM_CHECK(m.n_heads > 0, "{}: model.n_heads must be positive, got {}", f, m.n_heads);
  LLM_CHECK(m.n_kv_heads > 0 && m.n_heads % m.n_kv_heads == 0,
            "{}: model.n_kv_heads ({}) must divide model.n_heads ({})", f, m.n_kv_heads, m.n_heads);
  LLM_CHECK(m.dim % m.n_heads == 0, "{}: model.n_heads ({}) must divide model.dim ({})", f,
            m.n_heads, m.dim);
  LLM_CHECK((m.dim / m.n_heads) % 2 == 0,
            "{}: model.dim / model.n_heads = {} must be even for RoPE", f, m.dim / m.n_heads);
  LLM_CHECK(m.ffn_dim > 0, "{}: model.ffn_dim must be positive, got {}", f, m.ffn_dim);
  LLM_CHECK(m.vocab_size > 1, "{}: model.vocab_size must be at least 2, got {}", f, m.vocab_size);
  LLM_CHECK(m.rope_theta > 0, "{}: model.rope_theta must be positive", f);
  LLM_CHECK(m.norm_eps > 0, "{}: model.norm_eps must be positive", f);
  LLM_CHECK(m.init_std > 0, "{}: model.init_std must be positive", f);

  const TrainingConfig& t = c.training;
  LLM_CHECK(t.steps >= 0, "{}: training.steps must be >= 0, got {}", f, t.steps);
  LLM_CHECK(t.stop_at_step >= 0, "{}: training.stop_at_step must be >= 0", f);
  LLM_CHECK(t.batch_size > 0, "{}: training.batch_size must be positive", f);
  LLM_CHECK(t.micro_batch_size > 0, "{}: training.micro_batch_size must be positive", f);
  LLM_CHECK(t.batch_size % t.micro_batch_size == 0,
            "{}: training.batch_size ({}) must be a multiple of training.micro_batch_size ({})", f,
            t.batch_size, t.micro_batch_size);
  LLM_CHECK(t.seq_len > 0, "{}: training.seq_len must be positive", f);
  LLM_CHECK(t.lr > 0, "{}: training.lr must be positive", f);
  LLM_CHECK(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1,
            "{}: training.min_lr_ratio must lie in [0, 1], got {}", f, t.min_lr_ratio);
  LLM_CHECK(t.warmup_steps >= 0, "{}: training.warmup_steps must be >= 0", f);
  LLM_CHECK(t.lr_schedule == "cosine" || t.lr_schedule == "linear" || t.lr_schedule == "constant",
            "{}: training.lr_schedule must be cosine, linear or constant, got '{}'", f,
            t.lr_schedule);
  LLM_CHECK(t.weight_decay >= 0, "{}: training.weight_decay must be >= 0", f);
  LLM_CHECK(t.beta1 >= 0 && t.beta1 < 1, "{}: training.beta1 must lie in [0, 1)", f);
  LLM_CHECK(t.beta2 >= 0 && t.beta2 < 1, "{}: training.beta2 must lie in [0, 1)", f);
  LLM_CHECK(t.adam_eps > 0, "{}: training.adam_eps must be positive", f);
  LLM_CHECK(t.grad_clip >= 0, "{}: training.grad_clip must be >= 0", f);
  LLM_CHECK(t.eval_interval >= 0, "{}: training.eval_interval must be >= 0", f);
  LLM_CHECK(t.eval_sequences >= 0, "{}: training.eval_sequences must be >= 0", f);
  LLM_CHECK(t.activation_checkpointing == "none" || t.activation_checkpointing == "full" ||
                t.activation_checkpointing == "selective",
            "{}: training.activation_checkpointing must be none, full or selective, got '{}'", f,
            t.activation_checkpointing);
  LLM_CHECK(t.checkpoint_every >= 1, "{}: training.checkpoint_every must be >= 1, got {}", f,
            t.checkpoint_every);
  LLM_CHECK(t.precision == "fp32" || t.precision == "bf16",
            "{}: training.precision must be fp32 or bf16, got '{}'", f, t.precision);
  LLM_CHECK(c.parallel.reduce_dtype == "fp32" || c.parallel.reduce_dtype == "bf16",
            "{}: parallel.reduce_dtype must be fp32 or bf16, got '{}'", f, c.parallel.reduce_dtype);
  LLM_CHECK(t.sample_tokens >= 0, "{}: training.sample_tokens must be >= 0", f);
  LLM_CHECK(t.device == "cpu" || t.device == "cuda", "{}: training.device must be cpu or cuda, got '{}'",
            f, t.device);
  LLM_CHECK(c.parallel.comm == "auto" || c.parallel.comm == "mpi" || c.parallel.comm == "nccl",
            "{}: parallel.comm must be auto, mpi or nccl, got '{}'", f, c.parallel.comm);
  LLM_CHECK(c.parallel.comm != "nccl" || t.device == "cuda",
            "{}: parallel.comm = nccl needs training.device = cuda", f);

  LLM_CHECK(!c.data.train.empty(), "{}: data.train must name the training shards", f);

  static const std::set<std::string> modes = {"ddp", "zero1", "zero2", "zero3", "fsdp", "hybrid"};
  LLM_CHECK(modes.count(c.parallel.mode),
            "{}: parallel.mode must be ddp, zero1, zero2, zero3, fsdp or hybrid, got '{}'", f,
            c.parallel.mode);
  LLM_CHECK(c.parallel.shard_group_size >= 0, "{}: parallel.shard_group_size must be >= 0", f);
  const CheckpointConfig& k = c.checkpoint;
  LLM_CHECK(k.interval >= 0, "{}: checkpoint.interval must be >= 0", f);
  LLM_CHECK(k.keep_last >= 0, "{}: checkpoint.keep_last must be >= 0", f);
  LLM_CHECK(k.keep_every >= 0, "{}: checkpoint.keep_every must be >= 0", f);
  LLM_CHECK(!k.resume.empty(), "{}: checkpoint.resume must be auto, none or a checkpoint path", f);
  LLM_CHECK(c.logging.log_interval > 0, "{}: logging.log_interval must be positive", f);
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
