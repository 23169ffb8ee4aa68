// A checkpoint's shard file: records of fp32 parameters and AdamW moments,
// each checksummed (CRC-32), streamed to disk by write_shard and read back,
// verified, by CheckpointReader. Its index (the records' units, ranges,
// offsets and checksums) goes into meta.json (meta_schema.h).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "parallel/sharding_engine.h"
#include "base/progress.h"

namespace llm {

// The CRC-32 of `bytes` at `data`.
uint32_t checksum(const void* data, size_t bytes);

// A checkpoint's bytes moving to or from disk, on rank 0's terminal when
// slow (enabled); the caller logs the result.
ProgressOptions transfer_options(bool enabled);

// Writes this rank's owned slices to `path`; returns the shard's index
// entry (file, bytes, crc32, records). A slow write shows as `label` on this
// rank's terminal when `show_progress`.
nlohmann::json write_shard(const std::string& path, const std::vector<OwnedSlice>& slices,
                           const ParameterLayout& layout, const std::string& label,
                           bool show_progress);

// Reads records of one checkpoint on demand, verifying each record's
// checksum the first time it is read, and counts the bytes it delivers on
// `progress` (when given).
class CheckpointReader : public StateSource {
 public:
  // The shards `meta` (validated: meta_schema.h) lists, in checkpoint `dir`.
  CheckpointReader(std::string dir, const nlohmann::json& meta, Progress* progress = nullptr);

  void read(int unit, size_t begin, size_t count, float* params, float* m, float* v) override;

 private:
  struct Record {
    std::string file;
    size_t begin, count, repeats, stride, offset;
    uint32_t crc;
    std::vector<float> data;  // params | m | v once read
  };

  const std::vector<float>& load(Record& r);

  std::string dir_;
  Progress* progress_;
  std::map<int, std::vector<Record>> records_;
};

}  // namespace llm
