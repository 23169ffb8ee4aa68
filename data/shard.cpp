// Shard writing (atomic, through core/file_io) and validated read-only mmap access.
// Invariant: every error names the shard file; sizes and offsets are in bytes
// or tokens as stated in the message.
#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

constexpr int64_t kHeaderBytes = kShardHeaderInts * sizeof(int32_t);

template <typename Token>
void append_tokens(std::string& bytes, const std::vector<uint32_t>& tokens) {
  std::vector<Token> narrowed(tokens.begin(), tokens.end());
  bytes.append(reinterpret_cast<const char*>(narrowed.data()), narrowed.size() * sizeof(Token));
}

}  // namespace

void shard_write(const std::string& path, const std::vector<uint32_t>& tokens, int vocab_size) {
  LLM_CHECK(!tokens.empty(), "shard {}: refusing to write a shard with no tokens", path);
  LLM_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
            "shard {}: {} tokens exceed the header's int32 count", path, tokens.size());
  LLM_CHECK(vocab_size > 0, "shard {}: vocab size {} must be positive", path, vocab_size);
  for (size_t i = 0; i < tokens.size(); ++i) {
    LLM_CHECK(tokens[i] < static_cast<uint32_t>(vocab_size),
              "shard {}: token at offset {} has value {} >= vocab size {}", path, i, tokens[i],
              vocab_size);
  }

  const bool narrow = vocab_size <= 65536;
  int32_t header[kShardHeaderInts] = {};
  header[0] = narrow ? kShardMagicU16 : kShardMagicU32;
  header[1] = narrow ? kShardVersionU16 : kShardVersionU32;
  header[2] = static_cast<int32_t>(tokens.size());

  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
  if (narrow) {
    append_tokens<uint16_t>(bytes, tokens);
  } else {
    append_tokens<uint32_t>(bytes, tokens);
  }
  write_file_atomically(path, bytes);
}

Shard Shard::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LLM_CHECK(fd >= 0, "shard {}: cannot open: {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    LLM_FAIL("shard {}: not a regular readable file", path);
  }
  const int64_t file_bytes = info.st_size;
  if (file_bytes < kHeaderBytes) {
    ::close(fd);
    LLM_FAIL("shard {}: file is truncated: {} bytes, smaller than the {}-byte header", path,
             file_bytes, kHeaderBytes);
  }
  void* mapping = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  LLM_CHECK(mapping != MAP_FAILED, "shard {}: mmap failed: {}", path, std::strerror(errno));

  Shard shard;
  shard.path_ = path;
  shard.mapping_ = static_cast<const uint8_t*>(mapping);
  shard.mapping_bytes_ = static_cast<size_t>(file_bytes);

  int32_t header[3];
  std::memcpy(header, shard.mapping_, sizeof(header));
  const int32_t magic = header[0], version = header[1], count = header[2];
  if (magic == kShardMagicU16) {
    LLM_CHECK(version == kShardVersionU16, "shard {}: bad version {} for magic {} (expected {})",
              path, version, magic, kShardVersionU16);
    shard.token_bytes_ = 2;
  } else if (magic == kShardMagicU32) {
    LLM_CHECK(version == kShardVersionU32, "shard {}: bad version {} for magic {} (expected {})",
              path, version, magic, kShardVersionU32);
    shard.token_bytes_ = 4;
  } else {
    LLM_FAIL("shard {}: bad magic {} (expected {} or {})", path, magic, kShardMagicU16,
             kShardMagicU32);
  }
  LLM_CHECK(count > 0, "shard {}: header token count {} must be positive", path, count);
  const int64_t expected_bytes = kHeaderBytes + int64_t{count} * shard.token_bytes_;
  LLM_CHECK(file_bytes >= expected_bytes,
            "shard {}: file is truncated: header says {} tokens, expected {} bytes, found {}", path,
            count, expected_bytes, file_bytes);
  LLM_CHECK(file_bytes == expected_bytes,
            "shard {}: trailing bytes: header says {} tokens, expected {} bytes, found {}", path,
            count, expected_bytes, file_bytes);
  shard.num_tokens_ = count;
  return shard;
}

Shard::Shard(Shard&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      num_tokens_(std::exchange(other.num_tokens_, 0)),
      token_bytes_(std::exchange(other.token_bytes_, 0)) {}

Shard& Shard::operator=(Shard&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    num_tokens_ = std::exchange(other.num_tokens_, 0);
    token_bytes_ = std::exchange(other.token_bytes_, 0);
  }
  return *this;
}

Shard::~Shard() { unmap(); }

void Shard::unmap() {
  if (mapping_ != nullptr) ::munmap(const_cast<uint8_t*>(mapping_), mapping_bytes_);
  mapping_ = nullptr;
  mapping_bytes_ = 0;
}

uint32_t Shard::token(int64_t offset) const {
  const uint8_t* tokens = mapping_ + kHeaderBytes;
  if (token_bytes_ == 2) {
    uint16_t narrow;
    std::memcpy(&narrow, tokens + offset * 2, sizeof(narrow));
    return narrow;
  }
  uint32_t value;
  std::memcpy(&value, tokens + offset * 4, sizeof(value));
  return value;
}

void Shard::check_tokens_below(int vocab_size) const {
  const auto bound = static_cast<uint32_t>(vocab_size);
  for (int64_t offset = 0; offset < num_tokens_; ++offset) {
    const uint32_t value = token(offset);
    LLM_CHECK(value < bound,
              "shard {}: token at offset {} has value {} >= vocab size {} (model.vocab_size); "
              "was it prepared with another tokenizer?",
              path_, offset, value, vocab_size);
  }
}

void Shard::read(int64_t start, int64_t count, int32_t* out, int vocab_size) const {
  LLM_CHECK(start >= 0 && count >= 0 && start + count <= num_tokens_,
            "shard {}: read of tokens [{}, {}) is outside its {} tokens", path_, start,
            start + count, num_tokens_);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t offset = start + i;
    const uint32_t value = token(offset);
    LLM_CHECK(value < static_cast<uint32_t>(vocab_size),
              "shard {}: token at offset {} has value {} >= vocab size {}", path_, offset, value,
              vocab_size);
    out[i] = static_cast<int32_t>(value);
  }
}

}  // namespace llm
