// Save, load and prune sharded checkpoints (see checkpoint.h).
#include "parallel/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/error.h"
#include "runtime/file_io.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "llm-train checkpoint v1";

uint32_t checksum(const void* data, size_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes 32-bit lengths
    uInt chunk = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string step_name(int step) { return "step_" + std::to_string(step); }

// A record holds params, m and v of elements [begin, begin + count) of one
// unit, back to back (3 * count floats), copied from the device's memory.
json write_shard(const std::string& path, const std::vector<OwnedSlice>& slices,
                 const DeviceMemory& memory) {
  std::string bytes;
  json records = json::array();
  for (const OwnedSlice& s : slices) {
    size_t offset = bytes.size(), n = s.count * sizeof(float);
    bytes.resize(offset + 3 * n);
    memory.to_host(bytes.data() + offset, s.params, n);
    memory.to_host(bytes.data() + offset + n, s.m, n);
    memory.to_host(bytes.data() + offset + 2 * n, s.v, n);
    records.push_back({{"unit", s.unit}, {"begin", s.begin}, {"count", s.count}, {"offset", offset},
                       {"crc32", checksum(bytes.data() + offset, 3 * n)}});
  }
  write_file_synced(path, bytes);
  return {{"file", fs::path(path).filename().string()}, {"bytes", bytes.size()},
          {"crc32", checksum(bytes.data(), bytes.size())}, {"records", records}};
}

json tensor_index(const ParameterLayout& layout) {
  json tensors = json::array();
  for (const TensorSpec& t : layout.tensors) {
    tensors.push_back({{"name", t.name}, {"unit", t.unit}, {"offset", t.offset},
                       {"shape", t.shape}, {"dtype", "f32"}});
  }
  return tensors;
}

void prune(const std::string& run_dir, const CheckpointConfig& policy, int newest) {
  std::vector<int> steps;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(entry.path() / "meta.json")) continue;
    steps.push_back(std::stoi(name.substr(5)));
  }
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
// checksum the first time it is read.
class CheckpointReader : public StateSource {
 public:
  CheckpointReader(std::string dir, const json& meta) : dir_(std::move(dir)) {
    for (const json& shard : meta.at("shards")) {
      std::string file = (fs::path(dir_) / shard.at("file").get<std::string>()).string();
      LLM_CHECK(fs::exists(file), "checkpoint {}: shard {} is missing", dir_, file);
      size_t expected = shard.at("bytes").get<size_t>(), actual = fs::file_size(file);
      LLM_CHECK(actual == expected, "checkpoint {}: shard {} has {} bytes, meta.json says {}", dir_,
                file, actual, expected);
      for (const json& r : shard.at("records")) {
        records_[r.at("unit").get<int>()].push_back(
            {file, r.at("begin").get<size_t>(), r.at("count").get<size_t>(),
             r.at("offset").get<size_t>(), r.at("crc32").get<uint32_t>(), {}});
      }
    }
  }

  void read(int unit, size_t begin, size_t count, float* params, float* m, float* v) override {
    size_t covered = 0;
    for (Record& r : records_[unit]) {
      size_t lo = std::max(begin, r.begin), hi = std::min(begin + count, r.begin + r.count);
      if (lo >= hi) continue;
      const std::vector<float>& data = load(r);
      for (auto [out, part] : {std::pair{params, 0}, std::pair{m, 1}, std::pair{v, 2}}) {
        if (!out) continue;
        std::memcpy(out + (lo - begin), data.data() + part * r.count + (lo - r.begin),
                    (hi - lo) * sizeof(float));
      }
      covered += hi - lo;
    }
    LLM_CHECK(covered == count,
              "checkpoint {}: unit {} elements [{}, {}) are not all saved (found {} of {})", dir_,
              unit, begin, begin + count, covered, count);
  }

 private:
  struct Record {
    std::string file;
    size_t begin, count, offset;
    uint32_t crc;
    std::vector<float> data;  // params | m | v once read
  };

  const std::vector<float>& load(Record& r) {
    if (!r.data.empty() || r.count == 0) return r.data;
    r.data.resize(3 * r.count);
    read_file_range(r.file, r.offset, r.data.size() * sizeof(float), r.data.data());
    LLM_CHECK(checksum(r.data.data(), r.data.size() * sizeof(float)) == r.crc,
              "checkpoint {}: checksum mismatch in {} (unit record at byte {})", dir_, r.file,
              r.offset);
    return r.data;
  }

  std::string dir_;
  std::map<int, std::vector<Record>> records_;
};

}  // namespace

std::string checkpoint_save(const std::string& run_dir, int step, Config& config,
                            ShardingEngine& engine, Topology& topology) {
  Group& world = topology.world;
  const fs::path final_dir = fs::path(run_dir) / step_name(step);
  const fs::path tmp_dir = fs::path(run_dir) / fmt::format(".{}.tmp", step_name(step));
  if (world.rank() == 0) {
    fs::remove_all(tmp_dir);  // the remains of an interrupted save
    fs::create_directories(tmp_dir);
  }
  world.barrier();

  // One replica writes: its ranks together own every element exactly once.
  if (topology.replicate->rank() == 0) {
    std::string name = fmt::format("shard_{:05d}", topology.shard->rank());
    json shard = write_shard((tmp_dir / (name + ".bin")).string(), engine.owned_slices(),
                             *engine.backend().memory);
    write_file_synced((tmp_dir / (name + ".json")).string(), shard.dump());
  }
  world.barrier();

  if (world.rank() == 0) {
    json shards = json::array();
    for (int r = 0; r < topology.shard->size(); ++r) {
      fs::path index = tmp_dir / fmt::format("shard_{:05d}.json", r);
      shards.push_back(json::parse(read_file(index.string())));
      fs::remove(index);
    }
    const TrainingConfig& t = config.training;
    json meta = {
        {"format", kFormat},
        {"step", step},
        {"world_size", world.size()},
        {"mode", to_string(topology.plan.mode)},
        {"shard_group_size", topology.plan.shard_group_size},
        {"loader", {{"samples_consumed", static_cast<int64_t>(step) * t.batch_size}}},
        {"rng", {{"seed", t.seed},
                 {"note", "data order and initialization are pure functions of (seed, step)"}}},
        {"config", config_to_toml(config)},
        {"tensors", tensor_index(engine.layout())},
        {"shards", shards}};
    write_file_synced((tmp_dir / "meta.json").string(), meta.dump(1));
    fsync_directory(tmp_dir.string());
    if (fs::exists(final_dir)) fs::remove_all(final_dir);
    fs::rename(tmp_dir, final_dir);
    fsync_directory(run_dir);
    write_file_atomically((fs::path(run_dir) / "latest").string(), step_name(step) + "\n");
    prune(run_dir, config.checkpoint, step);
  }
  world.barrier();
  return final_dir.string();
}

std::string checkpoint_latest(const std::string& run_dir) {
  fs::path latest = fs::path(run_dir) / "latest";
  if (!fs::exists(latest)) return "";
  std::string name = read_file(latest.string());
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  fs::path dir = fs::path(run_dir) / name;
  LLM_CHECK(fs::exists(dir / "meta.json"), "{}: names {}, which has no meta.json", latest.string(),
            dir.string());
  return dir.string();
}

namespace {

// meta.json of a checkpoint, validated against `layout` when given.
json read_meta(const std::string& path, const ParameterLayout* layout) {
  const std::string meta_path = (fs::path(path) / "meta.json").string();
  LLM_CHECK(fs::exists(meta_path), "checkpoint {}: no meta.json (not a complete checkpoint)", path);
  json meta;
  try {
    meta = json::parse(read_file(meta_path));
  } catch (const json::exception& e) {
    LLM_FAIL("{}: not valid JSON: {}", meta_path, e.what());
  }
  LLM_CHECK(meta.value("format", "") == kFormat, "{}: unknown checkpoint format '{}'", meta_path,
            meta.value("format", ""));
  if (!layout) return meta;
  const json expected = tensor_index(*layout);
  const json& saved = meta.at("tensors");
  LLM_CHECK(saved.size() == expected.size(),
            "{}: index has {} tensors but the config's model has {}", meta_path, saved.size(),
            expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    LLM_CHECK(saved[i] == expected[i], "{}: tensor {} is {} in the checkpoint but {} in the config",
              meta_path, expected[i].at("name").get<std::string>(), saved[i].dump(),
              expected[i].dump());
  }
  return meta;
}

}  // namespace

int checkpoint_load(const std::string& path, ShardingEngine& engine) {
  json meta = read_meta(path, &engine.layout());
  CheckpointReader reader(path, meta);
  engine.load_state(reader, /*with_moments=*/true);
  return meta.at("step").get<int>();
}

Config checkpoint_read_config(const std::string& path) {
  json meta = read_meta(path, nullptr);
  return config_parse(meta.at("config").get<std::string>(),
                      (fs::path(path) / "meta.json").string(), {});
}

std::vector<float> checkpoint_read_params(const std::string& path, const ParameterLayout& layout) {
  json meta = read_meta(path, &layout);
  CheckpointReader reader(path, meta);
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
