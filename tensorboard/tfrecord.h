// TFRecord files, the container of TensorBoard's event files: each record is
// its length (uint64, little-endian), the masked CRC32C of those 8 bytes, the
// data, and the masked CRC32C of the data. Invariant: a record is flushed as a
// whole when append() returns, so a killed run leaves every record it
// appended readable (at worst a cut-off last one, which readers drop); a
// failed write is an llm::Error naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace llm {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): crc32c("123456789")
// is 0xE3069283.
uint32_t crc32c(const void* data, size_t size);

// The CRC as TFRecord stores it: rotated right by 15 bits plus 0xA282EAD8, so
// that a CRC of data that holds CRCs does not degenerate.
uint32_t crc32c_masked(const void* data, size_t size);

class TfRecordWriter {
 public:
  // Creates `path` (its directory must exist); an existing file is an error.
  explicit TfRecordWriter(const std::string& path);
  void append(std::string_view data);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace llm
