// Values of command-line options (--name value): whole numbers, positive
// numbers and comma lists, parsed strictly; errors name the option.
#pragma once

#include <string>
#include <vector>

namespace llm {

// The whole text as an integer, else an llm::Error naming --option.
long long parse_integer(const std::string& text, const std::string& option);
// The whole text as a number > 0, else an llm::Error naming --option.
double parse_positive_number(const std::string& text, const std::string& option);
// "a,b,,c" -> {a, b, c} (empty items dropped).
std::vector<std::string> split_commas(const std::string& text);

}  // namespace llm
