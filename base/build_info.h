// What this binary was built from, for the logs and metrics of a run.
// Invariant: the commit is taken at build time (cmake/git_commit.cmake runs at
// every build), never read from the working tree at run time.
#pragma once

namespace llm {

// The git commit of the sources built: a short hash, "-dirty" appended when
// tracked files had uncommitted changes, "unknown" when built outside a git
// work tree.
const char* build_commit();

}  // namespace llm
