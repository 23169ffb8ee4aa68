// Safetensors writing (packed, header padded to 8 bytes, tmp + fsync + rename)
// and validated mmap reading with bf16/f16 -> f32 conversion.
// Invariant: every error names the file; the reader trusts nothing in the header.
#include "interop/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "base/bf16.h"
#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

constexpr size_t kLengthBytes = 8;         // the u64 header length
constexpr size_t kConvertChunk = 1 << 16;  // elements converted per write when narrowing

float f16_to_float(uint16_t half) {
  const uint32_t sign = uint32_t{half & 0x8000u} << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

bool dtype_from_name(const std::string& name, Dtype* dtype) {
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    if (name == dtype_name(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

// A file written under path + ".tmp" that replaces path only on commit();
// destroyed uncommitted, it removes the temporary file. Streams, unlike
// core/file_io's write_file_atomically, so a large model is never copied whole.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    LLM_CHECK(fd_ >= 0, "{}: cannot create: {}", tmp_path_, std::strerror(errno));
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_path_.c_str());
  }

  void append(const void* data, size_t bytes) {
    const auto* cursor = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
      ssize_t written = ::write(fd_, cursor, bytes);
      if (written < 0 && errno == EINTR) continue;
      LLM_CHECK(written > 0, "{}: write failed: {}", tmp_path_, std::strerror(errno));
      cursor += written;
      bytes -= static_cast<size_t>(written);
    }
  }

  void commit() {
    LLM_CHECK(::fsync(fd_) == 0, "{}: fsync failed: {}", tmp_path_, std::strerror(errno));
    const int close_result = ::close(fd_);
    fd_ = -1;
    LLM_CHECK(close_result == 0, "{}: close failed: {}", tmp_path_, std::strerror(errno));
    LLM_CHECK(::rename(tmp_path_.c_str(), path_.c_str()) == 0, "{}: cannot rename from {}: {}",
              path_, tmp_path_, std::strerror(errno));
    committed_ = true;
    fsync_directory(std::filesystem::path(path_).parent_path().string());
  }

 private:
  std::string path_, tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// product(shape), or false when it overflows size_t.
bool shape_numel(const std::vector<int64_t>& shape, size_t* numel) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<size_t>(d), &n)) return false;
  }
  *numel = n;
  return true;
}

// Parses one header entry; `what` prefixes every error ("safetensors F: tensor 'x'").
TensorInfo parse_entry(const std::string& name, const nlohmann::json& entry,
                       const std::string& what) {
  LLM_CHECK(entry.is_object(), "{}: entry is not a JSON object", what);
  TensorInfo info{name, Dtype::f32, {}, 0, 0, 0};

  const auto dtype = entry.find("dtype");
  LLM_CHECK(dtype != entry.end() && dtype->is_string(), "{}: missing string 'dtype'", what);
  LLM_CHECK(dtype_from_name(dtype->get<std::string>(), &info.dtype),
            "{}: unknown dtype '{}' (F32, BF16 and F16 are supported)", what,
            dtype->get<std::string>());

  const auto shape = entry.find("shape");
  LLM_CHECK(shape != entry.end() && shape->is_array(), "{}: missing array 'shape'", what);
  for (const auto& d : *shape) {
    LLM_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t{INT64_MAX},
              "{}: shape {} holds a value that is not a non-negative integer", what, shape->dump());
    info.shape.push_back(d.get<int64_t>());
  }

  const auto offsets = entry.find("data_offsets");
  LLM_CHECK(offsets != entry.end() && offsets->is_array() && offsets->size() == 2 &&
                (*offsets)[0].is_number_unsigned() && (*offsets)[1].is_number_unsigned(),
            "{}: 'data_offsets' must be two non-negative integers", what);
  info.data_begin = (*offsets)[0].get<size_t>();
  info.data_end = (*offsets)[1].get<size_t>();
  LLM_CHECK(info.data_begin <= info.data_end, "{}: data_offsets [{}, {}] run backwards", what,
            info.data_begin, info.data_end);

  size_t bytes = 0;
  LLM_CHECK(shape_numel(info.shape, &info.numel) &&
                !__builtin_mul_overflow(info.numel, dtype_bytes(info.dtype), &bytes),
            "{}: shape {} is too large", what, shape_string(info.shape));
  LLM_CHECK(bytes == info.data_end - info.data_begin,
            "{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] span {}", what,
            shape_string(info.shape), dtype_name(info.dtype), bytes, info.data_begin, info.data_end,
            info.data_end - info.data_begin);
  return info;
}

}  // namespace

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32:
      return "F32";
    case Dtype::bf16:
      return "BF16";
    case Dtype::f16:
      return "F16";
  }
  LLM_FAIL("unknown Dtype {}", static_cast<int>(dtype));
}

size_t dtype_bytes(Dtype dtype) { return dtype == Dtype::f32 ? 4 : 2; }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// ---- writing ------------------------------------------------------------------

void SafetensorsWriter::add(std::string name, std::vector<int64_t> shape, const float* data,
                            Dtype dtype) {
  LLM_CHECK(!name.empty() && name != "__metadata__", "safetensors: invalid tensor name '{}'", name);
  LLM_CHECK(dtype == Dtype::f32 || dtype == Dtype::bf16,
            "safetensors: tensor '{}': only F32 and BF16 can be written, not {}", name,
            dtype_name(dtype));
  for (const Entry& e : entries_) {
    LLM_CHECK(e.name != name, "safetensors: tensor '{}' added twice", name);
  }
  size_t numel = 0;
  LLM_CHECK(shape_numel(shape, &numel), "safetensors: tensor '{}': invalid shape {}", name,
            shape_string(shape));
  LLM_CHECK(data != nullptr || numel == 0, "safetensors: tensor '{}': no data", name);
  entries_.push_back({std::move(name), std::move(shape), numel, data, dtype});
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  size_t offset = 0;
  for (const Entry& e : entries_) {
    const size_t end = offset + e.numel * dtype_bytes(e.dtype);
    header[e.name] = {
        {"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned in the file.
  text.append((8 - (kLengthBytes + text.size()) % 8) % 8, ' ');
  const uint64_t length = text.size();

  AtomicFile file(path);
  file.append(&length, sizeof(length));
  file.append(text.data(), text.size());
  std::vector<uint16_t> narrowed;
  for (const Entry& e : entries_) {
    if (e.dtype == Dtype::f32) {
      file.append(e.data, e.numel * sizeof(float));
      continue;
    }
    for (size_t begin = 0; begin < e.numel; begin += kConvertChunk) {
      const size_t count = std::min(kConvertChunk, e.numel - begin);
      narrowed.resize(count);
      for (size_t i = 0; i < count; ++i) narrowed[i] = float_to_bf16(e.data[begin + i]);
      file.append(narrowed.data(), count * sizeof(uint16_t));
    }
  }
  file.commit();
}

// ---- reading ------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LLM_CHECK(fd >= 0, "safetensors {}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    LLM_FAIL("safetensors {}: not a regular readable file", path);
  }
  const size_t file_bytes = static_cast<size_t>(st.st_size);
  if (file_bytes < kLengthBytes) {
    ::close(fd);
    LLM_FAIL("safetensors {}: truncated: {} bytes, smaller than the 8-byte header length", path,
             file_bytes);
  }
  void* mapping = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  LLM_CHECK(mapping != MAP_FAILED, "safetensors {}: mmap failed: {}", path, std::strerror(errno));

  SafetensorsFile file;  // owns the mapping from here, so errors below unmap it
  file.path_ = path;
  file.mapping_ = static_cast<const uint8_t*>(mapping);
  file.mapping_bytes_ = file_bytes;

  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.mapping_, sizeof(header_bytes));
  LLM_CHECK(header_bytes <= file_bytes - kLengthBytes,
            "safetensors {}: header length {} runs past the end of the {}-byte file", path,
            header_bytes, file_bytes);
  const char* header_text = reinterpret_cast<const char*>(file.mapping_ + kLengthBytes);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text, header_text + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    LLM_FAIL("safetensors {}: header is not valid JSON: {}", path, e.what());
  }
  LLM_CHECK(header.is_object(), "safetensors {}: header is not a JSON object", path);

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      LLM_CHECK(entry.is_object(), "safetensors {}: __metadata__ is not a JSON object", path);
      for (const auto& [key, value] : entry.items()) {
        LLM_CHECK(value.is_string(), "safetensors {}: __metadata__ value of '{}' is not a string",
                  path, key);
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    file.tensors_.push_back(
        parse_entry(name, entry, fmt::format("safetensors {}: tensor '{}'", path, name)));
  }

  // The tensors must tile the data section exactly: sorted, no gaps, no overlaps.
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return std::tie(a.data_begin, a.data_end) < std::tie(b.data_begin, b.data_end);
            });
  size_t covered = 0;
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    const TensorInfo& t = file.tensors_[i];
    LLM_CHECK(t.data_begin >= covered,
              "safetensors {}: tensor '{}' data_offsets [{}, {}] overlap tensor '{}' ending at {}",
              path, t.name, t.data_begin, t.data_end, file.tensors_[i - 1].name, covered);
    LLM_CHECK(t.data_begin == covered,
              "safetensors {}: gap of {} bytes before tensor '{}' data_offsets [{}, {}]", path,
              t.data_begin - covered, t.name, t.data_begin, t.data_end);
    covered = t.data_end;
    file.index_[t.name] = i;
  }
  const size_t data_bytes = file_bytes - kLengthBytes - header_bytes;
  LLM_CHECK(covered <= data_bytes,
            "safetensors {}: truncated: tensors need {} data bytes but the file holds {}", path,
            covered, data_bytes);
  LLM_CHECK(covered == data_bytes, "safetensors {}: {} trailing bytes after the last tensor's data",
            path, data_bytes - covered);
  file.data_ = file.mapping_ + kLengthBytes + header_bytes;
  return file;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  LLM_CHECK(it != index_.end(), "safetensors {}: no tensor named '{}'", path_, name);
  return tensors_[it->second];
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  for (const TensorInfo& t : tensors_) names.push_back(t.name);
  return names;
}

void SafetensorsFile::read_f32(const std::string& name, size_t element_begin, size_t count,
                               float* out) const {
  const TensorInfo& t = info(name);
  LLM_CHECK(element_begin <= t.numel && count <= t.numel - element_begin,
            "safetensors {}: tensor '{}': elements [{}, {}) outside its {} elements", path_, name,
            element_begin, element_begin + count, t.numel);
  if (count == 0) return;
  // Byte-wise copies: the file promises no alignment of a tensor's data.
  const uint8_t* src = data_ + t.data_begin + element_begin * dtype_bytes(t.dtype);
  if (t.dtype == Dtype::f32) {
    std::memcpy(out, src, count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    out[i] = t.dtype == Dtype::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
  }
}

// ---- ownership of the mapping ------------------------------------------------

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (mapping_ != nullptr) ::munmap(const_cast<uint8_t*>(mapping_), mapping_bytes_);
  mapping_ = nullptr;
  data_ = nullptr;
}

}  // namespace llm
