// Reads TensorBoard event files back for the tests (test_tensorboard.cpp):
// the TFRecord framing by hand, checking the masked CRC32C of every length
// and every payload, then each payload unpacked as an Event by the code
// protobuf-c generated. A record that fails a check is a test failure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorboard/event.pb-c.h"
#include "tensorboard/tfrecord.h"

namespace llm::test_support {

inline uint64_t little_endian(const char* bytes, int count) {
  uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[i]);
  return value;
}

struct EventFree {
  void operator()(Tensorboard__Event* event) const {
    tensorboard__event__free_unpacked(event, nullptr);
  }
};
using Event = std::unique_ptr<Tensorboard__Event, EventFree>;

inline std::vector<Event> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<Event> events;
  char header[12], footer[4];
  while (in.read(header, sizeof header)) {
    const uint64_t length = little_endian(header, 8);
    EXPECT_EQ(little_endian(header + 8, 4), crc32c_masked(header, 8)) << path << ": length CRC";
    std::string data(length, '\0');
    EXPECT_TRUE(in.read(data.data(), static_cast<std::streamsize>(length)) &&
                in.read(footer, sizeof footer))
        << path << ": record cut off";
    EXPECT_EQ(little_endian(footer, 4), crc32c_masked(data.data(), data.size()))
        << path << ": data CRC";
    Event event(tensorboard__event__unpack(nullptr, data.size(),
                                           reinterpret_cast<const uint8_t*>(data.data())));
    EXPECT_TRUE(event) << path << ": not an Event";
    if (event) events.push_back(std::move(event));
  }
  EXPECT_EQ(in.gcount(), 0) << path << ": bytes after the last record";
  return events;
}

// The event files of `dir`, in name order (the order TensorBoard reads them).
inline std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Each scalar tag's points, step -> value, as TensorBoard shows them: a
// session START at step N drops the points read so far at steps >= N.
inline std::map<std::string, std::map<int64_t, float>> scalar_series(const std::string& dir) {
  std::map<std::string, std::map<int64_t, float>> series;
  for (const std::string& file : event_files(dir)) {
    for (const Event& event : read_event_file(file)) {
      if (event->what_case == TENSORBOARD__EVENT__WHAT_SESSION_LOG &&
          event->session_log->status == TENSORBOARD__SESSION_LOG__SESSION_STATUS__START) {
        for (auto& [tag, points] : series)
          points.erase(points.lower_bound(event->step), points.end());
      }
      if (event->what_case != TENSORBOARD__EVENT__WHAT_SUMMARY) continue;
      for (size_t i = 0; i < event->summary->n_value; ++i) {
        const Tensorboard__Summary__Value& value = *event->summary->value[i];
        if (value.value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE) {
          series[value.tag][event->step] = value.simple_value;
        }
      }
    }
  }
  return series;
}

}  // namespace llm::test_support
