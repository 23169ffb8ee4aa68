#!/usr/bin/env python3
"""Checks the pre-tokenizer's Unicode classes (llm::char_class, from
data/tokenizers/unicode_ranges.cpp) against the reference libraries on every
code point: tiktoken (Rust's regex crate) and Hugging Face tokenizers
(Oniguruma), each asked whether the code point alone matches \\p{L}, \\p{N}
and \\s. A code point is a letter, a number, white space or other in the
first of those it matches, as char_class answers.

Not part of `make test` (it needs both packages and g++). It compiles a small
driver (DRIVER below: one class letter per code point) from the repository's
sources into a temporary folder. Each mismatch is counted and the first few
printed; any makes the exit status 1.

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tiktoken tokenizers
    /tmp/tokvenv/bin/python tools/check_unicode_classes.py
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import tiktoken
import tokenizers
from tokenizers import Regex, pre_tokenizers

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["data/tokenizers/unicode_classes.cpp", "data/tokenizers/unicode_ranges.cpp"]
CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
# (class letter, pattern) in char_class's order of precedence.
CLASSES = [("l", r"\p{L}"), ("n", r"\p{N}"), ("s", r"\s")]
DRIVER = r"""
#include <cstdio>
#include "data/tokenizers/unicode_classes.h"
int main() {
  const char letters[] = {'o', 'l', 'n', 's'};  // CharClass's order
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) std::putchar(letters[static_cast<int>(llm::char_class(cp))]);
  }
}
"""


def tiktoken_matches(pattern: str):
    """tiktoken's encode_ordinary drops text its pattern does not match."""
    ranks = {bytes([b]): b for b in range(256)}
    encoding = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return lambda cp: bool(encoding.encode_ordinary(chr(cp)))


def tokenizers_matches(pattern: str):
    """Between two '!', a match is a piece of its own: three pieces."""
    split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    return lambda cp: len(split.pre_tokenize_str("!" + chr(cp) + "!")) == 3


def classes_of(matches_for) -> str:
    tests = [(letter, matches_for(pattern)) for letter, pattern in CLASSES]
    return "".join(next((letter for letter, test in tests if test(cp)), "o") for cp in CODE_POINTS)


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        driver = Path(folder) / "class_driver"
        (Path(folder) / "driver.cpp").write_text(DRIVER)
        subprocess.run(["g++", "-std=c++20", "-O2", f"-I{ROOT}", str(Path(folder) / "driver.cpp"),
                        *(str(ROOT / s) for s in SOURCES), "-o", str(driver)], check=True)
        ours = subprocess.run([str(driver)], capture_output=True, text=True, check=True).stdout
    assert len(ours) == len(CODE_POINTS)
    failed = False
    for name, matches_for in [(f"tiktoken {tiktoken.__version__}", tiktoken_matches),
                              (f"tokenizers {tokenizers.__version__}", tokenizers_matches)]:
        reference = classes_of(matches_for)
        wrong = [cp for cp, a, b in zip(CODE_POINTS, ours, reference) if a != b]
        for cp in wrong[:5]:
            index = CODE_POINTS.index(cp)
            print(f"  U+{cp:04X}: {name} '{reference[index]}', ours '{ours[index]}'")
        counts = ", ".join(f"{letter} {reference.count(letter)}" for letter in "lnso")
        print(f"{name}: {len(CODE_POINTS)} code points ({counts}), mismatches {len(wrong)}")
        failed = failed or bool(wrong)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
