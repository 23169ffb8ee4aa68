#!/usr/bin/env bash
# Fetches the cudnn-frontend C++ headers (header-only) that the CUDA build's
# cuDNN attention (model/cudnn/) compiles against, from the PyPI wheel
# nvidia-cudnn-frontend (the only place they are reachable from here; Debian
# has no package), into the git-ignored third_party/cudnn-frontend/include.
# `make deps` runs it when nvcc is present. Safe to run twice: a present
# header tree of the pinned version is kept. Invariant: the tree appears
# whole or not at all (unpacked beside, then renamed into place).
set -euo pipefail

VERSION=1.32.0
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/third_party/cudnn-frontend
stamp=$dest/VERSION

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$VERSION" ] && [ -f "$dest/include/cudnn_frontend.h" ]; then
  exit 0
fi
python=$(command -v python3 || true)
if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "fetch_cudnn_frontend: needs python3 with pip (Debian: python3-pip)" >&2
  exit 1
fi

echo "fetching cudnn-frontend $VERSION headers (PyPI nvidia-cudnn-frontend) into third_party/cudnn-frontend"
mkdir -p "$root/third_party"
work=$(mktemp -d "$root/third_party/.fetch.XXXXXX")  # same file system: the rename is atomic
trap 'rm -rf "$work"' EXIT
# Any x86_64 wheel holds the same headers; naming the platform and Python
# makes the pick independent of the local interpreter.
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --python-version 3.11 \
  --dest "$work" "nvidia-cudnn-frontend==$VERSION"
wheel=$(ls "$work"/nvidia_cudnn_frontend-*.whl)
"$python" -m zipfile -e "$wheel" "$work/unpacked"
if [ ! -f "$work/unpacked/include/cudnn_frontend.h" ]; then
  echo "fetch_cudnn_frontend: $(basename "$wheel") has no include/cudnn_frontend.h" >&2
  exit 1
fi
mkdir -p "$work/tree"
mv "$work/unpacked/include" "$work/tree/include"
cp "$work/unpacked/"*.dist-info/licenses/LICENSE* "$work/tree/" 2>/dev/null || true
echo "$VERSION" > "$work/tree/VERSION"
rm -rf "$dest.old"
[ -d "$dest" ] && mv "$dest" "$dest.old"
mv "$work/tree" "$dest"
rm -rf "$dest.old"
