// A key's value as text and back: the one reader and writer of every value
// type a config key or a command option holds (numbers strictly, whole text
// only; bools as true / false; named enums by name; sizes and durations with
// their unit).
// The config (config.cpp) and the subcommands' options (command_options.h)
// both read through these, so a value is spelt and refused alike in a TOML
// override and on a subcommand's command line. Errors name `key`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "schema/config.h"

namespace llm {

// A size in bytes, written with its unit: 80GiB, 40GB, 512MiB, 1000B.
struct ByteSize {
  size_t bytes = 0;
};

// A duration, written with its unit: 90s, 10min, 1.5h, 500ms.
struct Duration {
  double seconds = 0;
};

// Parses "80GiB", "40GB", "512MiB", "1000000B"; a bare number is refused (is
// "80" bytes or GiB?); errors name `what`.
size_t parse_bytes(const std::string& text, const std::string& what);

void read_key_text(const std::string& text, int& out, const std::string& key);
void read_key_text(const std::string& text, int64_t& out, const std::string& key);
void read_key_text(const std::string& text, uint64_t& out, const std::string& key);
void read_key_text(const std::string& text, double& out, const std::string& key);
void read_key_text(const std::string& text, float& out, const std::string& key);
void read_key_text(const std::string& text, bool& out, const std::string& key);
void read_key_text(const std::string& text, std::string& out, const std::string& key);
void read_key_text(const std::string& text, AutoCount& out, const std::string& key);
void read_key_text(const std::string& text, SwitchOrPath& out, const std::string& key);
void read_key_text(const std::string& text, ByteSize& out, const std::string& key);
void read_key_text(const std::string& text, Duration& out, const std::string& key);
template <NamedEnum E>
void read_key_text(const std::string& text, E& out, const std::string& key) {
  out = parse_enum<E>(text, key);
}

// As TOML writes the value (the dumped config, the usage's defaults).
void write_key_value(std::ostream& out, int value);
void write_key_value(std::ostream& out, int64_t value);
void write_key_value(std::ostream& out, uint64_t value);
void write_key_value(std::ostream& out, double value);
void write_key_value(std::ostream& out, float value);
void write_key_value(std::ostream& out, bool value);
void write_key_value(std::ostream& out, AutoCount value);
void write_key_value(std::ostream& out, const std::string& value);
void write_key_value(std::ostream& out, const SwitchOrPath& value);
template <NamedEnum E>
void write_key_value(std::ostream& out, E value) {
  write_key_value(out, std::string(to_string(value)));
}

}  // namespace llm
