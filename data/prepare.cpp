// prepare_dataset: text files -> documents -> train/val split -> SentencePiece
// BPE tokenizer (trained on train documents only) -> token shards. Invariant:
// deterministic: file order is sorted, the split hashes (seed, document index),
// the trainer is single-threaded and seeded, and every output file is written
// to a temporary name, synced and renamed into place. Unless quiet, each phase
// shows its progress and result on stdout (runtime/progress.h).
#include "data/prepare.h"

#include <fcntl.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/file_io.h"
#include "runtime/progress.h"
#include "runtime/rng.h"
#include "runtime/system.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace llm {
namespace fs = std::filesystem;
namespace {

// 3 special pieces (unk, bos, eos) + 256 byte-fallback pieces.
constexpr int kMinVocabSize = 3 + 256 + 1;

struct InputFiles {
  std::vector<std::string> paths;  // in reading order, no two with the same real path
  int skipped_duplicates = 0;
};

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    int length;
    uint32_t code_point, minimum;
    if (lead < 0x80) {
      length = 1;
      code_point = lead;
      minimum = 0;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code_point = lead & 0x1F;
      minimum = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code_point = lead & 0x0F;
      minimum = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code_point = lead & 0x07;
      minimum = 0x10000;
    } else
      return false;
    if (i + length > text.size()) return false;
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3F);
    }
    const bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
    if (code_point < minimum || code_point > 0x10FFFF || surrogate) return false;
    i += length;
  }
  return true;
}

bool is_text(std::string_view content) {
  return content.find('\0') == std::string_view::npos && is_valid_utf8(content);
}

// Files in input order, each directory's files sorted; duplicates by real path
// (fortune's X.u8 links to X) are skipped and counted.
InputFiles collect_input_files(const std::vector<std::string>& inputs) {
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
  InputFiles files;
  std::set<std::string> seen_real_paths;
  for (const std::string& path : candidates) {
    if (seen_real_paths.insert(fs::canonical(path).string()).second) {
      files.paths.push_back(path);
    } else {
      ++files.skipped_duplicates;
    }
  }
  return files;
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
void append_documents(std::string_view text, std::vector<std::string>& documents) {
  const std::vector<std::string_view> lines = split_lines(text);
  const bool fortune_format = std::find(lines.begin(), lines.end(), "%") != lines.end();
  std::vector<std::string_view> current;
  auto flush = [&] {
    auto first = std::find_if_not(current.begin(), current.end(), is_blank);
    auto last = std::find_if_not(current.rbegin(), current.rend(), is_blank).base();
    if (first < last) {
      std::string document(*first);
      for (auto line = first + 1; line != last; ++line) document.append("\n").append(*line);
      documents.push_back(std::move(document));
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

bool is_validation_document(uint64_t seed, uint64_t document_index, double val_fraction) {
  return uniform_from_bits(hash_mix(seed, document_index)) < val_fraction;
}

// Feeds documents to the SentencePiece trainer without a temporary file.
class DocumentIterator : public sentencepiece::SentenceIterator {
 public:
  explicit DocumentIterator(const std::vector<std::string>& documents) : documents_(documents) {}
  bool done() const override { return next_ >= documents_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return documents_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& documents_;
  size_t next_ = 0;
};

// Trains the BPE model and writes out_dir/tokenizer.model and tokenizer.vocab.
// Identity normalization without whitespace cleanup keeps decode(encode(x)) == x;
// byte fallback encodes any text without unk; one thread and a fixed seed make
// the model bits reproducible.
std::string train_tokenizer(const std::vector<std::string>& documents,
                            const PrepareOptions& options) {
  size_t longest_document = 0;
  for (const std::string& document : documents) {
    longest_document = std::max(longest_document, document.size());
  }
  const std::unordered_map<std::string, std::string> arguments = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"hard_vocab_limit", "false"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"split_digits", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"max_sentence_length", std::to_string(std::max<size_t>(longest_document, 4192))},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", "1"},
      {"minloglevel", options.quiet ? "2" : "1"},  // its INFO lines are one per merge
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  DocumentIterator sentences(documents);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(arguments, &sentences, &model);
  const std::string model_path = (fs::path(options.out_dir) / "tokenizer.model").string();
  LLM_CHECK(status.ok(), "prepare: training tokenizer {} failed: {}", model_path,
            status.ToString());
  write_file_atomically(model_path, model);

  sentencepiece::SentencePieceProcessor processor;
  LLM_CHECK(processor.LoadFromSerializedProto(model).ok(), "prepare: trained model {} is invalid",
            model_path);
  // One "piece<TAB>score" line per id, for people; a newline in a piece is
  // written as a backslash and "n" so that lines stay one per id.
  std::string vocab;
  for (int id = 0; id < processor.GetPieceSize(); ++id) {
    std::string piece = processor.IdToPiece(id);
    for (size_t at = piece.find('\n'); at != std::string::npos; at = piece.find('\n', at)) {
      piece.replace(at, 1, "\\n");
    }
    vocab += fmt::format("{}\t{}\n", piece, processor.GetScore(id));
  }
  write_file_atomically((fs::path(options.out_dir) / "tokenizer.vocab").string(), vocab);
  return model_path;
}

// Concatenates documents (each prefixed with bos) into <split>_000.bin, ...
class ShardSequenceWriter {
 public:
  ShardSequenceWriter(const PrepareOptions& options, std::string split, const Tokenizer& tokenizer)
      : out_dir_(options.out_dir),
        split_(std::move(split)),
        shard_tokens_(options.shard_tokens),
        tokenizer_(tokenizer) {}

  void append(const std::string& document) {
    buffer_.push_back(static_cast<uint32_t>(tokenizer_.bos_id()));
    for (int id : tokenizer_.encode(document)) {
      if (static_cast<int64_t>(buffer_.size()) == shard_tokens_) flush();
      buffer_.push_back(static_cast<uint32_t>(id));
    }
    if (static_cast<int64_t>(buffer_.size()) == shard_tokens_) flush();
  }

  // Writes the last shard and removes higher-numbered shards of an earlier run.
  void finish() {
    if (!buffer_.empty()) flush();
    for (int stale = shards_written_; fs::exists(shard_path(stale)); ++stale) {
      fs::remove(shard_path(stale));
    }
  }

  int shards_written() const { return shards_written_; }
  int64_t tokens_written() const { return tokens_written_; }

 private:
  std::string shard_path(int index) const {
    return (fs::path(out_dir_) / fmt::format("{}_{:03d}.bin", split_, index)).string();
  }

  void flush() {
    shard_write(shard_path(shards_written_), buffer_, tokenizer_.vocab_size());
    tokens_written_ += static_cast<int64_t>(buffer_.size());
    ++shards_written_;
    buffer_.clear();
  }

  std::string out_dir_;
  std::string split_;
  int64_t shard_tokens_;
  const Tokenizer& tokenizer_;
  std::vector<uint32_t> buffer_;
  int shards_written_ = 0;
  int64_t tokens_written_ = 0;
};

// "a, b, c" for error messages (fmt::join trips a GCC 12 false warning).
std::string list_inputs(const std::vector<std::string>& inputs) {
  std::string list;
  for (const std::string& input : inputs) list += (list.empty() ? "" : ", ") + input;
  return list;
}

uint64_t bytes_of(const std::vector<std::string>& documents) {
  uint64_t bytes = 0;
  for (const std::string& document : documents) bytes += document.size();
  return bytes;
}

// A phase of prepare shown with its bytes: its result on its final line.
ProgressOptions phase_options(const PrepareOptions& options) {
  ProgressOptions phase;
  phase.enabled = !options.quiet;
  phase.unit = ProgressUnit::bytes;
  return phase;
}

void check_options(const PrepareOptions& options) {
  LLM_CHECK(!options.inputs.empty(), "prepare: no input given");
  LLM_CHECK(!options.out_dir.empty(), "prepare: no output directory given");
  LLM_CHECK(options.vocab_size >= kMinVocabSize,
            "prepare: vocab size {} is too small: byte fallback needs 3 special + 256 byte "
            "pieces, so at least {}",
            options.vocab_size, kMinVocabSize);
  LLM_CHECK(options.val_fraction > 0 && options.val_fraction < 1,
            "prepare: val fraction {} must be in (0, 1)", options.val_fraction);
  LLM_CHECK(options.shard_tokens > 0, "prepare: shard tokens {} must be positive",
            options.shard_tokens);
}

}  // namespace

void prepare_dataset(const PrepareOptions& options) {
  check_options(options);
  const InputFiles files = collect_input_files(options.inputs);
  uint64_t input_bytes = 0;
  for (const std::string& path : files.paths) input_bytes += fs::file_size(path);
  std::vector<std::string> documents;
  int text_files = 0, skipped_not_text = 0;
  {
    Progress reading("prepare: reading", input_bytes, phase_options(options));
    for (const std::string& path : files.paths) {
      const std::string content = read_file(path);
      reading.add(content.size());
      if (!is_text(content)) {
        ++skipped_not_text;
        continue;
      }
      ++text_files;
      append_documents(content, documents);
    }
    reading.set_detail(fmt::format("{} text file(s), {} skipped as not text, {} as duplicates",
                                   text_files, skipped_not_text, files.skipped_duplicates));
  }
  LLM_CHECK(!documents.empty(),
            "prepare: no usable text in {}: {} text file(s), {} skipped as not text, {} as "
            "duplicates",
            list_inputs(options.inputs), text_files, skipped_not_text, files.skipped_duplicates);

  std::vector<std::string> train_documents, val_documents;
  for (size_t index = 0; index < documents.size(); ++index) {
    const bool val = is_validation_document(options.seed, index, options.val_fraction);
    (val ? val_documents : train_documents).push_back(std::move(documents[index]));
  }
  LLM_CHECK(!train_documents.empty() && !val_documents.empty(),
            "prepare: the split of {} documents in {} (val fraction {}, seed {}) left {} train "
            "and {} val; each needs at least one",
            documents.size(), list_inputs(options.inputs), options.val_fraction, options.seed,
            train_documents.size(), val_documents.size());
  if (!options.quiet) {
    fmt::print("prepare: {} documents: {} train, {} val\n", documents.size(),
               train_documents.size(), val_documents.size());
  }

  fs::create_directories(options.out_dir);
  if (!options.quiet) {
    // SentencePiece shows no progress of its own below warnings.
    fmt::print(
        "prepare: training a BPE tokenizer of {} pieces on the train documents ({}; "
        "SentencePiece shows no progress)\n",
        options.vocab_size, format_bytes(static_cast<double>(bytes_of(train_documents))));
    std::fflush(stdout);
  }
  const auto tokenizer_start = std::chrono::steady_clock::now();
  const Tokenizer tokenizer = Tokenizer::load(train_tokenizer(train_documents, options));
  if (!options.quiet) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - tokenizer_start;
    fmt::print("prepare: tokenizer {} trained in {:.1f} s: vocab size {} (requested {})\n",
               tokenizer.path(), took.count(), tokenizer.vocab_size(), options.vocab_size);
  }

  for (const auto& [split, split_documents] :
       {std::pair{"train", &train_documents}, std::pair{"val", &val_documents}}) {
    Progress encoding(fmt::format("prepare: encoding {}", split), bytes_of(*split_documents),
                      phase_options(options));
    ShardSequenceWriter writer(options, split, tokenizer);
    for (const std::string& document : *split_documents) {
      writer.append(document);
      encoding.add(document.size());
    }
    writer.finish();
    encoding.set_detail(fmt::format("{} tokens in {} shard(s) in {}", writer.tokens_written(),
                                    writer.shards_written(), options.out_dir));
  }
}

}  // namespace llm
