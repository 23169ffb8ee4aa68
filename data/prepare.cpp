// prepare_dataset: documents (document_reader.h) -> train/val split -> token
// shards, with a given tokenizer (streamed, encoded in parallel) or with a
// SentencePiece BPE tokenizer trained here on the train documents. Invariant:
// deterministic: file order is sorted, the split hashes (seed, document index),
// the trainer is single-threaded and seeded, the shards do not depend on the
// number of jobs, and every output file is written to a temporary name, synced
// and renamed into place. Unless quiet, each phase shows its progress and
// result on stdout (base/progress.h). Conversations (chat) go through the
// same reader, encoder and writers, with a mask beside each shard.
#include "data/prepare.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "base/error.h"
#include "base/file_io.h"
#include "base/progress.h"
#include "base/rng.h"
#include "base/system.h"
#include "data/chat_template.h"
#include "data/conversation.h"
#include "data/document_reader.h"
#include "data/loss_mask.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace llm {
namespace fs = std::filesystem;
namespace {

// 3 special pieces (unk, bos, eos) + 256 byte-fallback pieces.
constexpr int kMinVocabSize = 3 + 256 + 1;

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

// Concatenates encoded documents into <split>_000.bin, ... of at most
// shard_tokens tokens each (a document may span two shards), with masks,
// <split>_000.bin.mask, ..., when the documents have them. A shard written
// without a mask loses the mask an earlier run left beside it.
class ShardSequenceWriter {
 public:
  ShardSequenceWriter(const PrepareOptions& options, std::string split, int vocab_size)
      : out_dir_(options.out_dir),
        split_(std::move(split)),
        shard_tokens_(options.shard_tokens),
        vocab_size_(vocab_size),
        with_masks_(options.chat) {}

  void append(const MaskedTokens& document) {
    LLM_CHECK(document.kept.size() == (with_masks_ ? document.ids.size() : 0),
              "prepare: a document of {} tokens has {} mask bytes", document.ids.size(),
              document.kept.size());
    for (size_t i = 0; i < document.ids.size(); ++i) {
      buffer_.push_back(static_cast<uint32_t>(document.ids[i]));
      if (with_masks_) {
        kept_.push_back(document.kept[i]);
        kept_tokens_ += document.kept[i];
      }
      if (static_cast<int64_t>(buffer_.size()) == shard_tokens_) flush();
    }
    ++documents_;
  }

  // Writes the last shard and removes higher-numbered shards of an earlier run.
  void finish() {
    if (!buffer_.empty()) flush();
    for (int stale = shards_written_; fs::exists(shard_path(stale)); ++stale) {
      fs::remove(shard_path(stale));
      fs::remove(loss_mask_path(shard_path(stale)));
    }
  }

  std::string summary() const {
    std::string text = fmt::format("{} {} documents, {} tokens in {} shard(s)", split_, documents_,
                                   tokens_written_, shards_written_);
    if (with_masks_) {
      text += fmt::format(" ({} kept as targets, {:.1f}%)", kept_tokens_,
                          100.0 * static_cast<double>(kept_tokens_) /
                              static_cast<double>(std::max<int64_t>(tokens_written_, 1)));
    }
    return text;
  }

 private:
  std::string shard_path(int index) const {
    return (fs::path(out_dir_) / fmt::format("{}_{:03d}.bin", split_, index)).string();
  }

  void flush() {
    const std::string path = shard_path(shards_written_);
    if (with_masks_)
      loss_mask_write(path, kept_);
    else
      fs::remove(loss_mask_path(path));
    shard_write(path, buffer_, vocab_size_);
    tokens_written_ += static_cast<int64_t>(buffer_.size());
    ++shards_written_;
    buffer_.clear();
    kept_.clear();
  }

  std::string out_dir_;
  std::string split_;
  int64_t shard_tokens_;
  int vocab_size_;
  bool with_masks_;
  std::vector<uint32_t> buffer_;
  std::vector<uint8_t> kept_;  // with masks: one byte per token of buffer_
  int shards_written_ = 0;
  int64_t tokens_written_ = 0, documents_ = 0, kept_tokens_ = 0;
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
  LLM_CHECK(!options.tokenizer.empty() || options.vocab_size >= kMinVocabSize,
            "prepare: vocab size {} is too small: byte fallback needs 3 special + 256 byte "
            "pieces, so at least {}",
            options.vocab_size, kMinVocabSize);
  LLM_CHECK(options.val_fraction >= 0 && options.val_fraction < 1,
            "prepare: val fraction {} must be in [0, 1)", options.val_fraction);
  LLM_CHECK(options.shard_tokens > 0, "prepare: shard tokens {} must be positive",
            options.shard_tokens);
  LLM_CHECK(options.jobs >= 1, "prepare: jobs {} must be at least 1", options.jobs);
  LLM_CHECK(!options.chat || !options.tokenizer.empty(),
            "prepare: conversations need the model's tokenizer (--tokenizer): its special tokens "
            "make the chat format");
  LLM_CHECK(options.chat || options.chat_format.empty(),
            "prepare: --chat-format {} is for conversations (--chat)", options.chat_format);
}

DocumentReaderOptions reader_options(const PrepareOptions& options) {
  DocumentReaderOptions reader;
  reader.text_field = !options.text_field.empty() ? options.text_field
                      : options.chat              ? "messages"
                                                  : "text";
  reader.skip_missing_text = options.skip_missing_text;
  reader.field_as_json = options.chat;
  return reader;
}

std::string reader_summary(const DocumentReader& reader) {
  const DocumentCounts& c = reader.counts();
  std::string text =
      fmt::format("{} file(s), {} skipped as not text, {} as duplicates",
                  c.files - c.skipped_not_text, c.skipped_not_text, c.skipped_duplicates);
  if (c.records_missing_text > 0) {
    text += fmt::format(", {} record(s) without a text field skipped", c.records_missing_text);
  }
  return text;
}

// Encodes every batch that `next_batch` gives, `jobs` documents at a time in
// parallel, and writes them in input order: the shards do not depend on jobs.
// A document is text (BOS + text + EOS) or, given a chat template, the JSON
// of a conversation's messages (rendered with its mask; origins name them).
class ParallelEncoder {
 public:
  ParallelEncoder(const Tokenizer& tokenizer, const ChatTemplate* chat,
                  const PrepareOptions& options)
      : tokenizer_(tokenizer),
        chat_(chat),
        options_(options),
        train_(options, "train", tokenizer.vocab_size()),
        val_(options, "val", tokenizer.vocab_size()) {}

  void encode(const std::vector<std::string>& documents, const std::vector<std::string>& origins) {
    const auto start = std::chrono::steady_clock::now();
    ids_.resize(documents.size());
    std::exception_ptr failure;
    const int count = static_cast<int>(documents.size());
#pragma omp parallel for schedule(dynamic, 8) num_threads(options_.jobs)
    for (int i = 0; i < count; ++i) {
      try {
        const size_t at = static_cast<size_t>(i);
        ids_[at].ids.clear();
        if (chat_)
          chat_->render(conversation_parse(documents[at], origins.at(at)), ids_[at]);
        else
          tokenizer_.encode_document(documents[at], ids_[at].ids);
      } catch (...) {
#pragma omp critical
        failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    encode_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t i = 0; i < documents.size(); ++i) {
      const bool val = is_validation_document(options_.seed, next_index_++, options_.val_fraction);
      (val ? val_ : train_).append(ids_[i]);
      text_bytes_ += documents[i].size();
      tokens_ += ids_[i].ids.size();
    }
  }

  void finish(const std::string& detail_prefix) {
    train_.finish();
    val_.finish();
    if (options_.quiet) return;
    fmt::print("prepare: {}; {}\n", train_.summary(), val_.summary());
    fmt::print(
        "prepare: encoded {} of text into {} tokens in {:.2f} s ({:.1f} MB/s, {} job(s)){}\n",
        format_bytes(static_cast<double>(text_bytes_)), tokens_, encode_seconds_,
        static_cast<double>(text_bytes_) / 1e6 / std::max(encode_seconds_, 1e-9), options_.jobs,
        detail_prefix);
  }

  uint64_t documents() const { return next_index_; }

 private:
  const Tokenizer& tokenizer_;
  const ChatTemplate* chat_;  // null for text
  const PrepareOptions& options_;
  ShardSequenceWriter train_, val_;
  std::vector<MaskedTokens> ids_;
  uint64_t next_index_ = 0, text_bytes_ = 0, tokens_ = 0;
  double encode_seconds_ = 0;
};

// Text bytes per parallel batch and job: large enough to keep every job busy,
// small enough that memory does not grow with the corpus.
constexpr size_t kBatchBytesPerJob = 4 << 20;

// Chat: every conversation is parsed once before any file is written, so a
// malformed record stops prepare with nothing written half-way.
void check_conversations(const PrepareOptions& options) {
  DocumentReader reader(options.inputs, reader_options(options));
  std::vector<std::string> batch, origins;
  while (reader.next_batch(kBatchBytesPerJob, batch, &origins)) {
    for (size_t i = 0; i < batch.size(); ++i) conversation_parse(batch[i], origins[i]);
    batch.clear();
    origins.clear();
  }
}

// --tokenizer: documents stream from the reader through the encoder.
void prepare_with_tokenizer(const PrepareOptions& options) {
  const Tokenizer tokenizer = Tokenizer::load(options.tokenizer);
  std::optional<ChatTemplate> chat;
  if (options.chat) chat = ChatTemplate::for_tokenizer(tokenizer, options.chat_format);
  if (!options.quiet) {
    const std::string layout =
        chat ? fmt::format("conversations in {}, the assistant's tokens kept", chat->name())
             : fmt::format("documents as {}... {}",
                           tokenizer.bos_id() >= 0 ? tokenizer.piece(tokenizer.bos_id()) + " " : "",
                           tokenizer.piece(tokenizer.eos_id()));
    fmt::print("prepare: tokenizer {} ({}, {} ids; {})\n", tokenizer.path(),
               to_string(tokenizer.kind()), tokenizer.vocab_size(), layout);
  }
  DocumentReader reader(options.inputs, reader_options(options));
  if (chat) check_conversations(options);
  fs::create_directories(options.out_dir);
  ParallelEncoder encoder(tokenizer, chat ? &*chat : nullptr, options);
  {
    Progress encoding("prepare: encoding", reader.input_bytes(), phase_options(options));
    std::vector<std::string> batch, origins;
    while (
        reader.next_batch(kBatchBytesPerJob * static_cast<size_t>(options.jobs), batch, &origins)) {
      encoder.encode(batch, origins);
      batch.clear();
      origins.clear();
      encoding.set(reader.bytes_read());
    }
    encoding.set_detail(reader_summary(reader));
  }
  LLM_CHECK(encoder.documents() > 0, "prepare: no documents in {}: {}", list_inputs(options.inputs),
            reader_summary(reader));
  encoder.finish("");
}

// No --tokenizer: every document is read first, a SentencePiece tokenizer is
// trained on the train split, then the documents are encoded with it.
void prepare_training_tokenizer(const PrepareOptions& options) {
  DocumentReader reader(options.inputs, reader_options(options));
  std::vector<std::string> documents;
  {
    Progress reading("prepare: reading", reader.input_bytes(), phase_options(options));
    while (reader.next_batch(kBatchBytesPerJob, documents)) reading.set(reader.bytes_read());
    reading.set_detail(reader_summary(reader));
  }
  LLM_CHECK(!documents.empty(), "prepare: no usable text in {}: {}", list_inputs(options.inputs),
            reader_summary(reader));

  std::vector<std::string> train_documents;
  size_t val_documents = 0;
  for (size_t index = 0; index < documents.size(); ++index) {
    if (is_validation_document(options.seed, index, options.val_fraction))
      ++val_documents;
    else
      train_documents.push_back(documents[index]);
  }
  LLM_CHECK(!train_documents.empty() && val_documents > 0,
            "prepare: the split of {} documents in {} (val fraction {}, seed {}) left {} train "
            "and {} val; each needs at least one",
            documents.size(), list_inputs(options.inputs), options.val_fraction, options.seed,
            train_documents.size(), val_documents);
  if (!options.quiet) {
    fmt::print("prepare: {} documents: {} train, {} val\n", documents.size(),
               train_documents.size(), val_documents);
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
  train_documents = {};
  if (!options.quiet) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - tokenizer_start;
    fmt::print("prepare: tokenizer {} trained in {:.1f} s: vocab size {} (requested {})\n",
               tokenizer.path(), took.count(), tokenizer.vocab_size(), options.vocab_size);
  }
  ParallelEncoder encoder(tokenizer, nullptr, options);
  {
    Progress encoding("prepare: encoding", bytes_of(documents), phase_options(options));
    const size_t batch_bytes = kBatchBytesPerJob * static_cast<size_t>(options.jobs);
    std::vector<std::string> batch;
    size_t batched = 0;
    for (std::string& document : documents) {
      batched += document.size() + 1;
      batch.push_back(std::move(document));
      if (batched >= batch_bytes) {
        encoder.encode(batch, {});
        encoding.add(bytes_of(batch));
        batch.clear();
        batched = 0;
      }
    }
    encoder.encode(batch, {});
    encoding.add(bytes_of(batch));
  }
  encoder.finish("");
}

}  // namespace

void prepare_dataset(const PrepareOptions& options) {
  check_options(options);
  if (options.tokenizer.empty())
    prepare_training_tokenizer(options);
  else
    prepare_with_tokenizer(options);
}

}  // namespace llm
