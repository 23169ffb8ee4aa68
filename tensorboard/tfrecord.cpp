// CRC-32C by a 256-entry table, and the TFRecord framing around it.
#include "tensorboard/tfrecord.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace llm {
namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78u : 0u);
    table[byte] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// The byte order of the file, whatever the machine's.
void put_le(char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(value >> (8 * i));
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ kCrc32cTable[(crc ^ bytes[i]) & 0xFF];
  return ~crc;
}

uint32_t crc32c_masked(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

TfRecordWriter::TfRecordWriter(const std::string& path) : path_(path) {
  LLM_CHECK(!std::filesystem::exists(path), "{}: exists already; refusing to overwrite it", path);
  out_.open(path, std::ios::binary);
  LLM_CHECK(out_.is_open(), "{}: cannot create the event file: {}", path, std::strerror(errno));
}

void TfRecordWriter::append(std::string_view data) {
  char header[12], footer[4];
  put_le(header, data.size(), 8);
  put_le(header + 8, crc32c_masked(header, 8), 4);
  put_le(footer, crc32c_masked(data.data(), data.size()), 4);
  out_.write(header, sizeof header);
  out_.write(data.data(), static_cast<std::streamsize>(data.size()));
  out_.write(footer, sizeof footer);
  out_.flush();
  LLM_CHECK(out_.good(), "{}: cannot write the event file (disk full?): {}", path_,
            std::strerror(errno));
}

}  // namespace llm
