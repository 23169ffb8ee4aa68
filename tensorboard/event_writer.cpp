// Event file naming and the Event messages of scalars, text and restarts,
// built on the stack as protobuf-c structs and packed. protobuf-c declares
// strings `char*` but packing only reads them, hence the const_casts.
#include "tensorboard/event_writer.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "tensorboard/event.pb-c.h"

namespace llm {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// <dir>/events.out.tfevents.<time, 10 digits>.<host>[.N], a name not yet taken.
std::string new_event_file_path(const std::string& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const std::string base = fmt::format("{}/events.out.tfevents.{:010d}.{}", dir,
                                       static_cast<long long>(std::time(nullptr)), host);
  std::string path = base;
  for (int n = 1; std::filesystem::exists(path); ++n) path = fmt::format("{}.{}", base, n);
  return path;
}

void append_event(TfRecordWriter& file, Tensorboard__Event& event) {
  event.wall_time = unix_seconds();
  std::string bytes(tensorboard__event__get_packed_size(&event), '\0');
  tensorboard__event__pack(&event, reinterpret_cast<uint8_t*>(bytes.data()));
  file.append(bytes);
}

// An event whose summary is `values` (tags and values set) at `step`.
void append_summary(TfRecordWriter& file, int64_t step,
                    std::vector<Tensorboard__Summary__Value*> values) {
  Tensorboard__Summary summary = TENSORBOARD__SUMMARY__INIT;
  summary.n_value = values.size();
  summary.value = values.data();
  Tensorboard__Event event = TENSORBOARD__EVENT__INIT;
  event.step = step;
  event.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
  event.summary = &summary;
  append_event(file, event);
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& dir) : file_(new_event_file_path(dir)) {
  Tensorboard__Event event = TENSORBOARD__EVENT__INIT;
  event.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
  event.file_version = const_cast<char*>("brain.Event:2");
  append_event(file_, event);
}

void EventFileWriter::write_scalars(int64_t step, const std::vector<TaggedScalar>& scalars) {
  if (scalars.empty()) return;
  std::vector<Tensorboard__Summary__Value> values(scalars.size());
  std::vector<Tensorboard__Summary__Value*> pointers;
  for (size_t i = 0; i < scalars.size(); ++i) {
    Tensorboard__Summary__Value& v = values[i];
    v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = const_cast<char*>(scalars[i].tag.c_str());
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = static_cast<float>(scalars[i].value);
    pointers.push_back(&v);
  }
  append_summary(file_, step, std::move(pointers));
}

void EventFileWriter::write_text(const std::string& tag, int64_t step, const std::string& text) {
  Tensorboard__SummaryMetadata__PluginData plugin =
      TENSORBOARD__SUMMARY_METADATA__PLUGIN_DATA__INIT;
  plugin.plugin_name = const_cast<char*>("text");
  Tensorboard__SummaryMetadata metadata = TENSORBOARD__SUMMARY_METADATA__INIT;
  metadata.plugin_data = &plugin;
  metadata.data_class = TENSORBOARD__DATA_CLASS__DATA_CLASS_TENSOR;
  Tensorboard__TensorShapeProto scalar_shape = TENSORBOARD__TENSOR_SHAPE_PROTO__INIT;  // no dims
  ProtobufCBinaryData bytes{text.size(),
                            reinterpret_cast<uint8_t*>(const_cast<char*>(text.data()))};
  Tensorboard__TensorProto tensor = TENSORBOARD__TENSOR_PROTO__INIT;
  tensor.dtype = TENSORBOARD__DATA_TYPE__DT_STRING;
  tensor.tensor_shape = &scalar_shape;
  tensor.n_string_val = 1;
  tensor.string_val = &bytes;
  Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
  v.tag = const_cast<char*>(tag.c_str());
  v.metadata = &metadata;
  v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR;
  v.tensor = &tensor;
  append_summary(file_, step, {&v});
}

void EventFileWriter::write_session_start(int64_t step) {
  Tensorboard__SessionLog session = TENSORBOARD__SESSION_LOG__INIT;
  session.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
  Tensorboard__Event event = TENSORBOARD__EVENT__INIT;
  event.step = step;
  event.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
  event.session_log = &session;
  append_event(file_, event);
}

}  // namespace llm
