// TensorBoard's view of the metrics records: a MetricsSink that turns every
// record the trainer writes to metrics.jsonl into events of one event file.
// Invariant: the scalars are derived from the records alone (each numeric
// field, by a fixed naming rule), so metrics.jsonl and TensorBoard cannot
// drift apart: a field added to a record appears in both.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "tensorboard/event_writer.h"

namespace llm {

// The scalars of one record: every numeric field but "step", tagged
// "<group>/<field>" where the group is the record's "event" (e.g.
// "memory/params_bytes"), else "train" ("train/loss"); a field "val_X" is
// "val/X" ("val/loss"). Strings and booleans are not scalars.
std::vector<TaggedScalar> metrics_record_scalars(const nlohmann::json& record);

class TensorBoardMetrics : public MetricsSink {
 public:
  // A new event file in `dir` whose first summary is `config_toml` (the
  // resolved config) as text tagged "config" at step `start_step`.
  TensorBoardMetrics(const std::string& dir, const std::string& config_toml, int start_step);
  // The record's scalars at its "step", as one event (records without a step
  // are skipped);
  // {"event": "resumed", "step": N} is a restart after step N.
  void write(const nlohmann::json& record) override;
  const std::string& path() const { return events_.path(); }

 private:
  EventFileWriter events_;
};

}  // namespace llm
