// rank_fault_from_env: "R:N" from the environment, or off.
#include "base/fault_hooks.h"

#include <cstdio>
#include <cstdlib>

namespace llm {

RankFault rank_fault_from_env(const char* variable) {
  const char* text = std::getenv(variable);
  int rank = -1;
  long long value = 0;
  if (!text || std::sscanf(text, "%d:%lld", &rank, &value) != 2 || rank < 0) return {};
  return {rank, value};
}

}  // namespace llm
