#!/usr/bin/env bash
# Checks that every C++ and CUDA source is formatted as .clang-format says
# (clang-format 14, Debian 12's, installed by `make deps`). Fix with:
#   clang-format -i $(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.cc')
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format not found: run make deps" >&2; exit 1; }
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.cc')
else
  mapfile -t files < <(find . -path ./build -prune -o -path ./third_party -prune -o \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cc' \) -print)
fi
clang-format --dry-run --Werror "${files[@]}"
echo "check_format: ${#files[@]} files formatted as .clang-format says"
