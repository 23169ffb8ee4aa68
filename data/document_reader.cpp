// DocumentReader: every file is read through zlib's gzread, which passes
// uncompressed files through as they are, so one reader serves both. JSON
// Lines are parsed a line at a time; plain text and JSON arrays a file at a
// time (their documents need the whole file: a fortune file is recognised by
// any "%" line in it). Each document carries its origin for error messages.
#include "data/document_reader.h"

#include <zlib.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "data/utf8.h"
#include "base/error.h"

namespace llm {
namespace fs = std::filesystem;
namespace {

bool is_text(std::string_view content) {
  return content.find('\0') == std::string_view::npos && is_valid_utf8(content);
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

// Fortune files separate documents by lines that are exactly "%"; other text
// by blank lines. Leading and trailing blank lines of a document are dropped,
// and documents left empty are skipped.
void append_text_documents(std::string_view text, const std::string& origin,
                           std::deque<std::pair<std::string, std::string>>& documents) {
  const std::vector<std::string_view> lines = split_lines(text);
  const bool fortune_format = std::find(lines.begin(), lines.end(), "%") != lines.end();
  std::vector<std::string_view> current;
  auto flush = [&] {
    auto first = std::find_if_not(current.begin(), current.end(), is_blank);
    auto last = std::find_if_not(current.rbegin(), current.rend(), is_blank).base();
    if (first < last) {
      std::string document(*first);
      for (auto line = first + 1; line != last; ++line) document.append("\n").append(*line);
      documents.emplace_back(std::move(document), origin);
    }
    current.clear();
  };
  for (std::string_view line : lines) {
    const bool separator = fortune_format ? line == "%" : is_blank(line);
    if (separator)
      flush();
    else
      current.push_back(line);
  }
  flush();
}

enum class FileFormat { text, json_lines, json };

FileFormat format_of(const std::string& path) {
  fs::path name(path);
  if (name.extension() == ".gz") name = name.stem();
  if (name.extension() == ".jsonl") return FileFormat::json_lines;
  if (name.extension() == ".json") return FileFormat::json;
  return FileFormat::text;
}

// Files in input order, each directory's files sorted; duplicates by real path
// (fortune's X.u8 links to X) are skipped and counted.
std::vector<std::string> collect_input_files(const std::vector<std::string>& inputs,
                                             DocumentCounts& counts) {
  std::vector<std::string> candidates;
  for (const std::string& input : inputs) {
    LLM_CHECK(fs::exists(input), "prepare: input {} does not exist", input);
    if (!fs::is_directory(input)) {
      candidates.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(input)) {
      if (entry.is_regular_file()) found.push_back(entry.path().string());
    }
    std::sort(found.begin(), found.end());
    candidates.insert(candidates.end(), found.begin(), found.end());
  }
  std::vector<std::string> paths;
  std::set<std::string> seen_real_paths;
  for (const std::string& path : candidates) {
    if (seen_real_paths.insert(fs::canonical(path).string()).second) {
      paths.push_back(path);
    } else {
      ++counts.skipped_duplicates;
    }
  }
  return paths;
}

}  // namespace

class DocumentReader::OpenFile {
 public:
  OpenFile(std::string path, const DocumentReaderOptions& options, DocumentCounts& counts)
      : path_(std::move(path)), options_(options), counts_(counts), format_(format_of(path_)) {
    file_.reset(gzopen(path_.c_str(), "rb"));
    LLM_CHECK(file_, "prepare: cannot open {}", path_);
    gzbuffer(file_.get(), 1 << 20);
    if (format_ == FileFormat::text) {
      const std::string content = read_rest();
      if (is_text(content)) {
        append_text_documents(content, path_, queued_);
      } else {
        ++counts_.skipped_not_text;
      }
    } else if (format_ == FileFormat::json && first_non_space() == '[') {
      read_json_array(read_rest());
    }
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  // The file's next document into `out` and where it is into `origin`;
  // false at its end.
  bool next(std::string& out, std::string& origin) {
    if (!queued_.empty()) {
      out = std::move(queued_.front().first);
      origin = std::move(queued_.front().second);
      queued_.pop_front();
      return true;
    }
    if (format_ == FileFormat::text || json_array_) return false;
    std::string line;
    while (read_line(line)) {
      if (is_blank(line)) continue;
      nlohmann::json record;
      try {
        record = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        LLM_FAIL("prepare: {}:{}: not valid JSON: {}", path_, line_number_, e.what());
      }
      origin = fmt::format("{}:{}", path_, line_number_);
      if (take_text(record, origin, out)) return true;
    }
    return false;
  }

  uint64_t bytes_read() const {
    return static_cast<uint64_t>(std::max<z_off_t>(gzoffset(file_.get()), 0));
  }

 private:
  // The record's text field (or its JSON text) into `out`; false for a
  // record skipped without it.
  bool take_text(const nlohmann::json& record, const std::string& where, std::string& out) {
    LLM_CHECK(record.is_object(), "prepare: {}: a record must be a JSON object", where);
    const auto field = record.find(options_.text_field);
    if (field == record.end() || !(options_.field_as_json || field->is_string())) {
      LLM_CHECK(options_.skip_missing_text,
                "prepare: {}: no {}field '{}' (name another with --text-field, or pass "
                "--skip-missing-text to skip such records)",
                where, options_.field_as_json ? "" : "string ", options_.text_field);
      ++counts_.records_missing_text;
      return false;
    }
    out = options_.field_as_json ? field->dump() : field->get<std::string>();
    return true;
  }

  void read_json_array(const std::string& content) {
    json_array_ = true;
    nlohmann::json records;
    try {
      records = nlohmann::json::parse(content);
    } catch (const nlohmann::json::exception& e) {
      LLM_FAIL("prepare: {}: not valid JSON: {}", path_, e.what());
    }
    LLM_CHECK(records.is_array(), "prepare: {}: expected a JSON array of records", path_);
    for (size_t i = 0; i < records.size(); ++i) {
      std::string text, origin = fmt::format("{} record {}", path_, i);
      if (take_text(records[i], origin, text)) queued_.emplace_back(std::move(text), origin);
    }
  }

  bool fill() {
    if (end_of_file_) return false;
    if (position_ > 0) {
      buffer_.erase(0, position_);
      position_ = 0;
    }
    const size_t old = buffer_.size();
    buffer_.resize(old + (1 << 20));
    const int got = gzread(file_.get(), buffer_.data() + old, 1 << 20);
    int error = Z_OK;
    const char* message = gzerror(file_.get(), &error);
    LLM_CHECK(got >= 0 && (error == Z_OK || error == Z_STREAM_END), "prepare: {}: cannot read: {}",
              path_, message);
    buffer_.resize(old + static_cast<size_t>(got));
    if (got == 0) end_of_file_ = true;
    return got > 0;
  }

  bool read_line(std::string& line) {
    while (true) {
      const size_t newline = buffer_.find('\n', position_);
      if (newline != std::string::npos) {
        line.assign(buffer_, position_, newline - position_);
        position_ = newline + 1;
        ++line_number_;
        return true;
      }
      if (!fill()) break;
    }
    if (position_ >= buffer_.size()) return false;
    line.assign(buffer_, position_);
    position_ = buffer_.size();
    ++line_number_;
    return true;
  }

  std::string read_rest() {
    while (fill()) {
    }
    std::string rest = buffer_.substr(position_);
    buffer_.clear();
    position_ = 0;
    return rest;
  }

  char first_non_space() {
    while (true) {
      const size_t at = buffer_.find_first_not_of(" \t\r\n", position_);
      if (at != std::string::npos) return buffer_[at];
      if (!fill()) return '\0';
    }
  }

  std::string path_;
  const DocumentReaderOptions& options_;
  DocumentCounts& counts_;
  FileFormat format_;
  // Closed however the constructor ends: a file whose JSON is refused there
  // must not leak its zlib stream (found by fuzz_prepare_input).
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_{nullptr, gzclose};
  std::string buffer_;
  size_t position_ = 0;
  bool end_of_file_ = false, json_array_ = false;
  int64_t line_number_ = 0;
  std::deque<std::pair<std::string, std::string>> queued_;  // (document, origin)
};

DocumentReader::DocumentReader(const std::vector<std::string>& inputs,
                               DocumentReaderOptions options)
    : options_(std::move(options)) {
  paths_ = collect_input_files(inputs, counts_);
  for (const std::string& path : paths_) input_bytes_ += fs::file_size(path);
}

DocumentReader::~DocumentReader() = default;

bool DocumentReader::open_next_file() {
  if (file_) {
    finished_bytes_ += fs::file_size(paths_[next_path_ - 1]);
    file_.reset();
  }
  if (next_path_ >= paths_.size()) return false;
  file_ = std::make_unique<OpenFile>(paths_[next_path_++], options_, counts_);
  ++counts_.files;
  return true;
}

bool DocumentReader::next_batch(size_t max_bytes, std::vector<std::string>& out,
                                std::vector<std::string>* origins) {
  size_t bytes = 0;
  std::string document, origin;
  while (bytes < max_bytes) {
    if (!file_ || !file_->next(document, origin)) {
      if (!open_next_file()) break;
      continue;
    }
    bytes += document.size() + 1;
    out.push_back(std::move(document));
    if (origins) origins->push_back(origin);
    ++counts_.documents;
  }
  return bytes > 0;
}

uint64_t DocumentReader::bytes_read() const {
  return finished_bytes_ + (file_ ? file_->bytes_read() : 0);
}

}  // namespace llm
