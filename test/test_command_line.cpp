// The command line: subcommand, options, config overrides in both forms
// (--section.key=value and --section.key value), "did you mean" suggestions,
// and sizes that must carry a unit.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "cost_models/planner.h"
#include "base/cli_values.h"
#include "base/error.h"
#include "test/error_of.h"

namespace llm {
namespace {

constexpr std::string_view kFlags[] = {"quiet", "modes"};

CommandLine parse(std::vector<const char*> words) {
  words.insert(words.begin(), "./train");
  return parse_command_line(static_cast<int>(words.size()), words.data(), kFlags);
}

using test_support::error_of;

// Regression: `--training.steps 5` said "unknown option" for a key that exists.
TEST(CommandLine, OverridesTakeTheValueAfterAnEqualsSignOrASpace) {
  CommandLine line = parse({"bench", "--config", "tiny", "--training.steps", "5", "--model.dim=64",
                            "--modes", "--data.train=a=b.bin"});
  EXPECT_EQ(line.command, "bench");
  EXPECT_EQ(line.overrides,
            (std::vector<std::string>{"training.steps=5", "model.dim=64", "data.train=a=b.bin"}));
  ASSERT_EQ(line.options.size(), 2u);
  EXPECT_EQ(line.options[0], (std::pair<std::string, std::string>{"config", "tiny"}));
  EXPECT_EQ(line.options[1], (std::pair<std::string, std::string>{"modes", ""}));
}

TEST(CommandLine, AnOptionValueWithADotIsNotAnOverride) {
  CommandLine line = parse({"--config=configs/tiny.toml", "--quiet"});
  EXPECT_EQ(line.command, "train");
  EXPECT_TRUE(line.overrides.empty());
  ASSERT_EQ(line.options.size(), 2u);
  EXPECT_EQ(line.options[0].second, "configs/tiny.toml");
}

TEST(CommandLine, MissingValuesAndStrayWordsAreErrors) {
  EXPECT_EQ(
      error_of([] {
        parse({"--config", "tiny", "--training.steps"});
      }),
      "option --training.steps needs a value (--training.steps=VALUE or --training.steps VALUE)");
  EXPECT_NE(error_of([] {
              parse({"--config", "tiny", "5"});
            }).find("unexpected argument '5'"),
            std::string::npos);
}

TEST(CommandLine, SuggestsTheClosestNameOnlyWhenClose) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", "abc"), 0u);
  const std::vector<std::string> names = {"config", "world", "gpu-memory", "shard-group"};
  EXPECT_EQ(did_you_mean("gpu-memroy", names), " (did you mean 'gpu-memory'?)");
  EXPECT_EQ(did_you_mean("confg", names), " (did you mean 'config'?)");
  EXPECT_EQ(did_you_mean("steps", names), "");
}

// Regression: `--gpu-memory 80` was read as 80 bytes.
TEST(CommandLine, SizesWithoutAUnitAreRefused) {
  EXPECT_EQ(error_of([] { parse_bytes("80", "--gpu-memory"); }),
            "--gpu-memory: '80' has no unit; write it with one, e.g. 80GiB, 80GB or 80B");
  EXPECT_EQ(parse_bytes("80GiB", "--gpu-memory"), 80ull << 30);
  EXPECT_EQ(parse_bytes("40GB", "--gpu-memory"), 40'000'000'000ull);
  EXPECT_EQ(parse_bytes("1000B", "--gpu-memory"), 1000u);
  EXPECT_NE(error_of([] { parse_bytes("80 parsecs", "x"); }).find("expected a size like 80GiB"),
            std::string::npos);
}

// Regression (fuzz_hardware_toml): a size beyond size_t was converted
// regardless, which is undefined; now refused, naming the key.
TEST(CommandLine, SizesBeyondAnExbibyteAreRefused) {
  EXPECT_EQ(error_of([] { parse_bytes("2e132B", "device.memory"); }),
            "device.memory: '2e132B' is larger than 1 EiB");
  EXPECT_EQ(parse_bytes("1024TiB", "device.memory"), 1ull << 50);
}

}  // namespace
}  // namespace llm

namespace llm {
namespace {

// parallel.timeout's durations: a positive number with its unit.
TEST(CliValues, DurationsNeedAPositiveNumberAndAUnit) {
  EXPECT_DOUBLE_EQ(parse_duration_seconds("90s", "k"), 90);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("10min", "k"), 600);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("1.5h", "k"), 5400);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("500ms", "k"), 0.5);
  for (const char* bad : {"10", "0s", "-5s", "10m", "s", "1e3s", "ten min", ""}) {
    EXPECT_NE(test_support::error_of([&] {
                parse_duration_seconds(bad, "parallel.timeout");
              }).find("parallel.timeout: expected a positive duration"),
              std::string::npos)
        << bad;
  }
}

}  // namespace
}  // namespace llm
