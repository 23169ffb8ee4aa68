// The documents of prepare's inputs, streamed in order: files and directories
// (recursed, each directory's files sorted; a file reached twice through links
// read once), each optionally gzip-compressed (.gz):
//   - .jsonl: one JSON object per line, the document in its text field;
//   - .json: a JSON array of such objects, or JSON Lines under that name;
//   - anything else: UTF-8 text, documents separated by blank lines (or by
//     "%" lines in fortune files); files that are not UTF-8 text are skipped.
// Invariant: memory holds one batch of documents (and, for plain text and
// .json arrays, one file), never the corpus; the same inputs give the same
// documents in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llm {

struct DocumentReaderOptions {
  std::string text_field = "text";  // of JSON records
  bool skip_missing_text = false;   // skip and count records without it, instead of failing
  bool field_as_json = false;       // the field's JSON text (a chat's messages), any JSON type
};

struct DocumentCounts {
  int files = 0;               // read
  int skipped_not_text = 0;    // plain files that are not UTF-8 text
  int skipped_duplicates = 0;  // the same file reached again
  int64_t records_missing_text = 0;
  int64_t documents = 0;  // given out so far
};

class DocumentReader {
 public:
  DocumentReader(const std::vector<std::string>& inputs, DocumentReaderOptions options);
  ~DocumentReader();

  // Appends the next documents, about `max_bytes` of them (at least one),
  // to `out`, and where each came from to `origins` when given ("file:line"
  // of JSON Lines, "file record i" of a JSON array, the file of plain text);
  // false when there were none left.
  bool next_batch(size_t max_bytes, std::vector<std::string>& out,
                  std::vector<std::string>* origins = nullptr);

  uint64_t input_bytes() const { return input_bytes_; }  // of all files, as stored
  uint64_t bytes_read() const;                           // of them so far, as stored
  const DocumentCounts& counts() const { return counts_; }

  class OpenFile;  // the file being read (document_reader.cpp)

 private:
  bool open_next_file();

  std::vector<std::string> paths_;
  DocumentReaderOptions options_;
  DocumentCounts counts_;
  uint64_t input_bytes_ = 0, finished_bytes_ = 0;
  size_t next_path_ = 0;
  std::unique_ptr<OpenFile> file_;
};

}  // namespace llm
