// Config parsing: defaults, TOML values, CLI overrides and their precedence,
// and the errors for unknown keys, wrong types and impossible values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "schema/config.h"
#include "base/error.h"
#include "test/error_of.h"

namespace llm {
namespace {

const char* kMinimal = R"(
[data]
train = "data/tiny/train_*.bin"
)";

using test_support::error_of;

TEST(Config, DefaultsApplyWhenKeysAreAbsent) {
  Config c = config_parse(kMinimal, "configs/x.toml", {});
  EXPECT_EQ(c.name, "x");
  EXPECT_EQ(c.model.dim, ModelConfig{}.dim);
  EXPECT_EQ(c.training.lr_schedule, LrSchedule::cosine);
  EXPECT_EQ(c.run_dir(), "checkpoints/x");
}

TEST(Config, OverrideBeatsFileBeatsDefault) {
  std::string text = std::string(kMinimal) + "[training]\nsteps = 7\nlr = 1\n";
  Config c = config_parse(text, "a.toml",
                          {"training.steps=9", "model.tie_embeddings=false", "parallel.mode=zero3",
                           "checkpoint.dir=/tmp/run"});
  EXPECT_EQ(c.training.steps, 9);        // override over file
  EXPECT_DOUBLE_EQ(c.training.lr, 1.0);  // integer accepted for a float key
  EXPECT_FALSE(c.model.tie_embeddings);  // override over default
  EXPECT_EQ(c.parallel.mode, ParallelMode::zero3);
  EXPECT_EQ(c.run_dir(), "/tmp/run");
}

TEST(Config, UnknownKeysAreErrorsNamingThem) {
  std::string text = std::string(kMinimal) + "[model]\ndimm = 3\n";
  EXPECT_NE(error_of([&] { config_parse(text, "a.toml", {}); }).find("unknown key 'model.dimm'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              config_parse(std::string(kMinimal) + "[modle]\n", "a.toml", {});
            }).find("'modle'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              config_parse(kMinimal, "a.toml", {"training.stepz=3"});
            }).find("unknown key 'training.stepz'"),
            std::string::npos);
}

TEST(Config, WrongTypesAreErrorsNamingTheKey) {
  std::string text = std::string(kMinimal) + "[training]\nsteps = \"ten\"\n";
  std::string message = error_of([&] { config_parse(text, "a.toml", {}); });
  EXPECT_NE(message.find("a.toml: training.steps: expected an integer"), std::string::npos)
      << message;
  EXPECT_NE(error_of([&] {
              config_parse(kMinimal, "a.toml", {"training.lr=fast"});
            }).find("command line --training.lr: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              config_parse(kMinimal, "a.toml", {"model.tie_embeddings=1"});
            }).find("expected true or false"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              config_parse(kMinimal, "a.toml", {"training.steps=1.5"});
            }).find("expected an integer"),
            std::string::npos);
}

TEST(Config, ImpossibleValuesAreErrorsNamingTheKey) {
  auto message_for = [](const std::string& assignment) {
    return error_of([&] { config_parse(kMinimal, "a.toml", {assignment}); });
  };
  EXPECT_NE(
      message_for("model.n_kv_heads=3").find("model.n_kv_heads (3) must divide model.n_heads"),
      std::string::npos);
  EXPECT_NE(
      message_for("training.micro_batch_size=3").find("training.batch_size (8) must be a multiple"),
      std::string::npos);
  EXPECT_NE(message_for("parallel.mode=pipeline").find("parallel.mode"), std::string::npos);
  EXPECT_NE(message_for("training.lr_schedule=step").find("training.lr_schedule"),
            std::string::npos);
  EXPECT_NE(message_for("model.dim=0").find("model.dim must be positive"), std::string::npos);
  EXPECT_NE(message_for("model.rope_scaling_factor=0.5").find("model.rope_scaling_factor must be"),
            std::string::npos);
  // The blend between the two wavelength bounds divides by their difference.
  const std::string blend = error_of([] {
    config_parse(kMinimal, "a.toml",
                 {"model.rope_scaling_factor=8", "model.rope_high_freq_factor=1"});
  });
  EXPECT_NE(
      blend.find("model.rope_high_freq_factor (1) must be above model.rope_low_freq_factor (1)"),
      std::string::npos)
      << blend;
  EXPECT_NO_THROW(config_parse(kMinimal, "a.toml", {"model.rope_high_freq_factor=1"}));  // unscaled
  EXPECT_NE(error_of([] { config_parse("", "a.toml", {}); }).find("data.train"), std::string::npos);
}

// precision fp8 trains on either device; gradients are not reduced in fp8;
// on cuda every dimension cuBLASLt's FP8 GEMMs stride over is a multiple of
// 16, or the error names it.
TEST(Config, Fp8ChecksWhatTheFp8GemmsNeed) {
  const std::vector<std::string> shape = {"model.dim=128",
                                          "model.n_heads=4",
                                          "model.n_kv_heads=2",
                                          "model.ffn_dim=256",
                                          "training.seq_len=32",
                                          "training.batch_size=2",
                                          "training.micro_batch_size=1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> all = shape;
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  };
  EXPECT_EQ(config_parse(kMinimal, "a.toml", with({"training.precision=fp8"})).training.precision,
            Precision::fp8);
  EXPECT_NO_THROW(
      config_parse(kMinimal, "a.toml", with({"training.precision=fp8", "training.device=cuda"})));
  EXPECT_NE(error_of([&] {
              config_parse(kMinimal, "a.toml", {"parallel.reduce_dtype=fp8"});
            }).find("parallel.reduce_dtype must be fp32 or bf16"),
            std::string::npos);
  const std::pair<std::vector<std::string>, std::string> misfits[] = {
      {{"model.dim=120", "model.n_heads=4"}, "model.dim to be a multiple of 16"},
      {{"model.dim=96", "model.n_heads=4"}, "the head dim (model.head_dim, or model.dim / "},
      {{"model.head_dim=40"}, "to be a multiple of 16 (cuBLASLt's FP8 GEMMs), got 40"},
      {{"model.ffn_dim=200"}, "model.ffn_dim / parallel.tensor_parallel to be a multiple of 16"},
      {{"training.seq_len=24"}, "training.micro_batch_size x training.seq_len"}};
  for (const auto& [extra, expected] : misfits) {
    std::vector<std::string> overrides = with(extra);
    overrides.push_back("training.precision=fp8");
    EXPECT_NO_THROW(config_parse(kMinimal, "a.toml", overrides)) << expected;  // cpu: any shape
    overrides.push_back("training.device=cuda");
    const std::string message = error_of([&] { config_parse(kMinimal, "a.toml", overrides); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
}

// zenflow.select_interval / update_interval: a positive count or "auto",
// from the file or the command line; the dump writes them back as read;
// anything else, or intervals that do not nest, names the key.
TEST(Config, AutoCountsReadAutoOrAPositiveNumber) {
  Config c = config_parse(
      std::string(kMinimal) + "[zenflow]\nupdate_interval = 2\nselect_interval = \"auto\"\n",
      "a.toml", {});
  EXPECT_EQ(c.zenflow.update_interval.value, 2);
  EXPECT_TRUE(c.zenflow.select_interval.automatic());
  c = config_parse(kMinimal, "a.toml",
                   {"zenflow.update_interval=auto", "zenflow.select_interval=6"});
  EXPECT_TRUE(c.zenflow.update_interval.automatic());
  EXPECT_EQ(c.zenflow.select_interval.value, 6);
  EXPECT_EQ(config_parse(kMinimal, "a.toml", {}).zenflow.update_interval.value,
            4);  // DeepSpeed's default
  const std::string dumped = config_to_toml(c);
  EXPECT_NE(dumped.find("update_interval = \"auto\""), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("select_interval = 6"), std::string::npos) << dumped;
  EXPECT_EQ(config_parse(dumped, "dumped.toml", {}).zenflow.select_interval.value, 6);
  for (const char* bad : {"zenflow.update_interval=0", "zenflow.update_interval=-2",
                          "zenflow.update_interval=often"}) {
    EXPECT_NE(
        error_of([&] { config_parse(kMinimal, "a.toml", {bad}); }).find("zenflow.update_interval"),
        std::string::npos)
        << bad;
  }
  EXPECT_NE(error_of([&] {
              config_parse(kMinimal, "a.toml",
                           {"zenflow.update_interval=4", "zenflow.select_interval=6"});
            }).find("must be a multiple"),
            std::string::npos);
}

TEST(Config, DeviceAndCommAreValidatedTogether) {
  auto message_for = [](std::vector<std::string> overrides) {
    return error_of([&] { config_parse(kMinimal, "a.toml", overrides); });
  };
  EXPECT_NE(message_for({"training.device=tpu"}).find("training.device: expected cpu or cuda"),
            std::string::npos);
  EXPECT_NE(message_for({"parallel.comm=gloo"}).find("parallel.comm: expected auto, mpi or nccl"),
            std::string::npos);
  EXPECT_NE(
      message_for({"parallel.comm=nccl"}).find("parallel.comm = nccl needs training.device = cuda"),
      std::string::npos);
  // auto resolves to the device's natural transport.
  EXPECT_EQ(config_parse(kMinimal, "a.toml", {}).comm(), CommBackend::mpi);
  Config gpu = config_parse(kMinimal, "a.toml", {"training.device=cuda"});
  EXPECT_EQ(gpu.device(), Device::cuda);
  EXPECT_EQ(gpu.comm(), CommBackend::nccl);
  EXPECT_EQ(config_parse(kMinimal, "a.toml", {"training.device=cuda", "parallel.comm=mpi"}).comm(),
            CommBackend::mpi);
}

TEST(Config, SyntaxErrorNamesFileAndLine) {
  std::string message = error_of([] { config_parse("[model]\ndim = = 3\n", "bad.toml", {}); });
  EXPECT_NE(message.find("bad.toml:2"), std::string::npos) << message;
}

TEST(Config, MissingFileIsAnError) {
  EXPECT_NE(error_of([] { config_load("no_such_config", {}); }).find("'no_such_config' not found"),
            std::string::npos);
}

TEST(Config, DumpParsesBackToTheSameValues) {
  Config c = config_parse(kMinimal, "a.toml", {"training.lr=0.00123", "model.n_layers=3"});
  std::string dumped = config_to_toml(c);
  Config again = config_parse(dumped, "a.toml", {});
  EXPECT_EQ(config_to_toml(again), dumped);
  EXPECT_DOUBLE_EQ(again.training.lr, 0.00123);
  EXPECT_EQ(again.model.n_layers, 3);
}

// Every key's declared range is enforced, named with the key and the range:
// a value just outside each bound is refused, the bound itself (when closed)
// accepted.
TEST(ConfigRules, EveryDeclaredRangeIsEnforced) {
  int checked = 0;
  const Config defaults;
  defaults.visit_tables([&](const char* table, const auto& section) {
    visit_keys(section, [&](const char* key, const auto& field, const char*, const KeyRule& rule) {
      using T = std::decay_t<decltype(field)>;
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        const Range& r = rule.range;
        const std::string name = fmt::format("{}.{}", table, key);
        auto refused = [&](double value) {
          const std::string text =
              std::is_integral_v<T> ? fmt::format("{}", int64_t(value)) : fmt::format("{}", value);
          const std::string message = error_of(
              [&] { config_parse(kMinimal, "a.toml", {fmt::format("{}={}", name, text)}); });
          EXPECT_CONTAINS(message, fmt::format("{} must be {}, got {}", name, r.text(), text));
          ++checked;
        };
        const double step = std::is_integral_v<T> ? 1.0 : 0.5;
        if (std::isfinite(r.low)) refused(r.low_open ? r.low : r.low - step);
        if (std::isfinite(r.high)) refused(r.high_open ? r.high : r.high + step);
      }
    });
  });
  EXPECT_GE(checked, 35);  // the ranges config.h declares, both ends where bounded
}

TEST(ConfigRules, OnResumeComesFromTheKeyElseItsTable) {
  EXPECT_EQ(config_key_on_resume("model.dim"), OnResume::changes_model);
  EXPECT_EQ(config_key_on_resume("model.init_from"), OnResume::same_trajectory);
  EXPECT_EQ(config_key_on_resume("training.lr"), OnResume::changes_trajectory);
  EXPECT_EQ(config_key_on_resume("training.micro_batch_size"), OnResume::same_trajectory);
  EXPECT_EQ(config_key_on_resume("data.train"), OnResume::changes_trajectory);
  EXPECT_EQ(config_key_on_resume("parallel.mode"), OnResume::same_trajectory);
  EXPECT_EQ(config_key_on_resume("parallel.reduce_dtype"), OnResume::changes_trajectory);
  EXPECT_EQ(config_key_on_resume("logging.log_interval"), OnResume::same_trajectory);
  EXPECT_EQ(config_key_on_resume("model.no_such_key"), std::nullopt);
}

// The key reference lists every key the parser knows, once, with its type
// and default; docs/configuration.md's key table is exactly this text.
TEST(ConfigReference, DocsTableIsTheGeneratedOne) {
  const std::string reference = config_reference();
  Config c;
  int keys = 0;
  c.visit_tables([&](const char* table, auto& section) {
    visit_keys(section, [&](const char* key, auto&, const char*, const KeyRule&) {
      ++keys;
      const std::string row = fmt::format("| `{}.{}` | ", table, key);
      EXPECT_NE(reference.find(row), std::string::npos) << row;
    });
  });
  EXPECT_EQ(static_cast<int>(std::count(reference.begin(), reference.end(), '\n')), keys + 2);
  EXPECT_NE(reference.find(
                "| `parallel.mode` | one of ddp, zero1, zero2, zero3, fsdp or hybrid | `'ddp'` |"),
            std::string::npos)
      << reference;
  std::ifstream readme("docs/configuration.md");
  ASSERT_TRUE(readme) << "run from the repository root";
  const std::string text((std::istreambuf_iterator<char>(readme)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(reference), std::string::npos)
      << "docs/configuration.md's key table differs from `./train config`; paste its output";
}

// Floats are written in the shortest form that reads back bit-identically
// (no float noise such as 0.0030000000000000001), and whole numbers stay
// floats.
TEST(Config, DumpWritesTheShortestFloatThatReadsBack) {
  Config c = config_parse(kMinimal, "a.toml", {"training.lr=0.003", "model.rope_theta=500000"});
  const std::string dumped = config_to_toml(c);
  EXPECT_NE(dumped.find("lr = 0.003\n"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("rope_theta = 500000.0\n"), std::string::npos) << dumped;
  for (double value : {0.1, 1.0 / 3.0, 2.5e-7, 1e-300, 123456789.125, 0.95, 6e-4}) {
    c.training.lr = value;
    Config again = config_parse(config_to_toml(c), "a.toml", {});
    EXPECT_EQ(again.training.lr, value) << fmt::format("{:.17g}", value);
  }
}

// Regression: inf passed where nan did not. Every float key must be finite, from
// the file and from the command line, and the error names the key and value.
TEST(Config, NonFiniteFloatsAreErrorsNamingKeyAndValue) {
  for (const char* key : {"training.lr", "training.weight_decay", "model.init_std",
                          "model.norm_eps", "model.rope_theta", "training.grad_clip"}) {
    for (const char* value : {"inf", "-inf", "nan"}) {
      SCOPED_TRACE(fmt::format("{}={}", key, value));
      std::string message =
          error_of([&] { config_parse(kMinimal, "a.toml", {fmt::format("{}={}", key, value)}); });
      EXPECT_NE(message.find(fmt::format("{} must be a finite number, got {}", key, value)),
                std::string::npos)
          << message;
    }
  }
  std::string message = error_of(
      [] { config_parse(std::string(kMinimal) + "[model]\nnorm_eps = inf\n", "a.toml", {}); });
  EXPECT_EQ(message, "a.toml: model.norm_eps must be a finite number, got inf");
}

TEST(Config, FloatRangesNameKeyAndValue) {
  auto message_for = [](const std::string& assignment) {
    return error_of([&] { config_parse(kMinimal, "a.toml", {assignment}); });
  };
  EXPECT_NE(message_for("model.norm_eps=1.5").find("model.norm_eps must be in (0, 1), got 1.5"),
            std::string::npos);
  EXPECT_NE(message_for("training.lr=0").find("training.lr must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(message_for("training.weight_decay=-0.1")
                .find("training.weight_decay must be >= 0, got -0.1"),
            std::string::npos);
  EXPECT_NE(message_for("training.beta2=1").find("training.beta2 must be in [0, 1), got 1"),
            std::string::npos);
  EXPECT_EQ(message_for("training.min_lr_ratio=1"), "");  // closed at 1
}

// Regression: --training.steps=99999999999 said "expected an integer".
TEST(Config, IntegersOutOfRangeSaySoWithTheRange) {
  std::string message =
      error_of([] { config_parse(kMinimal, "a.toml", {"training.steps=99999999999"}); });
  EXPECT_EQ(message,
            "command line --training.steps: 99999999999 is out of range for a 32-bit integer "
            "[-2147483648, 2147483647]");
  message = error_of([] {
    config_parse(std::string(kMinimal) + "[training]\nsteps = 99999999999\n", "a.toml", {});
  });
  EXPECT_NE(
      message.find("a.toml: training.steps: 99999999999 is out of range for a 32-bit integer"),
      std::string::npos)
      << message;
  EXPECT_NE(error_of([] {
              config_parse(kMinimal, "a.toml", {"training.seed=99999999999999999999"});
            }).find("out of range for a 64-bit integer"),
            std::string::npos);
}

// Regression: a bad command-line value was blamed on the config file.
TEST(Config, ErrorsNameTheCommandLineOrTheFileWhereTheValueCameFrom) {
  EXPECT_EQ(error_of([] { config_parse(kMinimal, "a.toml", {"training.lr=abc"}); }),
            "command line --training.lr: expected a number, got 'abc'");
  EXPECT_EQ(error_of([] { config_parse(kMinimal, "a.toml", {"training.lr=-1"}); }),
            "command line --training.lr=-1: training.lr must be positive, got -1");
  EXPECT_EQ(
      error_of([] { config_parse(std::string(kMinimal) + "[training]\nlr = -1\n", "a.toml", {}); }),
      "a.toml: training.lr must be positive, got -1");
  // A check over two keys blames the command line when it set either.
  EXPECT_NE(error_of([] {
              config_parse(kMinimal, "a.toml", {"training.micro_batch_size=3"});
            }).find("command line --training.micro_batch_size=3: training.batch_size (8)"),
            std::string::npos);
}

// "checkpoint" names saved state only: the recomputation keys' old names are
// refused with their new ones.
TEST(Config, RenamedKeysAreRefusedWithTheirNewNames) {
  EXPECT_EQ(error_of([] {
              config_parse(kMinimal, "a.toml", {"training.activation_checkpointing=full"});
            }),
            "command line --training.activation_checkpointing=full: unknown key "
            "'training.activation_checkpointing' (renamed 'training.recompute')");
  EXPECT_EQ(error_of([] {
              config_parse(std::string(kMinimal) + "[training]\ncheckpoint_every = 2\n", "a.toml",
                           {});
            }),
            "a.toml: unknown key 'training.checkpoint_every' (renamed 'training.recompute_every')");
}

// Regression: a misspelt key got no "did you mean".
TEST(Config, MisspeltKeysGetTheClosestKnownKey) {
  EXPECT_EQ(error_of([] { config_parse(kMinimal, "a.toml", {"training.lr_schedul=cosine"}); }),
            "command line --training.lr_schedul=cosine: unknown key 'training.lr_schedul' (did you "
            "mean 'training.lr_schedule'?)");
  EXPECT_EQ(error_of([] {
              config_parse(std::string(kMinimal) + "[training]\nwarmup_step = 3\n", "a.toml", {});
            }),
            "a.toml: unknown key 'training.warmup_step' (did you mean 'training.warmup_steps'?)");
  EXPECT_NE(error_of([] {
              config_parse(std::string(kMinimal) + "[trainig]\n", "a.toml", {});
            }).find("'trainig' (did you mean 'training'?)"),
            std::string::npos);
  // Nothing close: no suggestion.
  EXPECT_EQ(error_of([] { config_parse(kMinimal, "a.toml", {"training.banana=1"}); }),
            "command line --training.banana=1: unknown key 'training.banana'");
}

TEST(Config, EnumKeysParseOnceNameTheChoicesAndDumpByName) {
  Config c =
      config_parse(kMinimal, "a.toml",
                   {"parallel.mode=fsdp", "training.precision=bf16", "training.lr_schedule=linear",
                    "training.recompute=selective", "parallel.reduce_dtype=bf16",
                    "parallel.comm=mpi", "training.device=cuda"});
  EXPECT_EQ(c.parallel.mode, ParallelMode::zero3);  // the alias
  EXPECT_EQ(c.training.precision, Precision::bf16);
  EXPECT_EQ(c.training.lr_schedule, LrSchedule::linear);
  EXPECT_EQ(c.training.recompute, Recompute::selective);
  EXPECT_EQ(c.parallel.reduce_dtype, Precision::bf16);
  EXPECT_EQ(c.parallel.comm, CommBackend::mpi);
  EXPECT_EQ(c.training.device, Device::cuda);
  const std::string dumped = config_to_toml(c);
  EXPECT_NE(dumped.find("mode = 'zero3'"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("recompute = 'selective'"), std::string::npos) << dumped;
  Config defaults = config_parse(kMinimal, "a.toml", {});
  EXPECT_NE(config_to_toml(defaults).find("comm = 'auto'"), std::string::npos);
  EXPECT_EQ(fmt::format("{} {}", ParallelMode::hybrid, CommBackend::automatic), "hybrid auto");
  // A config saved before the enums (checkpoint meta.json) said "fsdp" and loads.
  EXPECT_EQ(config_parse(std::string(kMinimal) + "[parallel]\nmode = \"fsdp\"\n", "meta.json", {})
                .parallel.mode,
            ParallelMode::zero3);
  EXPECT_EQ(error_of([] { config_parse(kMinimal, "a.toml", {"parallel.mode=pipeline"}); }),
            "command line --parallel.mode: expected ddp, zero1, zero2, zero3, fsdp or hybrid, got "
            "'pipeline'");
  EXPECT_EQ(error_of([] {
              config_parse(std::string(kMinimal) + "[training]\nprecision = 16\n", "a.toml", {});
            }),
            "a.toml: training.precision: expected a string: fp32, bf16 or fp8");
}

// Regression: errors ended in "(/path/config/config.cpp:85)". The location is
// kept apart and shown only with LLM_DEBUG.
TEST(Errors, SourceLocationOnlyWhenDebugging) {
  try {
    LLM_FAIL("model.dim must be positive");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "model.dim must be positive");
    EXPECT_NE(e.location().find("test_config.cpp:"), std::string::npos);
    unsetenv("LLM_DEBUG");
    EXPECT_EQ(error_report(e), "model.dim must be positive");
    setenv("LLM_DEBUG", "1", 1);
    EXPECT_EQ(error_report(e), fmt::format("model.dim must be positive ({})", e.location()));
    unsetenv("LLM_DEBUG");
  }
}

}  // namespace
}  // namespace llm
