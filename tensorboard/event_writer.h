// One TensorBoard event file: events.out.tfevents.<unix time>.<hostname> in a
// directory, its first event the file version "brain.Event:2", then one
// event per group of scalars of a step, text or restart. Invariant: each event is on disk when
// its write returns (TfRecordWriter flushes), and a new writer never
// overwrites an older file of the same directory (the same second and host
// get a ".N" suffix; TensorBoard reads every file whose name holds
// "tfevents").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorboard/tfrecord.h"

namespace llm {

// One point of the scalar series `tag` (e.g. "train/loss").
struct TaggedScalar {
  std::string tag;
  double value;
};

class EventFileWriter {
 public:
  // Creates `dir` if needed and a new event file in it.
  explicit EventFileWriter(const std::string& dir);
  // The scalars' points at `step`, as one event (none when empty).
  void write_scalars(int64_t step, const std::vector<TaggedScalar>& scalars);
  // Text for TensorBoard's Text tab (rendered as Markdown).
  void write_text(const std::string& tag, int64_t step, const std::string& text);
  // The run (re)starts at `step`: TensorBoard forgets what it read at steps
  // >= step from earlier files (a resumed run re-runs them).
  void write_session_start(int64_t step);
  const std::string& path() const { return file_.path(); }

 private:
  TfRecordWriter file_;
};

}  // namespace llm
