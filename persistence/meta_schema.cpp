// meta.json's schema and its reader (see meta_schema.h).
#include "persistence/meta_schema.h"

#include <climits>
#include <filesystem>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {

namespace fs = std::filesystem;
using nlohmann::json;

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
  LLM_CHECK(format == kCheckpointFormat, "{}: unknown checkpoint format '{}'", schema.path(),
            format);
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
  if (meta.contains("fp8_amax_history")) {
    // Steps of one amax per FP8 input each, oldest first.
    const json& steps = schema.array(meta, "", "fp8_amax_history");
    for (size_t s = 0; s < steps.size(); ++s) {
      LLM_CHECK(steps[s].is_array() && steps[s].size() == steps[0].size(),
                "{}: field 'fp8_amax_history[{}]' must be an array of {} amaxes", schema.path(), s,
                steps[0].size());
      for (const json& amax : steps[s])
        LLM_CHECK(amax.is_number() && amax.get<double>() >= 0,
                  "{}: field 'fp8_amax_history[{}]' holds {}, not an amax", schema.path(), s,
                  amax.dump());
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

}  // namespace

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

}  // namespace llm
