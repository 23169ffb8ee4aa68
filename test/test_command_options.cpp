// A command's options declared once (schema/command_options.h): the
// command line read into the declared fields, the unknown-option error with
// the nearest declared name, the range checks naming the option and its
// range, the required options, and the usage listing every option with its
// doc, default and range.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "schema/command_options.h"
#include "test/error_of.h"

namespace llm {
namespace {

using test_support::error_of;

struct SampleArguments {
  static constexpr const char* kName = "sample";
  static constexpr const char* kAbout = "Draws samples from a model.";
  static constexpr bool kTakesOverrides = false;

  std::string checkpoint;
  std::vector<std::string> inputs;
  int samples = 1;
  double top_p = 0.95;
  std::vector<int> gpus = {8, 16};
  std::optional<Device> device;
  bool chat = false;

  template <class V>
  void visit_fields(V&& v) {
    v("checkpoint", checkpoint, "the model's directory", required("DIR"));
    v("input", inputs, "a file of prompts, once per file", repeatable("PATH"));
    v("samples", samples, "samples drawn together", between(1, 4096));
    v("top-p", top_p, "nucleus cut", OptionRule("P", kUnitClosed));
    v("gpus", gpus, "GPU counts", at_least(1));
    v("device", device, "where it runs");
    v("chat", chat, "the prompt is a user's turn");
  }
};

CommandLine line_of(std::vector<std::pair<std::string, std::string>> options,
                    std::vector<std::string> overrides = {}) {
  CommandLine line;
  line.command = "sample";
  line.options = std::move(options);
  line.overrides = std::move(overrides);
  return line;
}

SampleArguments parse(std::vector<std::pair<std::string, std::string>> options) {
  return parse_arguments<SampleArguments>(line_of(std::move(options)));
}

TEST(CommandOptions, ReadsEachDeclaredOptionByItsType) {
  const SampleArguments a = parse({{"checkpoint", "runs/a"},
                                   {"input", "a,b.txt"},
                                   {"input", "c.txt"},
                                   {"samples", "3"},
                                   {"gpus", "1,2"},
                                   {"gpus", "4,8"},
                                   {"device", "cuda"},
                                   {"chat", ""}});
  EXPECT_EQ(a.checkpoint, "runs/a");
  EXPECT_EQ(a.inputs, (std::vector<std::string>{"a,b.txt", "c.txt"}));  // repeatable: no split
  EXPECT_EQ(a.samples, 3);
  EXPECT_DOUBLE_EQ(a.top_p, 0.95);              // not given: the default
  EXPECT_EQ(a.gpus, (std::vector<int>{4, 8}));  // a comma list: the last given wins
  EXPECT_EQ(a.device, Device::cuda);
  EXPECT_TRUE(a.chat);
  EXPECT_FALSE(parse({{"checkpoint", "x"}, {"chat", "false"}}).chat);
  EXPECT_FALSE(parse({{"checkpoint", "x"}}).device.has_value());
}

TEST(CommandOptions, AnUnknownOptionNamesTheNearestDeclaredOne) {
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"top-q", "0.5"}});
            }),
            "./train sample: unknown option --top-q (did you mean 'top-p'?) (see ./train --help)");
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"smaples", "2"}});
            }),
            "./train sample: unknown option --smaples (did you mean 'samples'?) (see ./train "
            "--help)");
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"world", "2"}});
            }),
            "./train sample: unknown option --world (see ./train --help)");
}

TEST(CommandOptions, AValueOutOfRangeNamesTheOptionAndItsRange) {
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"samples", "0"}});
            }),
            "--samples must be in [1, 4096], got 0");
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"top-p", "2"}});
            }),
            "--top-p must be in [0, 1], got 2");
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"top-p", "nan"}});
            }),
            "--top-p must be a finite number, got nan");
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"gpus", "8,0"}});
            }),
            "--gpus must be >= 1, got 0");
  // The value's type is read by the config keys' reader, naming the option.
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"samples", "x"}});
            }),
            "--samples: expected an integer, got 'x'");
  EXPECT_EQ(error_of([] {
              parse({{"checkpoint", "x"}, {"device", "tpu"}});
            }),
            "--device: expected cpu or cuda, got 'tpu'");
}

TEST(CommandOptions, RequiredOptionsAndOverridesAreChecked) {
  EXPECT_EQ(error_of([] {
              parse({{"samples", "2"}});
            }),
            "./train sample: --checkpoint DIR is required (see ./train --help)");
  EXPECT_EQ(error_of([] {
              parse_arguments<SampleArguments>(line_of({{"checkpoint", "x"}}, {"model.dim=8"}));
            }),
            "./train sample takes no config overrides (--model.dim=8)");
}

TEST(CommandOptions, TheUsageListsEveryDeclaredOptionWithItsDoc) {
  const CommandSpec spec = command_spec<SampleArguments>();
  const std::string usage = command_usage(spec);
  EXPECT_EQ(usage.substr(0, usage.find('\n')), "  ./train sample --checkpoint DIR [options]");
  EXPECT_NE(usage.find("Draws samples from a model."), std::string::npos);
  for (const char* line : {"--checkpoint DIR        the model's directory (required)",
                           "--input PATH            a file of prompts, once per file",
                           "--samples N             samples drawn together (default 1; in "
                           "[1, 4096])",
                           "--top-p P               nucleus cut (default 0.95; in [0, 1])",
                           "--gpus N,N              GPU counts (default 8,16; >= 1)",
                           "--device cpu|cuda       where it runs",
                           "--chat                  the prompt is a user's turn"}) {
    EXPECT_NE(usage.find(line), std::string::npos) << line << "\nnot in\n" << usage;
  }
  EXPECT_EQ(spec.flags(), (std::vector<std::string>{"chat"}));
}

// A command that runs the words after -- as given, with a duration option.
struct RelaunchArguments {
  static constexpr const char* kName = "relaunch";
  static constexpr const char* kAbout = "Runs a command again.";
  static constexpr bool kTakesOverrides = false;
  static constexpr const char* kAfterDashes = "COMMAND ...";

  Duration wait{10};

  template <class V>
  void visit_fields(V&& v) {
    v("wait", wait, "before each run");
  }
};

TEST(CommandOptions, TheWordsAfterTwoDashesAreTakenOnlyWhereDeclared) {
  CommandLine line;
  line.command = "relaunch";
  line.options = {{"wait", "1.5min"}};
  line.after_dashes = {"sleep", "1"};
  EXPECT_DOUBLE_EQ(parse_arguments<RelaunchArguments>(line).wait.seconds, 90);
  line.after_dashes.clear();
  EXPECT_EQ(error_of([&] { parse_arguments<RelaunchArguments>(line); }),
            "./train relaunch: COMMAND ... goes after -- (see ./train --help)");
  CommandLine sample = line_of({{"checkpoint", "x"}});
  sample.after_dashes = {"sleep"};
  EXPECT_EQ(error_of([&] { parse_arguments<SampleArguments>(sample); }),
            "./train sample takes nothing after -- (see ./train --help)");
  const std::string usage = command_usage(command_spec<RelaunchArguments>());
  EXPECT_EQ(usage.substr(0, usage.find('\n')), "  ./train relaunch [options] -- COMMAND ...");
  EXPECT_NE(usage.find("--wait DURATION         before each run (default 10s)"), std::string::npos)
      << usage;
}

}  // namespace
}  // namespace llm
