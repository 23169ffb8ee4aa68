// Loss masks beside their shards: writing (atomic), validation at open, and
// ranged reads through one open descriptor. Every error names the mask file.
#include "data/loss_mask.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

constexpr int kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr const char* kSuffix = ".mask";

}  // namespace

std::string loss_mask_path(const std::string& shard_path) { return shard_path + kSuffix; }

bool is_loss_mask_path(const std::string& path) {
  const std::string suffix = kSuffix;
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void loss_mask_write(const std::string& shard_path, const std::vector<uint8_t>& kept) {
  const std::string path = loss_mask_path(shard_path);
  LLM_CHECK(
      !kept.empty() && kept.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
      "loss mask {}: {} tokens do not fit a mask", path, kept.size());
  int32_t header[kHeaderInts] = {kLossMaskMagic, kLossMaskVersion,
                                 static_cast<int32_t>(kept.size())};
  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
  for (size_t i = 0; i < kept.size(); ++i) {
    LLM_CHECK(kept[i] <= 1, "loss mask {}: byte {} is {}, not 0 or 1", path, i, kept[i]);
  }
  bytes.append(reinterpret_cast<const char*>(kept.data()), kept.size());
  write_file_atomically(path, bytes);
}

std::optional<LossMask> LossMask::open_beside(const std::string& shard_path, int64_t shard_tokens) {
  const std::string path = loss_mask_path(shard_path);
  if (!std::filesystem::exists(path)) return std::nullopt;
  LossMask mask;
  mask.path_ = path;
  mask.file_ = std::make_unique<FileDescriptor>(path, O_RDONLY);
  struct stat info {};
  LLM_CHECK(::fstat(mask.file_->get(), &info) == 0 && S_ISREG(info.st_mode),
            "loss mask {}: not a regular readable file", path);
  const int64_t file_bytes = info.st_size;
  LLM_CHECK(file_bytes >= kHeaderBytes, "loss mask {}: truncated: {} bytes, under the header's {}",
            path, file_bytes, kHeaderBytes);
  int32_t header[3];
  read_file_range(path, 0, sizeof(header), header);
  LLM_CHECK(header[0] == kLossMaskMagic && header[1] == kLossMaskVersion,
            "loss mask {}: bad magic/version {}/{} (expected {}/{})", path, header[0], header[1],
            kLossMaskMagic, kLossMaskVersion);
  LLM_CHECK(header[2] == shard_tokens, "loss mask {}: holds {} tokens but its shard {} holds {}",
            path, header[2], shard_path, shard_tokens);
  LLM_CHECK(file_bytes == kHeaderBytes + shard_tokens,
            "loss mask {}: header says {} tokens, expected {} bytes, found {}", path, header[2],
            kHeaderBytes + shard_tokens, file_bytes);
  mask.num_tokens_ = shard_tokens;
  return mask;
}

LossMask::LossMask(LossMask&&) noexcept = default;
LossMask& LossMask::operator=(LossMask&&) noexcept = default;
LossMask::~LossMask() = default;

void LossMask::read(int64_t start, int64_t count, uint8_t* out) const {
  LLM_CHECK(start >= 0 && count >= 0 && start + count <= num_tokens_,
            "loss mask {}: read of [{}, {}) is outside its {} tokens", path_, start, start + count,
            num_tokens_);
  int64_t done = 0;
  while (done < count) {
    const ssize_t n = ::pread(file_->get(), out + done, static_cast<size_t>(count - done),
                              static_cast<off_t>(kHeaderBytes + start + done));
    if (n < 0 && errno == EINTR) continue;
    LLM_CHECK(n > 0, "loss mask {}: read failed at token {}: {}", path_, start + done,
              n < 0 ? std::strerror(errno) : "unexpected end of file");
    done += n;
  }
  for (int64_t i = 0; i < count; ++i) {
    LLM_CHECK(out[i] <= 1, "loss mask {}: byte of token {} is {}, not 0 or 1", path_, start + i,
              out[i]);
  }
}

}  // namespace llm
