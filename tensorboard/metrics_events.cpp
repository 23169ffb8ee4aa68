// Metrics records to TensorBoard scalars, text and restarts.
#include "tensorboard/metrics_events.h"

#include <sstream>

namespace llm {
namespace {

// `text` as a Markdown code block (four spaces before each line), so that
// TensorBoard shows TOML as written.
std::string markdown_code_block(const std::string& text) {
  std::string block, line;
  std::istringstream lines(text);
  while (std::getline(lines, line)) block += "    " + line + "\n";
  return block;
}

}  // namespace

std::vector<TaggedScalar> metrics_record_scalars(const nlohmann::json& record) {
  const std::string group = record.value("event", "train");
  std::vector<TaggedScalar> scalars;
  for (const auto& [key, value] : record.items()) {
    if (key == "step" || !value.is_number()) continue;
    const std::string tag = key.starts_with("val_") ? "val/" + key.substr(4) : group + "/" + key;
    scalars.push_back({tag, value.get<double>()});
  }
  return scalars;
}

TensorBoardMetrics::TensorBoardMetrics(const std::string& dir, const std::string& config_toml,
                                       int start_step)
    : events_(dir) {
  events_.write_text("config", start_step, markdown_code_block(config_toml));
}

void TensorBoardMetrics::write(const nlohmann::json& record) {
  if (!record.contains("step") || !record["step"].is_number_integer()) return;
  const int64_t step = record["step"].get<int64_t>();
  // metrics.jsonl keeps the steps up to N of the earlier run; so does TensorBoard.
  if (record.value("event", "") == "resumed") events_.write_session_start(step + 1);
  events_.write_scalars(step, metrics_record_scalars(record));
}

}  // namespace llm
