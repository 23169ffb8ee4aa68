// Save, load and prune sharded checkpoints (see checkpoint.h).
#include "parallel/checkpoint.h"

#include <zlib.h>

#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "data/tokenizer.h"
#include "runtime/error.h"
#include "runtime/file_io.h"
#include "runtime/progress.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "llm-train checkpoint v1";

// The CRC-32 of bytes that follow those whose CRC-32 is `crc` (checksum of
// a concatenation, piece by piece).
uint32_t checksum_update(uint32_t crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes 32-bit lengths
    uInt chunk = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, chunk));
    p += chunk;
    bytes -= chunk;
  }
  return crc;
}

uint32_t checksum(const void* data, size_t bytes) {
  return checksum_update(static_cast<uint32_t>(crc32(0L, Z_NULL, 0)), data, bytes);
}

// A checkpoint's bytes moving to or from disk, on rank 0's terminal when
// slow; the caller logs the result.
ProgressOptions transfer_options(bool enabled) {
  ProgressOptions options;
  options.enabled = enabled;
  options.unit = ProgressUnit::bytes;
  options.style = ProgressStyle::transient;
  options.show_after = 2;
  return options;
}

std::string step_name(int step) { return "step_" + std::to_string(step); }

// A record holds params, m and v of `repeats` blocks of `count` elements of
// one unit of the whole model, block i starting at begin + i * stride, back
// to back (3 * repeats * count floats). Each owned slice is written as the
// whole model's runs it covers (one per tensor piece, a strided one for a
// row-parallel matrix's columns); replicated tensors only by the first
// tensor-parallel rank. Records are streamed to the file one by one (no
// copy of the whole shard in memory); a slow write shows as `label` on this
// rank's terminal when `show_progress`.
json write_shard(const std::string& path, const std::vector<OwnedSlice>& slices,
                 const ParameterLayout& layout, const std::string& label, bool show_progress) {
  struct Piece {
    const OwnedSlice* slice;
    GlobalRun run;
    size_t bytes;  // of each of params, m and v
  };
  std::vector<Piece> pieces;
  uint64_t total = 0;
  for (const OwnedSlice& s : slices) {
    for (const GlobalRun& run : layout_global_runs(layout, s.unit, s.begin, s.count)) {
      if (run.replicated && layout.slice.tp_rank > 0) continue;
      pieces.push_back({&s, run, run.repeats * run.length * sizeof(float)});
      total += 3 * pieces.back().bytes;
    }
  }
  Progress progress(label, total, transfer_options(show_progress));
  SyncedFileWriter file(path);
  uint32_t file_crc = checksum(nullptr, 0);
  json records = json::array();
  std::vector<float> state[3];
  const OwnedSlice* on_host = nullptr;  // the slice `state` holds
  std::string record_bytes;
  for (const Piece& piece : pieces) {
    const OwnedSlice& s = *piece.slice;
    if (on_host != &s) {
      const float* sources[3] = {s.params, s.m, s.v};
      for (int part = 0; part < 3; ++part) {
        state[part].resize(s.count);
        s.memory->to_host(state[part].data(), sources[part], s.count * sizeof(float));
      }
      on_host = &s;
    }
    const GlobalRun& run = piece.run;
    const size_t n = piece.bytes;
    record_bytes.resize(3 * n);
    for (int part = 0; part < 3; ++part) {
      std::memcpy(record_bytes.data() + part * n, state[part].data() + run.local, n);
    }
    json record = {{"unit", run.unit},
                   {"begin", run.begin},
                   {"count", run.length},
                   {"offset", file.size()},
                   {"crc32", checksum(record_bytes.data(), 3 * n)}};
    if (run.repeats > 1) {
      record["repeats"] = run.repeats;
      record["stride"] = run.stride;
    }
    records.push_back(std::move(record));
    file.append(record_bytes);
    file_crc = checksum_update(file_crc, record_bytes.data(), record_bytes.size());
    progress.add(record_bytes.size());
  }
  progress.set_detail("syncing to disk", /*now=*/true);
  file.finish();
  return {{"file", fs::path(path).filename().string()},
          {"bytes", file.size()},
          {"crc32", file_crc},
          {"records", records}};
}

// The whole model's tensors, as a layout (whole or a slice) knows them.
json tensor_index(const ParameterLayout& layout) {
  json tensors = json::array();
  for (const TensorSpec& t : layout.tensors) {
    tensors.push_back({{"name", t.name},
                       {"unit", t.global_unit},
                       {"offset", t.global_offset},
                       {"shape", t.global_shape},
                       {"dtype", "f32"}});
  }
  return tensors;
}

// Checkpoint steps in run_dir; an entry that looks like one but is not
// named step_<N> (say step_best/) is logged once per process and skipped.
std::vector<int> checkpoint_steps(const std::string& run_dir) {
  static std::set<std::string> logged;
  std::vector<int> steps;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(entry.path() / "meta.json")) continue;
    int step = checkpoint_step_of(name);
    if (step >= 0) {
      steps.push_back(step);
      continue;
    }
    if (logged.insert(entry.path().string()).second) {
      spdlog::warn("{}: not a step_<N> checkpoint; never pruned or resumed from",
                   entry.path().string());
    }
  }
  return steps;
}

void prune(const std::string& run_dir, const CheckpointConfig& policy, int newest) {
  std::vector<int> steps = checkpoint_steps(run_dir);
  std::sort(steps.rbegin(), steps.rend());
  int kept = 0;
  for (int step : steps) {
    bool recent = policy.keep_last == 0 || kept < policy.keep_last || step == newest;
    bool milestone = policy.keep_every > 0 && step % policy.keep_every == 0;
    if (recent) ++kept;
    if (!recent && !milestone) fs::remove_all(fs::path(run_dir) / step_name(step));
  }
}

// Reads records of one checkpoint on demand, verifying each record's
// checksum the first time it is read, and counts the bytes it delivers on
// `progress` (when given).
class CheckpointReader : public StateSource {
 public:
  CheckpointReader(std::string dir, const json& meta, Progress* progress = nullptr)
      : dir_(std::move(dir)), progress_(progress) {
    for (const json& shard : meta.at("shards")) {
      std::string file = (fs::path(dir_) / shard.at("file").get<std::string>()).string();
      LLM_CHECK(fs::exists(file), "checkpoint {}: shard {} is missing", dir_, file);
      size_t expected = shard.at("bytes").get<size_t>(), actual = fs::file_size(file);
      LLM_CHECK(actual == expected, "checkpoint {}: shard {} has {} bytes, meta.json says {}", dir_,
                file, actual, expected);
      for (const json& r : shard.at("records")) {
        const size_t count = r.at("count").get<size_t>();
        records_[r.at("unit").get<int>()].push_back({file,
                                                     r.at("begin").get<size_t>(),
                                                     count,
                                                     r.value("repeats", size_t{1}),
                                                     r.value("stride", count),
                                                     r.at("offset").get<size_t>(),
                                                     r.at("crc32").get<uint32_t>(),
                                                     {}});
      }
    }
  }

  void read(int unit, size_t begin, size_t count, float* params, float* m, float* v) override {
    size_t covered = 0;
    const size_t end = begin + count;
    for (Record& r : records_[unit]) {
      // Blocks [first, last) of the record may overlap the range.
      if (r.count == 0 || end <= r.begin) continue;
      const size_t first =
          begin < r.begin + r.count ? 0 : (begin - r.begin - r.count) / r.stride + 1;
      const size_t last = std::min(r.repeats, (end - r.begin - 1) / r.stride + 1);
      for (size_t i = first; i < last; ++i) {
        const size_t block = r.begin + i * r.stride;
        const size_t lo = std::max(begin, block), hi = std::min(end, block + r.count);
        if (lo >= hi) continue;
        const std::vector<float>& data = load(r);
        const size_t n = r.repeats * r.count;
        for (auto [out, part] : {std::pair{params, 0}, std::pair{m, 1}, std::pair{v, 2}}) {
          if (!out) continue;
          std::memcpy(out + (lo - begin), data.data() + part * n + i * r.count + (lo - block),
                      (hi - lo) * sizeof(float));
          if (progress_) progress_->add((hi - lo) * sizeof(float));
        }
        covered += hi - lo;
      }
    }
    LLM_CHECK(covered == count,
              "checkpoint {}: unit {} elements [{}, {}) are not all saved (found {} of {})", dir_,
              unit, begin, begin + count, covered, count);
  }

 private:
  struct Record {
    std::string file;
    size_t begin, count, repeats, stride, offset;
    uint32_t crc;
    std::vector<float> data;  // params | m | v once read
  };

  const std::vector<float>& load(Record& r) {
    if (!r.data.empty() || r.count == 0) return r.data;
    r.data.resize(3 * r.repeats * r.count);
    read_file_range(r.file, r.offset, r.data.size() * sizeof(float), r.data.data());
    LLM_CHECK(checksum(r.data.data(), r.data.size() * sizeof(float)) == r.crc,
              "checkpoint {}: checksum mismatch in {} (unit record at byte {})", dir_, r.file,
              r.offset);
    return r.data;
  }

  std::string dir_;
  Progress* progress_;
  std::map<int, std::vector<Record>> records_;
};

}  // namespace

std::string checkpoint_save(const std::string& run_dir, int step, Config& config,
                            ShardingEngine& engine, Topology& topology) {
  LLM_CHECK(step >= 0, "checkpoint_save: step {} is negative", step);
  Group& world = topology.world;
  engine.settle();  // an offloaded optimizer's deferred work, applied on every rank
  const fs::path final_dir = fs::path(run_dir) / step_name(step);
  const fs::path tmp_dir = fs::path(run_dir) / fmt::format(".{}.tmp", step_name(step));
  try {
    if (world.rank() == 0) {
      fs::remove_all(tmp_dir);  // the remains of an interrupted save
      fs::create_directories(tmp_dir);
    }
    world.barrier();

    // One replica writes: its ranks together own every element exactly once,
    // each naming its file by its world rank.
    if (topology.checkpoint_writer()) {
      std::string name = fmt::format("shard_{:05d}", world.rank());
      const size_t writers = topology.checkpoint_writers().size();
      json shard = write_shard(
          (tmp_dir / (name + ".bin")).string(), engine.owned_slices(), engine.layout(),
          fmt::format("saving {}{}", step_name(step),
                      writers > 1 ? fmt::format(" (rank 0's shard of {})", writers) : ""),
          /*show_progress=*/world.rank() == 0);
      write_file_synced((tmp_dir / (name + ".json")).string(), shard.dump());
    }
    world.barrier();

    if (world.rank() == 0) {
      json shards = json::array();
      for (int r : topology.checkpoint_writers()) {
        fs::path index = tmp_dir / fmt::format("shard_{:05d}.json", r);
        shards.push_back(json::parse(read_file(index.string())));
        fs::remove(index);
      }
      const TrainingConfig& t = config.training;
      json meta = {{"format", kFormat},
                   {"step", step},
                   {"world_size", world.size()},
                   {"mode", to_string(topology.plan.mode)},
                   {"shard_group_size", topology.plan.shard_group_size},
                   {"tensor_parallel", topology.tensor->size()},
                   {"pipeline_parallel", topology.pipeline->size()},
                   {"loader", {{"samples_consumed", static_cast<int64_t>(step) * t.batch_size}}},
                   {"rng",
                    {{"seed", t.seed},
                     {"note", "data order and initialization are pure functions of (seed, step)"}}},
                   {"config", config_to_toml(config)},
                   {"tensors", tensor_index(layout_build(config.model))},
                   {"shards", shards}};
      write_file_synced((tmp_dir / "meta.json").string(), meta.dump(1));
      fsync_directory(tmp_dir.string());
      if (fs::exists(final_dir)) fs::remove_all(final_dir);
      fs::rename(tmp_dir, final_dir);
      fsync_directory(run_dir);
      write_file_atomically((fs::path(run_dir) / "latest").string(), step_name(step) + "\n");
      prune(run_dir, config.checkpoint, step);
    }
  } catch (...) {
    // A failed save (a full disk, say) leaves nothing behind to trip the next start.
    std::error_code ignored;
    fs::remove_all(tmp_dir, ignored);
    throw;
  }
  world.barrier();
  return final_dir.string();
}

int checkpoint_step_of(const std::string& name) {
  const std::string digits = name.rfind("step_", 0) == 0 ? name.substr(5) : "";
  if (digits.empty() || digits.size() > 9) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoi(digits);
}

std::vector<std::string> checkpoint_remove_stale_temporaries(const std::string& run_dir) {
  std::vector<std::string> removed;
  if (!fs::is_directory(run_dir)) return removed;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    const std::string name = entry.path().filename().string();
    const bool interrupted_save = name.starts_with(".step_") && name.ends_with(".tmp");
    if (interrupted_save || name == "latest.tmp") removed.push_back(entry.path().string());
  }
  for (const std::string& path : removed) fs::remove_all(path);
  return removed;
}

std::string checkpoint_latest(const std::string& run_dir) {
  fs::path latest = fs::path(run_dir) / "latest";
  if (!fs::exists(latest)) return "";
  std::string name = read_file(latest.string());
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  // Only a step directory of this run: never a path elsewhere, nor a name the
  // filesystem would refuse (found by fuzz_checkpoint_meta).
  LLM_CHECK(checkpoint_step_of(name) >= 0, "{}: holds '{}', not the name of a step_N directory",
            latest.string(), name.substr(0, 64));
  fs::path dir = fs::path(run_dir) / name;
  LLM_CHECK(fs::exists(dir / "meta.json"), "{}: names {}, which has no meta.json", latest.string(),
            dir.string());
  return dir.string();
}

std::string checkpoint_step_directory(const std::string& path, const std::string& command) {
  if (fs::exists(fs::path(path) / "meta.json")) return path;
  const std::string latest = fs::is_directory(path) ? checkpoint_latest(path) : "";
  LLM_CHECK(!latest.empty(),
            "{}: {} is neither a checkpoint (no meta.json) nor a run directory with a 'latest' "
            "checkpoint",
            command, path);
  return latest;
}

std::string checkpoint_tokenizer(const std::string& step_dir, const Config& run,
                                 const std::string& command) {
  LLM_CHECK(!run.data.tokenizer.empty(), "{}: the run of {} had no data.tokenizer", command,
            step_dir);
  const std::string copy = run_tokenizer_dir(fs::path(step_dir).parent_path().string());
  if (fs::is_directory(copy)) return copy;
  LLM_CHECK(fs::exists(run.data.tokenizer),
            "{}: the run of {} kept no copy of its tokenizer, and its data.tokenizer {} is not "
            "there (run this from the directory the run was started in)",
            command, step_dir, run.data.tokenizer);
  return run.data.tokenizer;
}

namespace {

// Typed access to meta.json: every error names the file and the field path.
class MetaSchema {
 public:
  explicit MetaSchema(std::string path) : path_(std::move(path)) {}

  const json& field(const json& object, const std::string& where, const char* key) const {
    LLM_CHECK(object.is_object(), "{}: field '{}' must be an object", path_, where);
    LLM_CHECK(object.contains(key), "{}: missing field '{}'", path_, join(where, key));
    return object[key];
  }
  // A non-negative integer no larger than `max`.
  uint64_t count(const json& object, const std::string& where, const char* key,
                 uint64_t max = UINT64_MAX) const {
    const json& v = field(object, where, key);
    LLM_CHECK(v.is_number_unsigned() && v.get<uint64_t>() <= max,
              "{}: field '{}' must be an integer in [0, {}], found {}", path_, join(where, key),
              max, v.dump());
    return v.get<uint64_t>();
  }
  std::string text(const json& object, const std::string& where, const char* key) const {
    const json& v = field(object, where, key);
    LLM_CHECK(v.is_string(), "{}: field '{}' must be a string, found {}", path_, join(where, key),
              v.dump());
    return v.get<std::string>();
  }
  const json& array(const json& object, const std::string& where, const char* key) const {
    const json& v = field(object, where, key);
    LLM_CHECK(v.is_array(), "{}: field '{}' must be an array, found {}", path_, join(where, key),
              v.type_name());
    return v;
  }
  const std::string& path() const { return path_; }

 private:
  static std::string join(const std::string& where, const char* key) {
    return where.empty() ? key : where + "." + key;
  }
  std::string path_;
};

// Checks every field the loaders read, so that a damaged meta.json is one
// error naming it, never a bare json exception or an absurd allocation.
void validate_meta(const json& meta, const MetaSchema& schema) {
  const std::string format = schema.text(meta, "", "format");
  LLM_CHECK(format == kFormat, "{}: unknown checkpoint format '{}'", schema.path(), format);
  schema.count(meta, "", "step", INT_MAX);
  schema.count(meta, "", "world_size", INT_MAX);
  schema.text(meta, "", "config");
  schema.count(schema.field(meta, "", "loader"), "loader", "samples_consumed");
  const json& tensors = schema.array(meta, "", "tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string where = fmt::format("tensors[{}]", i);
    schema.text(tensors[i], where, "name");
    schema.count(tensors[i], where, "unit", INT_MAX);
    schema.count(tensors[i], where, "offset");
    const json& shape = schema.array(tensors[i], where, "shape");
    for (size_t d = 0; d < shape.size(); ++d) {
      LLM_CHECK(shape[d].is_number_unsigned(),
                "{}: field '{}.shape[{}]' must be a non-negative integer, found {}", schema.path(),
                where, d, shape[d].dump());
    }
  }
  const json& shards = schema.array(meta, "", "shards");
  LLM_CHECK(!shards.empty(), "{}: field 'shards' is empty", schema.path());
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string where = fmt::format("shards[{}]", i);
    const std::string file = schema.text(shards[i], where, "file");
    LLM_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "..",
              "{}: field '{}.file' must name a file inside the checkpoint, found '{}'",
              schema.path(), where, file);
    const uint64_t bytes = schema.count(shards[i], where, "bytes");
    schema.count(shards[i], where, "crc32", UINT32_MAX);
    const json& records = schema.array(shards[i], where, "records");
    for (size_t r = 0; r < records.size(); ++r) {
      const std::string record = fmt::format("{}.records[{}]", where, r);
      schema.count(records[r], record, "unit", INT_MAX);
      schema.count(records[r], record, "begin");
      schema.count(records[r], record, "crc32", UINT32_MAX);
      const uint64_t offset = schema.count(records[r], record, "offset", bytes);
      // params, m and v: 12 bytes per element, inside the shard's `bytes`;
      // `repeats` blocks (1 when absent) `stride` apart (at least `count`).
      const uint64_t repeats =
          records[r].contains("repeats") ? schema.count(records[r], record, "repeats", INT_MAX) : 1;
      LLM_CHECK(repeats >= 1, "{}: field '{}.repeats' must be at least 1", schema.path(), record);
      const uint64_t count = schema.count(records[r], record, "count",
                                          (bytes - offset) / (3 * sizeof(float) * repeats));
      if (records[r].contains("stride")) {
        const uint64_t stride = schema.count(records[r], record, "stride");
        LLM_CHECK(stride >= count && stride > 0,
                  "{}: field '{}.stride' ({}) must be at least count ({})", schema.path(), record,
                  stride, count);
      }
    }
  }
}

// meta.json of a checkpoint, validated against its schema and against
// `layout` when given.
json read_meta(const std::string& path, const ParameterLayout* layout) {
  const std::string meta_path = (fs::path(path) / "meta.json").string();
  LLM_CHECK(fs::exists(meta_path), "checkpoint {}: no meta.json (not a complete checkpoint)", path);
  json meta;
  try {
    meta = json::parse(read_file(meta_path));
  } catch (const json::exception& e) {
    LLM_FAIL("{}: not valid JSON: {}", meta_path, e.what());
  }
  validate_meta(meta, MetaSchema(meta_path));
  if (!layout) return meta;
  // The layout's tensors (a slice or stage holds some of the model's) under
  // their whole-model indices.
  const json expected = tensor_index(*layout);
  const json& saved = meta.at("tensors");
  LLM_CHECK(saved.size() == static_cast<size_t>(layout->global_tensor_count),
            "{}: index has {} tensors but the config's model has {}", meta_path, saved.size(),
            layout->global_tensor_count);
  for (size_t i = 0; i < expected.size(); ++i) {
    const json& was = saved[layout->tensors[i].global_index];
    LLM_CHECK(was == expected[i], "{}: tensor {} is {} in the checkpoint but {} in the config",
              meta_path, expected[i].at("name").get<std::string>(), was.dump(), expected[i].dump());
  }
  return meta;
}

// "table.key" -> the value as TOML text, for the tables of a config dump.
std::map<std::string, std::string> config_values(const std::string& toml_text,
                                                 const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    LLM_FAIL("{}: the saved config is not valid TOML: {}", origin, e.description());
  }
  std::map<std::string, std::string> values;
  for (const auto& [table_name, table] : root) {
    if (!table.is_table()) continue;
    for (const auto& [key, node] : *table.as_table()) {
      std::ostringstream text;
      node.visit([&](const auto& value) { text << value; });
      values[std::string(table_name.str()) + "." + std::string(key.str())] = text.str();
    }
  }
  return values;
}

}  // namespace

ConfigChanges checkpoint_config_changes(const std::string& path, Config& current) {
  const std::string meta_path = (fs::path(path) / "meta.json").string();
  const json meta = read_meta(path, nullptr);
  const auto saved = config_values(meta.at("config").get<std::string>(), meta_path);
  const auto now = config_values(config_to_toml(current), current.path);
  std::set<std::string> keys;
  for (const auto& [key, value] : saved) keys.insert(key);
  for (const auto& [key, value] : now) keys.insert(key);
  ConfigChanges changes;
  for (const std::string& key : keys) {
    auto was = saved.find(key), is = now.find(key);
    const std::string before = was == saved.end() ? "(absent)" : was->second;
    const std::string after = is == now.end() ? "(absent)" : is->second;
    if (before == after) continue;
    const std::string change = fmt::format("{}: {} -> {}", key, before, after);
    // A key this build no longer knows is listed, not ignored.
    switch (config_key_on_resume(key).value_or(OnResume::changes_trajectory)) {
      case OnResume::changes_model:
        changes.model.push_back(change);
        break;
      case OnResume::changes_trajectory:
        changes.schedule.push_back(change);
        break;
      case OnResume::same_trajectory:
        break;
    }
  }
  return changes;
}

int checkpoint_load(const std::string& path, ShardingEngine& engine, bool show_progress) {
  json meta = read_meta(path, &engine.layout());
  Progress progress(fmt::format("loading {}", path),
                    engine.load_elements(/*with_moments=*/true) * sizeof(float),
                    transfer_options(show_progress));
  CheckpointReader reader(path, meta, &progress);
  engine.load_state(reader, /*with_moments=*/true);
  return meta.at("step").get<int>();
}

Config checkpoint_read_config(const std::string& path) {
  json meta = read_meta(path, nullptr);
  return config_parse(meta.at("config").get<std::string>(), (fs::path(path) / "meta.json").string(),
                      {});
}

std::vector<float> checkpoint_read_params(const std::string& path, const ParameterLayout& layout) {
  json meta = read_meta(path, &layout);
  Progress progress(fmt::format("reading {}", path), layout.total_numel * sizeof(float),
                    transfer_options(/*enabled=*/true));
  CheckpointReader reader(path, meta, &progress);
  std::vector<float> params(layout.total_numel);
  size_t offset = 0;
  for (size_t u = 0; u < layout.units.size(); ++u) {
    reader.read(static_cast<int>(u), 0, layout.units[u].numel, params.data() + offset, nullptr,
                nullptr);
    offset += layout.units[u].numel;
  }
  return params;
}

}  // namespace llm
