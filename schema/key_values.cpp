// Reading and writing a key's value as text (see key_values.h).
#include "schema/key_values.h"

#include <charconv>
#include <limits>
#include <string_view>
#include <utility>

#include "schema/toml_tables.h"
#include "base/cli_values.h"
#include "base/error.h"

namespace llm {
namespace {

template <class T>
std::string integer_range() {
  return fmt::format("[{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
}

template <class T>
T parse_number(const std::string& text, const std::string& key, const char* what) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if constexpr (std::is_integral_v<T>) {
    LLM_CHECK(ec != std::errc::result_out_of_range,
              "{}: {} is out of range for a {}-bit integer {}", key, text, 8 * sizeof(T),
              integer_range<T>());
  }
  LLM_CHECK(ec == std::errc() && ptr == end && !text.empty(), "{}: expected {}, got '{}'", key,
            what, text);
  return value;
}

// The shortest text that reads back as the same value (0.003, not
// 0.0030000000000000001; 0.95f, not 0.949999988), always a TOML float (1.0,
// not 1).
template <class T>
void write_float(std::ostream& out, T value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  out << text;
}

}  // namespace

size_t parse_bytes(const std::string& text, const std::string& what) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  double scale = 0;
  LLM_CHECK(end == 0 || !unit.empty(),
            "{}: '{}' has no unit; write it with one, e.g. {}GiB, {}GB or {}B", what, text, text,
            text, text);
  for (auto [name, factor] :
       {std::pair{"B", 1.0}, std::pair{"KiB", 1024.0}, std::pair{"MiB", 1048576.0},
        std::pair{"GiB", 1073741824.0}, std::pair{"TiB", 1099511627776.0}, std::pair{"KB", 1e3},
        std::pair{"MB", 1e6}, std::pair{"GB", 1e9}, std::pair{"TB", 1e12}}) {
    if (unit == name) scale = factor;
  }
  LLM_CHECK(end > 0 && scale > 0 && value > 0, "{}: expected a size like 80GiB or 40GB, got '{}'",
            what, text);
  // Converting a double beyond size_t's range is undefined (found by
  // fuzz_hardware_toml): sizes stop at an exbibyte, far above any machine.
  LLM_CHECK(value * scale <= 0x1p60, "{}: '{}' is larger than 1 EiB", what, text);
  return static_cast<size_t>(value * scale);
}

void read_key_text(const std::string& text, int& out, const std::string& key) {
  out = parse_number<int>(text, key, "an integer");
}
void read_key_text(const std::string& text, int64_t& out, const std::string& key) {
  out = parse_number<int64_t>(text, key, "an integer");
}
void read_key_text(const std::string& text, uint64_t& out, const std::string& key) {
  out = parse_number<uint64_t>(text, key, "a non-negative integer");
}
void read_key_text(const std::string& text, double& out, const std::string& key) {
  out = parse_number<double>(text, key, "a number");
}
void read_key_text(const std::string& text, float& out, const std::string& key) {
  out = static_cast<float>(parse_number<double>(text, key, "a number"));
}
void read_key_text(const std::string& text, bool& out, const std::string& key) {
  LLM_CHECK(text == "true" || text == "false", "{}: expected true or false, got '{}'", key, text);
  out = text == "true";
}
void read_key_text(const std::string& text, std::string& out, const std::string&) { out = text; }
void read_key_text(const std::string& text, AutoCount& out, const std::string& key) {
  if (text == "auto") {
    out.value = 0;
    return;
  }
  out.value = parse_number<int>(text, key, "a positive integer or auto");
  LLM_CHECK(out.value >= 1, "{}: expected a positive integer or auto, got '{}'", key, text);
}
void read_key_text(const std::string& text, SwitchOrPath& out, const std::string& key) {
  LLM_CHECK(!text.empty(), "{}: expected true, false or a directory", key);
  if (text == "true" || text == "false")
    out = {text == "true", ""};
  else
    out = {true, text};
}
void read_key_text(const std::string& text, ByteSize& out, const std::string& key) {
  out.bytes = parse_bytes(text, key);
}
void read_key_text(const std::string& text, Duration& out, const std::string& key) {
  out.seconds = parse_duration_seconds(text, key);
}

void write_key_value(std::ostream& out, int value) { out << value; }
void write_key_value(std::ostream& out, int64_t value) { out << value; }
void write_key_value(std::ostream& out, uint64_t value) { out << value; }
void write_key_value(std::ostream& out, bool value) { out << (value ? "true" : "false"); }
void write_key_value(std::ostream& out, double value) { write_float(out, value); }
void write_key_value(std::ostream& out, float value) { write_float(out, value); }
void write_key_value(std::ostream& out, AutoCount value) {
  if (value.automatic())
    out << "\"auto\"";
  else
    out << value.value;
}
void write_key_value(std::ostream& out, const std::string& value) {
  out << toml::value<std::string>(value);
}
void write_key_value(std::ostream& out, const SwitchOrPath& value) {
  if (value.path.empty())
    write_key_value(out, value.on);
  else
    write_key_value(out, value.path);
}

}  // namespace llm
