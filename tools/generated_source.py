"""What the scripts that write C++ sources share (make_unicode_tables.py,
make_nfc_tables.py, make_split_cases.py): the lines formatted as
tools/check_format.sh wants them, then written, or with --check compared
with the committed file (exit 1 when it differs)."""
import argparse
import pathlib
import subprocess
import sys


def formatted(path: pathlib.Path, lines: list[str]) -> str:
    return subprocess.run(["clang-format", f"--assume-filename={path}"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True, cwd=path.parent).stdout


def main(path: pathlib.Path, render, doc: str) -> int:
    """render() gives the file's lines; `doc` is the script's docstring."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not up to date")
    args = parser.parse_args()
    text = formatted(path, render())
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"error: {path} is out of date: run python3 {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path}")
    return 0
