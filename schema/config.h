// Typed configuration: one struct per TOML table (model_config.h,
// training_config.h, run_tables.h; key_types.h the keys' value types), each
// field with a default and a one-line doc, listed once in that table's
// visit_fields(). Parsing, CLI
// overrides (--section.key=value), validation and dumping all walk the same
// lists, so a key exists in exactly one place. A key with fixed choices is an
// enum with one name table: strings are parsed once, here, never compared later.
// Precedence: CLI override > TOML file > imported (the model keys of
// model.init_from's config.json, which must agree with any set above) >
// struct default. Config records which keys the file sets and which were
// imported, so an error names where a value came from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "schema/key_rules.h"
#include "schema/key_types.h"
#include "schema/model_config.h"
#include "schema/run_tables.h"
#include "schema/training_config.h"

namespace llm {

struct Config {
  std::string name;  // the config file's stem, e.g. "tiny"
  std::string path;  // the file it was read from
  // The command-line overrides applied over the file ("section.key=value"),
  // so that errors blame the command line for the keys they set.
  std::vector<std::string> overrides;
  // The keys the file sets ("table.key"): a value there, not a default.
  std::set<std::string> file_keys;
  // Keys the user left out that took their value from elsewhere
  // (config_import_model: model.init_from's config.json): "table.key" -> where.
  std::map<std::string, std::string> imported;
  ModelConfig model;
  TrainingConfig training;
  DataConfig data;
  ParallelConfig parallel;
  OffloadConfig offload;
  ZenFlowConfig zenflow;
  CheckpointConfig checkpoint;
  LoggingConfig logging;

  template <class V>
  void visit_tables(V&& v) {
    v("model", model);
    v("training", training);
    v("data", data);
    v("parallel", parallel);
    v("offload", offload);
    v("zenflow", zenflow);
    v("checkpoint", checkpoint);
    v("logging", logging);
  }
  // The same walk over a const config: every table passed as const.
  template <class V>
  void visit_tables(V&& v) const {
    const_cast<Config*>(this)->visit_tables(
        [&](const char* table_name, auto& table) { v(table_name, std::as_const(table)); });
  }

  // The run directory: checkpoint.dir, else checkpoints/<name>.
  std::string run_dir() const;
  Precision precision() const { return training.precision; }
  Device device() const { return training.device; }
  // parallel.comm with auto resolved: nccl on cuda, mpi on cpu.
  CommBackend comm() const;
  // The optimizer's state on the host: offload.optimizer = cpu, or ZenFlow.
  bool offloads_optimizer() const {
    return offload.optimizer == OffloadTarget::cpu || zenflow.enabled;
  }
};

// What fills keys from elsewhere once the file and the command line are read,
// before validation: ./train passes hf_import_architecture (interop/), which
// takes the architecture from model.init_from's config.json.
using ConfigImport = void (*)(Config&);

// Finds the file (as given, else in configs/, adding .toml if missing), parses
// it, applies overrides of the form "section.key=value", runs `import` (when
// given) and validates. Errors name the file and the key.
Config config_load(const std::string& path_or_name, const std::vector<std::string>& overrides,
                   ConfigImport import = nullptr);

// Applies further "section.key=value" assignments to a loaded config, as if
// they followed the command line's (appended to config.overrides, so errors
// and the dump name them); the caller validates. The planner derives each
// row's config this way from the flags it prints.
void config_apply_overrides(Config& config, const std::vector<std::string>& overrides);

// Config from TOML text (for tests, and a checkpoint's saved config); `origin`
// names it in errors.
Config config_parse(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides, ConfigImport import = nullptr);

// Where the user set `key` ("table.key"): the command-line override that set
// it last ("command line --model.dim=64"), else the file when it sets it;
// nullopt for a key at its default or imported.
std::optional<std::string> config_user_origin(const Config& config, std::string_view key);

// Model key `key` ("dim", ...) of `model` as the dumped config writes it.
std::string config_model_value(const ModelConfig& model, std::string_view key);

// Takes the model keys `keys` ("dim", ...) from `source`, read from `origin`
// (a checkpoint's config.json): a key the user did not set gets source's
// value and `origin` as where it came from (errors, the log); a key the user
// set must hold source's value, else a one-line error naming both values and
// where each came from.
void config_import_model(Config& config, const ModelConfig& source,
                         std::span<const std::string_view> keys, const std::string& origin);

// Every key as a Markdown table: name, type, default and its one-line doc,
// from the same declarations the parser uses (`./train config`; docs/configuration.md's
// key table is this text).
std::string config_reference();

// The resolved configuration as TOML text (logged, saved with checkpoints).
std::string config_to_toml(const Config& config);

// What changing `key` ("table.key") does to a resumed run, from the key's
// rule or its table's; nullopt for a key this build does not know.
std::optional<OnResume> config_key_on_resume(std::string_view key);

// The current name of a key ("table.key") that an earlier version called
// `key` (training.activation_checkpointing is training.recompute: a
// "checkpoint" is saved state only); nullopt for any other key. A resume
// reads a saved config through it; a config or command line using an old
// name is refused with the new one (unknown_key_hint).
std::optional<std::string> renamed_key(std::string_view key);

// What follows "unknown key 'name'" in an error: the new name of a renamed
// key, else the closest of `known` ("table.key" each).
std::string unknown_key_hint(const std::string& name, const std::vector<std::string>& known);

}  // namespace llm
