// The shard file's writer and reader (see shard_file.h).
#include "persistence/shard_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

}  // namespace

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

CheckpointReader::CheckpointReader(std::string dir, const json& meta, Progress* progress)
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

void CheckpointReader::read(int unit, size_t begin, size_t count, float* params, float* m,
                            float* v) {
  size_t covered = 0;
  const size_t end = begin + count;
  for (Record& r : records_[unit]) {
    // Blocks [first, last) of the record may overlap the range.
    if (r.count == 0 || end <= r.begin) continue;
    const size_t first = begin < r.begin + r.count ? 0 : (begin - r.begin - r.count) / r.stride + 1;
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

const std::vector<float>& CheckpointReader::load(Record& r) {
  if (!r.data.empty() || r.count == 0) return r.data;
  r.data.resize(3 * r.repeats * r.count);
  read_file_range(r.file, r.offset, r.data.size() * sizeof(float), r.data.data());
  LLM_CHECK(checksum(r.data.data(), r.data.size() * sizeof(float)) == r.crc,
            "checkpoint {}: checksum mismatch in {} (unit record at byte {})", dir_, r.file,
            r.offset);
  return r.data;
}

}  // namespace llm
