// Tests of the data layer: the shard format and its validation, the sample
// stream of DataLoader, and prepare_dataset (text -> tokenizer + shards).
// Invariant: every test writes only under its own temporary directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "test/temp_dir.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;
// Each test's scratch directory is <temp>/llm_test_data_<pid>_<n>.
constexpr char kTempPrefix[] = "llm_test_data_";

std::string read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

int32_t header_int(const std::string& bytes, int index) {
  int32_t value;
  std::memcpy(&value, bytes.data() + index * sizeof(int32_t), sizeof(value));
  return value;
}

void set_header_int(const std::string& path, int index, int32_t value) {
  std::string bytes = read_bytes(path);
  std::memcpy(bytes.data() + index * sizeof(int32_t), &value, sizeof(value));
  write_bytes(path, bytes);
}

// Runs body, expects an llm::Error, and checks that its message holds every
// one of the given phrases.
void expect_error(const std::function<void()>& body, const std::vector<std::string>& phrases) {
  try {
    body();
    ADD_FAILURE() << "expected an llm::Error";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const std::string& phrase : phrases) {
      EXPECT_NE(message.find(phrase), std::string::npos)
          << "message: " << message << "\nmissing: " << phrase;
    }
  }
}

std::vector<uint32_t> iota_tokens(size_t count, uint32_t first = 0) {
  std::vector<uint32_t> tokens(count);
  for (size_t i = 0; i < count; ++i) tokens[i] = first + static_cast<uint32_t>(i);
  return tokens;
}

// ---- shards ---------------------------------------------------------------

void expect_round_trip(int vocab_size, int32_t magic, int32_t version, int token_bytes) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("shard.bin");
  std::vector<uint32_t> tokens = {0, 1, 2, static_cast<uint32_t>(vocab_size - 1), 12345, 7};
  shard_write(path, tokens, vocab_size);

  const std::string bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), 256 * 4 + tokens.size() * token_bytes);
  EXPECT_EQ(header_int(bytes, 0), magic);
  EXPECT_EQ(header_int(bytes, 1), version);
  EXPECT_EQ(header_int(bytes, 2), static_cast<int32_t>(tokens.size()));
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header_int(bytes, i), 0) << "header int " << i;
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const Shard shard = Shard::open(path);
  EXPECT_EQ(shard.num_tokens(), static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(shard.token_bytes(), token_bytes);
  EXPECT_EQ(shard.path(), path);
  std::vector<int32_t> read(tokens.size());
  shard.read(0, static_cast<int64_t>(tokens.size()), read.data(), vocab_size);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.end()), read);
  std::vector<int32_t> middle(2);
  shard.read(3, 2, middle.data(), vocab_size);
  EXPECT_EQ(middle, (std::vector<int32_t>{vocab_size - 1, 12345}));
}

TEST(DataShard, RoundTripUint16ForVocab50000) { expect_round_trip(50000, 20240520, 1, 2); }

TEST(DataShard, RoundTripUint32ForVocab100000) { expect_round_trip(100000, 20240801, 7, 4); }

TEST(DataShard, ShardIsMovable) {
  TempDir dir(kTempPrefix);
  shard_write(dir.file("a.bin"), iota_tokens(10), 100);
  Shard first = Shard::open(dir.file("a.bin"));
  Shard moved = std::move(first);
  std::vector<Shard> shards;
  shards.push_back(std::move(moved));
  std::vector<int32_t> read(10);
  shards[0].read(0, 10, read.data(), 100);
  EXPECT_EQ(read[9], 9);
}

TEST(DataShard, BadMagicIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("magic.bin");
  shard_write(path, iota_tokens(10), 100);
  set_header_int(path, 0, 12345);
  expect_error([&] { Shard::open(path); }, {path, "bad magic 12345"});
}

TEST(DataShard, VersionNotMatchingMagicIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("version.bin");
  shard_write(path, iota_tokens(10), 100);
  set_header_int(path, 1, 7);  // the uint32 variant's version with the uint16 magic
  expect_error([&] { Shard::open(path); }, {path, "bad version 7"});
}

TEST(DataShard, TruncatedFileIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("truncated.bin");
  shard_write(path, iota_tokens(10), 100);
  fs::resize_file(path, 256 * 4 + 10 * 2 - 1);
  expect_error([&] { Shard::open(path); }, {path, "truncated", "expected 1044 bytes, found 1043"});
}

TEST(DataShard, FileShorterThanHeaderIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("short.bin");
  write_bytes(path, "tiny");
  expect_error([&] { Shard::open(path); }, {path, "truncated", "4 bytes"});
}

TEST(DataShard, TrailingBytesAreAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("trailing.bin");
  shard_write(path, iota_tokens(10), 100);
  std::ofstream(path, std::ios::binary | std::ios::app) << "xy";
  expect_error([&] { Shard::open(path); },
               {path, "trailing bytes", "expected 1044 bytes, found 1046"});
}

TEST(DataShard, HeaderTokenCountMismatchIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("count.bin");
  shard_write(path, iota_tokens(10), 100);
  set_header_int(path, 2, 11);
  expect_error([&] { Shard::open(path); }, {path, "header says 11 tokens", "found 1044"});
  set_header_int(path, 2, 9);
  expect_error([&] { Shard::open(path); }, {path, "header says 9 tokens", "trailing bytes"});
  set_header_int(path, 2, 0);
  expect_error([&] { Shard::open(path); }, {path, "token count 0 must be positive"});
}

TEST(DataShard, OutOfRangeTokenIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("range.bin");
  shard_write(path, {5, 6, 40000, 7}, 50000);
  const Shard shard = Shard::open(path);
  std::vector<int32_t> read(4);
  expect_error([&] { shard.read(0, 4, read.data(), 30000); },
               {path, "offset 2", "value 40000", "vocab size 30000"});
  expect_error(
      [&] {
        shard_write(dir.file("bad.bin"), {1, 300}, 256);
      },
      {"bad.bin", "offset 1", "value 300", "vocab size 256"});
}

TEST(DataShard, ReadOutsideTheShardIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("outside.bin");
  shard_write(path, iota_tokens(10), 100);
  const Shard shard = Shard::open(path);
  std::vector<int32_t> read(4);
  expect_error([&] { shard.read(8, 4, read.data(), 100); }, {path, "[8, 12)", "outside"});
}

TEST(DataShard, MissingFileIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string path = dir.file("missing.bin");
  expect_error([&] { Shard::open(path); }, {path, "cannot open"});
}

// ---- loader ---------------------------------------------------------------

// Shards whose token at offset i of shard s has value s * 1000 + i, so every
// token read back names its shard and offset.
std::string write_labelled_shards(const TempDir& dir, const std::vector<size_t>& sizes) {
  for (size_t s = 0; s < sizes.size(); ++s) {
    shard_write(dir.file("train_" + std::to_string(s) + ".bin"),
                iota_tokens(sizes[s], static_cast<uint32_t>(s * 1000)), 10000);
  }
  return dir.file("train_*.bin");
}

std::vector<int32_t> read_first_tokens(DataLoader& loader, int64_t start, int count) {
  const int seq_len = loader.seq_len();
  std::vector<int32_t> inputs(static_cast<size_t>(count) * seq_len), targets(inputs.size());
  loader.read(start, count, inputs.data(), targets.data());
  std::vector<int32_t> first_tokens;
  for (int row = 0; row < count; ++row) first_tokens.push_back(inputs[row * seq_len]);
  return first_tokens;
}

TEST(DataLoader, TargetsAreInputsShiftedByOne) {
  TempDir dir(kTempPrefix);
  DataLoader loader(write_labelled_shards(dir, {50}), 8, 10000, 1, false);
  ASSERT_EQ(loader.num_samples(), 6);  // (50 - 1) / 8
  std::vector<int32_t> inputs(3 * 8), targets(3 * 8);
  loader.read(1, 3, inputs.data(), targets.data());
  for (int row = 0; row < 3; ++row) {
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(inputs[row * 8 + t], (row + 1) * 8 + t);
      EXPECT_EQ(targets[row * 8 + t], inputs[row * 8 + t] + 1);
    }
  }
}

TEST(DataLoader, NoShuffleIsFileOrder) {
  TempDir dir(kTempPrefix);
  DataLoader loader(write_labelled_shards(dir, {17, 9}), 4, 10000, 1, false);
  ASSERT_EQ(loader.num_samples(), 6);  // 4 + 2
  const std::vector<int32_t> file_order = {0, 4, 8, 12, 1000, 1004};
  EXPECT_EQ(read_first_tokens(loader, 0, 6), file_order);
  EXPECT_EQ(read_first_tokens(loader, 6, 6), file_order);  // the next epoch repeats it
}

TEST(DataLoader, ShuffleCoversEachSampleOncePerEpoch) {
  TempDir dir(kTempPrefix);
  DataLoader loader(write_labelled_shards(dir, {101, 41, 66}), 5, 10000, 7, true);
  const int64_t n = loader.num_samples();
  ASSERT_EQ(n, 20 + 8 + 13);
  for (int epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int32_t> order = read_first_tokens(loader, epoch * n, static_cast<int>(n));
    const std::set<int32_t> distinct(order.begin(), order.end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(n)) << "epoch " << epoch;
  }
}

TEST(DataLoader, EpochsHaveDifferentOrders) {
  TempDir dir(kTempPrefix);
  DataLoader loader(write_labelled_shards(dir, {201}), 4, 10000, 7, true);
  const int n = static_cast<int>(loader.num_samples());
  const std::vector<int32_t> epoch0 = read_first_tokens(loader, 0, n);
  const std::vector<int32_t> epoch1 = read_first_tokens(loader, n, n);
  EXPECT_NE(epoch0, epoch1);
  std::vector<int32_t> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(epoch0, sorted);  // shuffled, not file order
}

TEST(DataLoader, SameSeedSameOrderAndReadsAreStateless) {
  TempDir dir(kTempPrefix);
  const std::string pattern = write_labelled_shards(dir, {201, 77});
  DataLoader first(pattern, 4, 10000, 42, true);
  DataLoader second(pattern, 4, 10000, 42, true);
  DataLoader other_seed(pattern, 4, 10000, 43, true);
  const int n = static_cast<int>(first.num_samples());
  const std::vector<int32_t> two_epochs = read_first_tokens(first, 0, 2 * n);
  EXPECT_EQ(two_epochs, read_first_tokens(second, 0, 2 * n));
  EXPECT_NE(two_epochs, read_first_tokens(other_seed, 0, 2 * n));
  // Jumping around (as a resumed run does) gives the same samples.
  EXPECT_EQ(read_first_tokens(second, n + 3, 1)[0], two_epochs[n + 3]);
  EXPECT_EQ(read_first_tokens(second, 5, 1)[0], two_epochs[5]);
  EXPECT_EQ(read_first_tokens(second, 2 * n - 1, 1)[0], two_epochs[2 * n - 1]);
}

TEST(DataLoader, SamplesNeverCrossShardBoundaries) {
  TempDir dir(kTempPrefix);
  // The middle shard holds 4 tokens: too few for one sample of 4 + 1 tokens.
  DataLoader loader(write_labelled_shards(dir, {14, 4, 13}), 4, 10000, 3, true);
  ASSERT_EQ(loader.num_samples(), 3 + 0 + 3);
  const int n = static_cast<int>(loader.num_samples());
  std::vector<int32_t> inputs(n * 4), targets(n * 4);
  loader.read(0, n, inputs.data(), targets.data());
  for (int row = 0; row < n; ++row) {
    const int32_t first = inputs[row * 4];
    EXPECT_EQ(first % 1000 % 4, 0) << "sample starts at a multiple of seq_len";
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(inputs[row * 4 + t], first + t);
      EXPECT_EQ(targets[row * 4 + t], first + t + 1);
      EXPECT_EQ(targets[row * 4 + t] / 1000, first / 1000) << "crossed into the next shard";
    }
  }
}

TEST(DataLoader, GlobWithNoMatchIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string pattern = dir.file("nothing_*.bin");
  expect_error([&] { DataLoader(pattern, 4, 100, 1, true); }, {pattern, "no file matches"});
}

TEST(DataLoader, TooFewTokensForOneSampleIsAnError) {
  TempDir dir(kTempPrefix);
  const std::string pattern = write_labelled_shards(dir, {4, 3});
  expect_error([&] { DataLoader(pattern, 4, 10000, 1, true); },
               {pattern, "7 tokens", "seq_len + 1 = 5"});
}

// Found when the shard opens (before training), not when its sample comes up.
TEST(DataLoader, OutOfRangeTokenNamesTheShardAtOpen) {
  TempDir dir(kTempPrefix);
  const std::string pattern = write_labelled_shards(dir, {20, 20});
  expect_error(
      [&] { DataLoader(pattern, 4, 1010, 1, false); },
      {dir.file("train_1.bin"), "offset 10", "value 1010", "vocab size 1010", "model.vocab_size"});
}

// ---- prepare --------------------------------------------------------------

// An English-like corpus of `paragraphs` blank-line separated paragraphs.
std::string make_corpus(int paragraphs) {
  const std::vector<std::string> words = {
      "the",    "model", "reads", "tokens", "and",  "learns", "to",    "predict",  "next",
      "word",   "from",  "a",     "small",  "text", "while",  "loss",  "falls",    "slowly",
      "during", "every", "step",  "of",     "its",  "long",   "quiet", "training", "run"};
  std::string corpus;
  uint64_t state = 12345;
  for (int p = 0; p < paragraphs; ++p) {
    for (int sentence = 0; sentence < 3; ++sentence) {
      for (int w = 0; w < 9; ++w) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        corpus += words[(state >> 33) % words.size()];
        corpus += w == 8 ? ". " : " ";
      }
    }
    corpus += "\n\n";
  }
  return corpus;
}

PrepareOptions small_options(const std::vector<std::string>& inputs, const std::string& out_dir) {
  PrepareOptions options;
  options.inputs = inputs;
  options.out_dir = out_dir;
  options.vocab_size = 320;
  options.val_fraction = 0.2;
  options.quiet = true;
  return options;
}

// All tokens of <split>_000.bin, <split>_001.bin, ... in out_dir.
std::vector<int32_t> read_split(const std::string& out_dir, const std::string& split,
                                int vocab_size) {
  std::vector<int32_t> tokens;
  for (int index = 0;; ++index) {
    char name[32];
    std::snprintf(name, sizeof(name), "%s_%03d.bin", split.c_str(), index);
    const fs::path path = fs::path(out_dir) / name;
    if (!fs::exists(path)) break;
    const Shard shard = Shard::open(path.string());
    const size_t old_size = tokens.size();
    tokens.resize(old_size + shard.num_tokens());
    shard.read(0, shard.num_tokens(), tokens.data() + old_size, vocab_size);
  }
  return tokens;
}

int64_t count_documents(const std::vector<int32_t>& tokens, int bos_id) {
  return std::count(tokens.begin(), tokens.end(), bos_id);
}

TEST(DataPrepare, ProducesTokenizerAndShards) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("corpus.txt"), make_corpus(40));
  const std::string out = dir.file("out");  // created by prepare
  prepare_dataset(small_options({dir.file("corpus.txt")}, out));

  const Tokenizer tokenizer = Tokenizer::load(out + "/tokenizer.model");
  EXPECT_TRUE(fs::exists(out + "/tokenizer.vocab"));
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_GT(tokenizer.vocab_size(), 259);
  EXPECT_LE(tokenizer.vocab_size(), 320);
  const std::vector<int32_t> train = read_split(out, "train", tokenizer.vocab_size());
  const std::vector<int32_t> val = read_split(out, "val", tokenizer.vocab_size());
  ASSERT_FALSE(train.empty());
  ASSERT_FALSE(val.empty());
  EXPECT_EQ(train.front(), tokenizer.bos_id());
  EXPECT_EQ(val.front(), tokenizer.bos_id());
  EXPECT_EQ(count_documents(train, 1) + count_documents(val, 1), 40);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_NE(entry.path().extension(), ".tmp") << "left a temporary file: " << entry.path();
  }
}

TEST(DataPrepare, IsDeterministic) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("corpus.txt"), make_corpus(30));
  prepare_dataset(small_options({dir.file("corpus.txt")}, dir.file("first")));
  prepare_dataset(small_options({dir.file("corpus.txt")}, dir.file("second")));
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(dir.file("first"))) {
    const fs::path twin = dir.path() / "second" / entry.path().filename();
    EXPECT_EQ(read_bytes(entry.path().string()), read_bytes(twin.string())) << twin;
    ++compared;
  }
  EXPECT_EQ(compared, 4);  // tokenizer.model, tokenizer.vocab, train_000.bin, val_000.bin
}

TEST(DataPrepare, EncodeDecodeRoundTrip) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("corpus.txt"), make_corpus(30));
  prepare_dataset(small_options({dir.file("corpus.txt")}, dir.file("out")));
  const Tokenizer tokenizer = Tokenizer::load(dir.file("out") + "/tokenizer.model");
  // Characters never seen in training go through byte fallback, never to unk.
  const std::string text = "The model  reads\ttokens.\nZebra ünïcödé 😀 price: 1234 \n  indented";
  const std::vector<int> ids = tokenizer.encode(text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 0) << "no unk";
  EXPECT_EQ(tokenizer.decode(ids), text);
}

TEST(DataPrepare, SplitsFortuneFormat) {
  TempDir dir(kTempPrefix);
  std::string fortunes;
  for (int i = 0; i < 30; ++i) {
    fortunes += "A fortune about the model, number " + std::to_string(i) + ".\n";
    fortunes += "\n\tIt keeps a blank line inside.\n%\n";  // "%" ends a fortune
  }
  fortunes += "%\n";  // an empty fortune is dropped
  write_bytes(dir.file("fortunes"), fortunes);
  PrepareOptions options = small_options({dir.file("fortunes")}, dir.file("out"));
  options.val_fraction = 0.3;
  prepare_dataset(options);
  const Tokenizer tokenizer = Tokenizer::load(dir.file("out") + "/tokenizer.model");
  const std::vector<int32_t> train = read_split(dir.file("out"), "train", tokenizer.vocab_size());
  const std::vector<int32_t> val = read_split(dir.file("out"), "val", tokenizer.vocab_size());
  EXPECT_EQ(count_documents(train, 1) + count_documents(val, 1), 30);
  // The first train document decodes to one whole fortune, blank line included.
  const auto second_bos = std::find(train.begin() + 1, train.end(), 1);
  const std::string first = tokenizer.decode(std::vector<int>(train.begin() + 1, second_bos));
  EXPECT_NE(first.find(".\n\n\tIt keeps a blank line inside."), std::string::npos) << first;
  EXPECT_EQ(first.find('%'), std::string::npos) << first;
}

TEST(DataPrepare, SkipsNonTextAndDuplicateFiles) {
  TempDir dir(kTempPrefix);
  fs::create_directories(dir.file("in/sub"));
  write_bytes(dir.file("in/sub/corpus"), make_corpus(25));
  fs::create_symlink("corpus", dir.file("in/sub/corpus.u8"));  // fortune's duplicate
  write_bytes(dir.file("in/corpus.dat"), std::string("\x00\x01\x02\x03", 4));
  write_bytes(dir.file("in/latin1.txt"), "caf\xe9 au lait\n");  // invalid UTF-8
  prepare_dataset(small_options({dir.file("in")}, dir.file("out")));
  const int vocab = Tokenizer::load(dir.file("out") + "/tokenizer.model").vocab_size();
  EXPECT_EQ(count_documents(read_split(dir.file("out"), "train", vocab), 1) +
                count_documents(read_split(dir.file("out"), "val", vocab), 1),
            25);
}

TEST(DataPrepare, WritesShardsOfAtMostShardTokensAndRemovesStaleOnes) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("corpus.txt"), make_corpus(30));
  PrepareOptions options = small_options({dir.file("corpus.txt")}, dir.file("out"));
  prepare_dataset(options);
  const int vocab = Tokenizer::load(dir.file("out") + "/tokenizer.model").vocab_size();
  const std::vector<int32_t> whole = read_split(dir.file("out"), "train", vocab);

  options.shard_tokens = 100;
  prepare_dataset(options);
  EXPECT_EQ(read_split(dir.file("out"), "train", vocab), whole);
  ASSERT_TRUE(fs::exists(dir.file("out/train_002.bin")));
  for (int index = 0; fs::exists(dir.file("out/train_00" + std::to_string(index) + ".bin"));
       ++index) {
    EXPECT_LE(Shard::open(dir.file("out/train_00" + std::to_string(index) + ".bin")).num_tokens(),
              100);
  }

  options.shard_tokens = 100'000'000;
  prepare_dataset(options);
  EXPECT_FALSE(fs::exists(dir.file("out/train_001.bin"))) << "stale shard left behind";
  EXPECT_EQ(read_split(dir.file("out"), "train", vocab), whole);
}

TEST(DataPrepare, NothingUsableIsAnError) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("index.dat"), std::string("\x00\x00\x01", 3));
  write_bytes(dir.file("empty.txt"), "\n\n  \n");
  expect_error([&] { prepare_dataset(small_options({dir.path().string()}, dir.file("out"))); },
               {dir.path().string(), "no usable text", "1 skipped as not text"});
  expect_error([&] { prepare_dataset(small_options({dir.file("absent")}, dir.file("out"))); },
               {dir.file("absent"), "does not exist"});
}

TEST(DataPrepare, SplitWithoutValidationDocumentIsAnError) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("one.txt"), "A single paragraph cannot feed both splits.\n");
  expect_error([&] { prepare_dataset(small_options({dir.file("one.txt")}, dir.file("out"))); },
               {dir.file("one.txt"), "each needs at least one"});
}

TEST(DataPrepare, VocabTooSmallForByteFallbackIsAnError) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("corpus.txt"), make_corpus(10));
  PrepareOptions options = small_options({dir.file("corpus.txt")}, dir.file("out"));
  options.vocab_size = 256;
  expect_error([&] { prepare_dataset(options); }, {"vocab size 256", "at least 260"});
}

}  // namespace
}  // namespace llm
