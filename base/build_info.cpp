// build_commit from the header the build generates (cmake/git_commit.cmake).
#include "base/build_info.h"

#include "git_commit.h"

namespace llm {

const char* build_commit() { return LLM_GIT_COMMIT; }

}  // namespace llm
