// prepare's inputs: JSON Lines, JSON arrays and gzip through DocumentReader
// (documents, order, the text field, missing-field errors), and prepare with
// a given tokenizer: documents bracketed by BOS and EOS, shards identical for
// any number of jobs.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/document_reader.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "error_of.h"
#include "base/file_io.h"
#include "test/temp_dir.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;
using test_support::TempDir;
constexpr char kTempPrefix[] = "llm_test_reader_";

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

std::vector<std::string> read_all(const std::vector<std::string>& inputs,
                                  DocumentReaderOptions options = {}, size_t batch = 1 << 20) {
  DocumentReader reader(inputs, std::move(options));
  std::vector<std::string> documents;
  while (reader.next_batch(batch, documents)) {
  }
  return documents;
}

TEST(DocumentReader, ReadsJsonLinesJsonArraysAndGzipInOrder) {
  TempDir dir(kTempPrefix);
  fs::create_directories(dir.file("in"));
  write_file_atomically(dir.file("in/a.jsonl"),
                        "{\"text\": \"first\", \"id\": 1}\n\n{\"text\": \"sec\\nond \\u00e9\"}\n");
  write_file_atomically(dir.file("in/b.json"), "[{\"text\": \"third\"}, {\"text\": \"\"}]");
  write_file_atomically(dir.file("in/c.json"), "{\"text\": \"fifth, JSON Lines named .json\"}");
  write_gzip(dir.file("in/d.jsonl.gz"), "{\"text\": \"sixth\"}\n{\"text\": \"seventh\"}");
  write_gzip(dir.file("in/e.txt.gz"), "eighth, plain\n\nninth\n");
  const std::vector<std::string> expected = {
      "first", "sec\nond \xC3\xA9", "third",         "",     "fifth, JSON Lines named .json",
      "sixth", "seventh",           "eighth, plain", "ninth"};
  EXPECT_EQ(read_all({dir.file("in")}), expected);
  // One document per batch when the batch is one byte: streamed, same order.
  EXPECT_EQ(read_all({dir.file("in")}, {}, 1), expected);
}

TEST(DocumentReader, ReadsTheNamedTextField) {
  TempDir dir(kTempPrefix);
  write_file_atomically(dir.file("a.jsonl"), "{\"content\": \"one\", \"text\": \"not this\"}\n");
  EXPECT_EQ(read_all({dir.file("a.jsonl")}, {"content", false}), std::vector<std::string>{"one"});
}

TEST(DocumentReader, ARecordWithoutTheFieldIsAnErrorUnlessSkipped) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("a.jsonl");
  write_file_atomically(path, "{\"text\": \"one\"}\n{\"body\": \"two\"}\n{\"text\": 3}\n");
  const std::string error = error_of([&] { read_all({path}); });
  EXPECT_NE(error.find(path + ":2: no string field 'text'"), std::string::npos) << error;
  DocumentReader reader({path}, {"text", true});
  std::vector<std::string> documents;
  while (reader.next_batch(1 << 20, documents)) {
  }
  EXPECT_EQ(documents, std::vector<std::string>{"one"});
  EXPECT_EQ(reader.counts().records_missing_text, 2);
  write_file_atomically(path, "{\"text\": \"one\"}\n{\"text\": \"unterminated\n");
  EXPECT_NE(error_of([&] { read_all({path}); }).find(path + ":2: not valid JSON"),
            std::string::npos);
}

// A .json whose array does not parse is refused naming the file (its zlib
// stream was leaked before: fuzz_prepare_input).
TEST(DocumentReader, AJsonArrayThatDoesNotParseIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("a.json");
  write_file_atomically(path, "[{\"text;: \"a\"}]");
  EXPECT_NE(error_of([&] { read_all({path}); }).find(path + ": not valid JSON"), std::string::npos);
}

std::vector<uint32_t> read_tokens(const std::string& path) {
  const Shard shard = Shard::open(path);
  std::vector<int32_t> tokens(static_cast<size_t>(shard.num_tokens()));
  shard.read(0, shard.num_tokens(), tokens.data(), 1 << 30);
  return {tokens.begin(), tokens.end()};
}

TEST(DataPrepare, WithATokenizerBracketsDocumentsAndIgnoresTheJobCount) {
  TempDir dir(kTempPrefix);
  std::string records;
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) {
    texts.push_back("Document " + std::to_string(i) + " tells of the model and the data, " +
                    std::string(static_cast<size_t>(i % 7), '!') + " caf\xC3\xA9.");
    records += "{\"text\": \"" + texts.back() + "\"}\n";
  }
  write_gzip(dir.file("corpus.jsonl.gz"), records);
  PrepareOptions train;  // first a SentencePiece tokenizer of our own to encode with
  train.inputs = {dir.file("corpus.jsonl.gz")};
  train.out_dir = dir.file("trained");
  train.vocab_size = 320;
  train.quiet = true;
  prepare_dataset(train);
  const std::string tokenizer_path = dir.file("trained/tokenizer.model");
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_path);

  std::vector<std::string> shards;
  for (int jobs : {1, 3}) {
    PrepareOptions options;
    options.inputs = {dir.file("corpus.jsonl.gz")};
    options.out_dir = dir.file("jobs" + std::to_string(jobs));
    options.tokenizer = tokenizer_path;
    options.val_fraction = 0;
    options.shard_tokens = 1000;
    options.jobs = jobs;
    options.quiet = true;
    prepare_dataset(options);
    std::string all;
    for (int shard = 0; fs::exists(options.out_dir + fmt::format("/train_{:03d}.bin", shard));
         ++shard) {
      all += read_file(options.out_dir + fmt::format("/train_{:03d}.bin", shard));
    }
    EXPECT_FALSE(fs::exists(options.out_dir + "/val_000.bin"));
    shards.push_back(all);
  }
  EXPECT_EQ(shards[0], shards[1]) << "the shards depend on the number of jobs";

  // Every document in order, as BOS + its ids + EOS.
  std::vector<uint32_t> expected;
  for (const std::string& text : texts) {
    std::vector<int> ids;
    tokenizer.encode_document(text, ids);
    EXPECT_EQ(ids.front(), tokenizer.bos_id());
    EXPECT_EQ(ids.back(), tokenizer.eos_id());
    EXPECT_EQ(tokenizer.decode(std::vector<int>(ids.begin() + 1, ids.end() - 1)), text);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  std::vector<uint32_t> written;
  for (int shard = 0; fs::exists(dir.file(fmt::format("jobs1/train_{:03d}.bin", shard))); ++shard) {
    const std::vector<uint32_t> tokens =
        read_tokens(dir.file(fmt::format("jobs1/train_{:03d}.bin", shard)));
    EXPECT_LE(tokens.size(), 1000u);
    written.insert(written.end(), tokens.begin(), tokens.end());
  }
  EXPECT_EQ(written, expected);
}

}  // namespace
}  // namespace llm
