// The safetensors file format (Hugging Face's weight files): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype,
// shape and byte range, then the packed tensor data.
// Invariant: a SafetensorsFile that opened has tensors that exactly tile its
// data section (sorted, no gaps, no overlaps, shape * dtype size == bytes), so
// every later read stays inside the mapping; every error names the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace llm {

// The element types we read (f16/bf16 are converted to f32) and write (f32, bf16).
enum class Dtype { f32, bf16, f16 };

// "F32", "BF16", "F16" as in the file's header.
const char* dtype_name(Dtype dtype);
size_t dtype_bytes(Dtype dtype);

// "[4, 16]", as errors print shapes.
std::string shape_string(const std::vector<int64_t>& shape);

struct TensorInfo {
  std::string name;
  Dtype dtype;
  std::vector<int64_t> shape;
  size_t numel;
  size_t data_begin;  // bytes from the start of the data section
  size_t data_end;
};

// Collects tensors (by pointer: the data must stay alive until write) and
// writes them in one go, packed in the order added.
class SafetensorsWriter {
 public:
  // `data` holds product(shape) floats, stored as f32 or rounded to bf16.
  void add(std::string name, std::vector<int64_t> shape, const float* data, Dtype dtype);
  void set_metadata(std::string key, std::string value);
  // Writes path + ".tmp", fsyncs and renames it to path.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    size_t numel;
    const float* data;
    Dtype dtype;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A validated, read-only, memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  // Throws (naming the file and tensor) when there is no such tensor.
  const TensorInfo& info(const std::string& name) const;
  // Tensor names in file (data offset) order.
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Elements [element_begin, element_begin + count) of the row-major tensor,
  // converted to f32.
  void read_f32(const std::string& name, size_t element_begin, size_t count, float* out) const;

 private:
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  const uint8_t* mapping_ = nullptr;  // the whole file
  size_t mapping_bytes_ = 0;
  const uint8_t* data_ = nullptr;                  // the data section, inside the mapping
  std::vector<TensorInfo> tensors_;                // sorted by data_begin
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

}  // namespace llm
