// TensorBoard event files: CRC-32C against known vectors, an event file read
// back through our own TFRecord reader and the generated protobuf-c code,
// the naming of scalars from metrics records, and a training run whose
// TensorBoard scalars are its metrics.jsonl, also across a resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "schema/config.h"
#include "parallel/comm.h"
#include "base/log.h"
#include "tensorboard/event_writer.h"
#include "tensorboard/metrics_events.h"
#include "tensorboard/tfrecord.h"
#include "test/temp_dir.h"
#include "test/tensorboard_reader.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

using test_support::Event;
using test_support::read_event_file;
using test_support::scalar_series;

// The one summary value of a summary event.
const Tensorboard__Summary__Value& value_of(const Event& event) {
  EXPECT_EQ(event->what_case, TENSORBOARD__EVENT__WHAT_SUMMARY);
  EXPECT_EQ(event->summary->n_value, 1u);
  return *event->summary->value[0];
}

std::string text_of(const Tensorboard__Summary__Value& value) {
  EXPECT_EQ(value.value_case, TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR);
  EXPECT_EQ(value.tensor->n_string_val, 1u);
  const ProtobufCBinaryData& bytes = value.tensor->string_val[0];
  return std::string(reinterpret_cast<const char*>(bytes.data), bytes.len);
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI), appendix B.4: 32 bytes of zeros, of ones, ascending.
  unsigned char bytes[32] = {};
  EXPECT_EQ(crc32c(bytes, 32), 0x8A9136AAu);
  std::fill(std::begin(bytes), std::end(bytes), 0xFF);
  EXPECT_EQ(crc32c(bytes, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(bytes, 32), 0x46DD794Eu);
  // rotr(0xE3069283, 15) + 0xA282EAD8, modulo 2^32
  EXPECT_EQ(crc32c_masked("123456789", 9), 0xC78AB0E5u);
}

TEST(EventFile, ScalarsTextAndRestartReadBack) {
  test_support::TempDir dir("llm_test_tensorboard_");
  std::string path;
  {
    EventFileWriter writer(dir.file("tb"));
    path = writer.path();
    writer.write_scalars(1, {{"train/loss", 2.5}});
    writer.write_scalars(2, {{"train/loss", 2.25}, {"train/lr", 1e-3}});
    writer.write_text("config", 0, "    [model]\n    dim = 8\n");
    writer.write_session_start(3);
  }
  const std::string name = std::filesystem::path(path).filename().string();
  EXPECT_TRUE(name.starts_with("events.out.tfevents.")) << name;
  const std::vector<Event> events = read_event_file(path);
  ASSERT_EQ(events.size(), 5u);
  ASSERT_EQ(events[0]->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
  EXPECT_STREQ(events[0]->file_version, "brain.Event:2");
  for (const Event& event : events) EXPECT_GT(event->wall_time, 1.5e9);

  EXPECT_EQ(events[1]->step, 1);
  EXPECT_STREQ(value_of(events[1]).tag, "train/loss");
  EXPECT_EQ(value_of(events[1]).value_case, TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE);
  EXPECT_EQ(value_of(events[1]).simple_value, 2.5f);
  // A step's scalars travel in one event.
  EXPECT_EQ(events[2]->step, 2);
  ASSERT_EQ(events[2]->summary->n_value, 2u);
  EXPECT_STREQ(events[2]->summary->value[0]->tag, "train/loss");
  EXPECT_EQ(events[2]->summary->value[0]->simple_value, 2.25f);
  EXPECT_STREQ(events[2]->summary->value[1]->tag, "train/lr");
  EXPECT_EQ(events[2]->summary->value[1]->simple_value, 1e-3f);

  const Tensorboard__Summary__Value& text = value_of(events[3]);
  EXPECT_STREQ(text.tag, "config");
  ASSERT_NE(text.metadata, nullptr);
  EXPECT_STREQ(text.metadata->plugin_data->plugin_name, "text");
  EXPECT_EQ(text.tensor->dtype, TENSORBOARD__DATA_TYPE__DT_STRING);
  EXPECT_EQ(text.tensor->tensor_shape->n_dim, 0u);
  EXPECT_EQ(text_of(text), "    [model]\n    dim = 8\n");

  EXPECT_EQ(events[4]->step, 3);
  ASSERT_EQ(events[4]->what_case, TENSORBOARD__EVENT__WHAT_SESSION_LOG);
  EXPECT_EQ(events[4]->session_log->status, TENSORBOARD__SESSION_LOG__SESSION_STATUS__START);
}

// Two writers in one directory within the same second: two files, neither
// overwritten.
TEST(EventFile, SecondWriterGetsItsOwnFile) {
  test_support::TempDir dir("llm_test_tensorboard_");
  EventFileWriter first(dir.str()), second(dir.str());
  EXPECT_NE(first.path(), second.path());
  first.write_scalars(0, {{"a", 1}});
  EXPECT_EQ(read_event_file(first.path()).size(), 2u);
  EXPECT_EQ(read_event_file(second.path()).size(), 1u);
}

TEST(MetricsRecordScalars, TagsFollowTheRecord) {
  auto tags = [](const nlohmann::json& record) {
    std::map<std::string, double> out;
    for (const TaggedScalar& s : metrics_record_scalars(record)) out[s.tag] = s.value;
    return out;
  };
  using Tags = std::map<std::string, double>;
  EXPECT_EQ(tags({{"step", 3}, {"loss", 2.5}, {"lr", 1e-3}, {"tokens_per_s", 100}}),
            (Tags{{"train/loss", 2.5}, {"train/lr", 1e-3}, {"train/tokens_per_s", 100}}));
  EXPECT_EQ(tags({{"step", 3}, {"val_loss", 2.0}}), (Tags{{"val/loss", 2.0}}));
  EXPECT_EQ(tags({{"event", "memory"}, {"step", 0}, {"params_bytes", 10}}),
            (Tags{{"memory/params_bytes", 10}}));
  EXPECT_EQ(
      tags({{"event", "start"}, {"step", 0}, {"world_size", 2}, {"mode", "ddp"}, {"flag", true}}),
      (Tags{{"start/world_size", 2}}));
}

// The trainer's records through the sink: a "resumed" record is a restart
// after its step, a record without a step is no event.
TEST(TensorBoardMetrics, ConfigFirstAndResumeRestartsAfterTheResumedStep) {
  test_support::TempDir dir("llm_test_tensorboard_");
  std::string path;
  {
    TensorBoardMetrics sink(dir.str(), "[model]\ndim = 8\n", 4);
    path = sink.path();
    sink.write({{"event", "resumed"}, {"step", 4}});
    sink.write({{"step", 5}, {"loss", 1.5}});
    sink.write({{"loss", 1.0}});
  }
  const std::vector<Event> events = read_event_file(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1]->step, 4);
  EXPECT_EQ(text_of(value_of(events[1])), "    [model]\n    dim = 8\n");
  ASSERT_EQ(events[2]->what_case, TENSORBOARD__EVENT__WHAT_SESSION_LOG);
  EXPECT_EQ(events[2]->session_log->status, TENSORBOARD__SESSION_LOG__SESSION_STATUS__START);
  EXPECT_EQ(events[2]->step, 5);
  EXPECT_STREQ(value_of(events[3]).tag, "train/loss");
}

// logging.tensorboard without logging.metrics: no file, the sink still gets
// every record, the resume marker first.
TEST(MetricsLog, SinksGetEveryRecordAlsoWithoutAFile) {
  struct Recorder : MetricsSink {
    std::vector<nlohmann::json>* records;
    explicit Recorder(std::vector<nlohmann::json>* r) : records(r) {}
    void write(const nlohmann::json& record) override { records->push_back(record); }
  };
  std::vector<nlohmann::json> records;
  std::vector<std::unique_ptr<MetricsSink>> sinks;
  sinks.push_back(std::make_unique<Recorder>(&records));
  MetricsLog log("", 3, std::move(sinks));
  EXPECT_TRUE(log.is_open());
  log.write({{"step", 4}, {"loss", 1.5}});
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], (nlohmann::json{{"event", "resumed"}, {"step", 3}}));
  EXPECT_EQ(records[1]["loss"], 1.5);
  EXPECT_FALSE(MetricsLog("", 0).is_open());
}

// Each metrics.jsonl loss line, by step.
std::map<int64_t, float> metrics_losses(const std::string& path) {
  std::map<int64_t, float> losses;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("loss") && !record.contains("event")) {
      losses[record["step"].get<int64_t>()] = record["loss"].get<float>();
    }
  }
  return losses;
}

// A run killed after step 6 but saved at step 4, then resumed: TensorBoard
// shows one train/loss point per step, the same as metrics.jsonl, the
// resolved config as text, and val/loss, lr, grad norm, memory.
TEST(TensorBoardMetrics, TrainingRunMatchesMetricsFileAcrossAResume) {
  test_support::TempDir dir("llm_test_tensorboard_run_");
  auto run = [&](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), {"training.steps=6", "training.eval_interval=3",
                                       "training.eval_sequences=8", "logging.metrics=true",
                                       "logging.tensorboard=true", "checkpoint.dir=" + dir.str()});
    Trainer trainer(config_load("configs/tiny.toml", overrides), comm_world());
    trainer.run();
  };
  run({"checkpoint.resume=none", "checkpoint.interval=4", "checkpoint.save_final=false"});
  run({"checkpoint.resume=auto"});

  const std::string tb_dir = dir.file("tensorboard");
  ASSERT_EQ(test_support::event_files(tb_dir).size(), 2u) << "one event file per run";
  const std::map<int64_t, float> losses = metrics_losses(dir.file("metrics.jsonl"));
  ASSERT_EQ(losses.size(), 6u);
  auto series = scalar_series(tb_dir);
  EXPECT_EQ(series["train/loss"], losses);
  for (const char* tag : {"train/lr", "train/grad_norm", "train/tokens_per_s", "train/mfu",
                          "train/peak_rss_bytes", "memory/params_bytes"}) {
    EXPECT_FALSE(series[tag].empty()) << tag;
  }
  EXPECT_EQ(series["train/lr"].size(), 6u);
  EXPECT_EQ(series["val/loss"].size(), 3u) << "steps 0, 3 and 6";

  const std::vector<Event> first = read_event_file(test_support::event_files(tb_dir).front());
  ASSERT_GE(first.size(), 2u);
  EXPECT_STREQ(value_of(first[1]).tag, "config");
  EXPECT_NE(text_of(value_of(first[1])).find("    [model]"), std::string::npos);
}

// logging.tensorboard is a switch or a directory: false, true (the run
// directory's tensorboard/), or a path, where the events then go; the
// resolved config writes back what was read.
TEST(TensorBoardMetrics, TheSwitchMayNameADirectory) {
  test_support::TempDir dir("llm_test_tensorboard_dir_");
  const std::string elsewhere = dir.file("elsewhere");
  for (const auto& [text, on, path] : {std::tuple{"false", false, ""}, std::tuple{"true", true, ""},
                                       std::tuple{elsewhere.c_str(), true, elsewhere.c_str()}}) {
    Config c = config_load("configs/tiny.toml", {std::string("logging.tensorboard=") + text});
    EXPECT_EQ(c.logging.tensorboard.on, on) << text;
    EXPECT_EQ(c.logging.tensorboard.path, path) << text;
    EXPECT_NE(config_to_toml(c).find(path[0] ? "tensorboard = '" + elsewhere + "'"
                                             : std::string("tensorboard = ") + text),
              std::string::npos)
        << config_to_toml(c);
  }
  Trainer trainer(config_load("configs/tiny.toml",
                              {"training.steps=2", "training.eval_interval=0",
                               "checkpoint.dir=" + dir.file("run"), "checkpoint.resume=none",
                               "logging.tensorboard=" + elsewhere}),
                  comm_world());
  trainer.run();
  EXPECT_EQ(test_support::event_files(elsewhere).size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("run") + "/tensorboard"));
  EXPECT_EQ(scalar_series(elsewhere)["train/loss"].size(), 2u);
}

}  // namespace
}  // namespace llm
