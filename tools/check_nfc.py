#!/usr/bin/env python3
"""Checks our NFC (data/tokenizers/unicode_nfc.cpp) against Hugging Face
tokenizers' NFC normalizer, the one Qwen2's and Qwen3's tokenizer.json name.

Not part of `make test` (it needs the `tokenizers` package and g++). It
compiles a small driver (DRIVER below: stdin lines of hex code points in, their
NFC out) from the repository's sources into a temporary folder, and compares
tokenizers.normalizers.NFC().normalize_str with it on
  - every column of /usr/share/unicode/NormalizationTest.txt.bz2, newer
    characters than our tables' included (the reference's answers, not the file's),
  - every code point alone (surrogates aside),
  - every code point c in the probes c U+0301, a U+0345 c and a c U+0301,
    which tell its class and compositions apart,
  - --random strings drawn from the code points that take part in NFC.
Each mismatch is counted and the first few printed; any makes the exit status 1.

    python3 -m venv /tmp/nfcvenv && /tmp/nfcvenv/bin/pip install tokenizers
    /tmp/nfcvenv/bin/python tools/check_nfc.py
"""
import argparse
import bz2
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from tokenizers.normalizers import NFC

ROOT = Path(__file__).resolve().parent.parent
UCD = Path("/usr/share/unicode")
SOURCES = ["data/tokenizers/unicode_nfc.cpp", "data/tokenizers/unicode_nfc_tables.cpp", "data/utf8.cpp"]
DRIVER = r"""
#include <iostream>
#include <sstream>
#include <string>
#include "data/tokenizers/unicode_nfc.h"
#include "data/utf8.h"
int main() {
  std::ios::sync_with_stdio(false);
  for (std::string line; std::getline(std::cin, line);) {
    std::u32string code_points;
    std::istringstream in(line);
    for (std::string hex; in >> hex;) code_points += static_cast<char32_t>(std::stoul(hex, nullptr, 16));
    std::string text;
    for (const char32_t cp : code_points) {
      const int length = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
      text += static_cast<char>(lead[length] | (cp >> (6 * (length - 1))));
      for (int k = length - 2; k >= 0; --k) text += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
    }
    if (!llm::is_valid_utf8(text)) return 1;
    const std::string normalized = llm::nfc(text);
    std::string out;
    for (size_t at = 0; at < normalized.size();) {
      const llm::CodePoint cp = llm::next_code_point(normalized, at);
      std::ostringstream hex;
      hex << std::uppercase << std::hex << cp.value;
      out += (out.empty() ? "" : " ") + hex.str();
      at += static_cast<size_t>(cp.length);
    }
    std::cout << out << '\n';
  }
}
"""


def normalization_test_columns() -> list[list[int]]:
    out = []
    with bz2.open(UCD / "NormalizationTest.txt.bz2", "rt") as lines:
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("@"):
                out += [[int(h, 16) for h in column.split()] for column in line.split(";")[:5]]
    return out


def taking_part() -> list[int]:
    """Code points with a nonzero class or a canonical decomposition, their parts, and Hangul jamo."""
    found = set(range(0x1100, 0x1113)) | set(range(0x1161, 0x1176)) | set(range(0x11A7, 0x11C3))
    found |= {0x61, 0x20, 0xAC00, 0xAC01, 0xD7A3}
    for line in (UCD / "UnicodeData.txt").read_text().splitlines():
        fields = line.split(";")
        if int(fields[3]) or (fields[5] and not fields[5].startswith("<")):
            found.add(int(fields[0], 16))
            found.update(int(h, 16) for h in fields[5].split() if not h.startswith("<"))
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random", type=int, default=300000, help="random strings to compare")
    args = parser.parse_args()
    groups = {"NormalizationTest columns": normalization_test_columns()}
    singles = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    groups["single code points"] = [[cp] for cp in singles]
    groups["probes"] = [probe for cp in singles for probe in ([cp, 0x301], [0x61, 0x345, cp], [0x61, cp, 0x301])]
    pool, rng = taking_part(), random.Random(1)
    groups["random strings"] = [[rng.choice(pool) for _ in range(rng.randint(1, 12))] for _ in range(args.random)]

    with tempfile.TemporaryDirectory() as folder:
        driver = Path(folder) / "nfc_driver"
        (Path(folder) / "driver.cpp").write_text(DRIVER)
        subprocess.run(["g++", "-std=c++20", "-O2", f"-I{ROOT}", str(Path(folder) / "driver.cpp"),
                        *(str(ROOT / s) for s in SOURCES), "-o", str(driver)], check=True)
        reference, failed = NFC(), False
        for name, cases in groups.items():
            text = "".join(" ".join(f"{cp:X}" for cp in case) + "\n" for case in cases)
            ours = subprocess.run([str(driver)], input=text, capture_output=True, text=True,
                                  check=True).stdout.splitlines()
            assert len(ours) == len(cases), name
            mismatches = 0
            for case, line in zip(cases, ours):
                expected = [ord(ch) for ch in reference.normalize_str("".join(map(chr, case)))]
                got = [int(h, 16) for h in line.split()]
                if got != expected:
                    if mismatches < 5:
                        print(f"  {' '.join(f'{cp:04X}' for cp in case)}: tokenizers "
                              f"{' '.join(f'{cp:04X}' for cp in expected)}, ours {line}")
                    mismatches += 1
            print(f"{name}: {len(cases)}, mismatches {mismatches}")
            failed = failed or mismatches > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
