"""The documents that tools/check_tokenizers.py encodes, and its JSONL corpus writer.

Documents are Python str, so every encoder sees the same text: the fixture
cases decoded with errors="replace", letters and digits of recent Unicode
versions in contexts where their class decides the split, the repository's
UTF-8 text files, and extra files (JSONL with a "text" field, or plain text cut at line ends into
documents of at most PLAIN_DOC_BYTES; nothing is dropped).
"""
import base64
import json
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
PLAIN_DOC_BYTES = 64 * 1024
MAX_FILE_BYTES = 1 << 20


def fixture_cases(fixtures):
    path = pathlib.Path(fixtures) / "cases.json"
    if not path.is_file():
        sys.exit(f"error: {path}: missing (tools/make_tokenizer_fixtures.py writes it)")
    documents = json.loads(path.read_text())["documents"]
    return [base64.b64decode(d).decode("utf-8", errors="replace") for d in documents]


def repository_texts():
    """Every file git tracks that is UTF-8 text (no NUL) of at most MAX_FILE_BYTES, in path order."""
    result = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True)
    if result.returncode != 0:
        sys.exit(f"error: git ls-files in {REPO} failed: {result.stderr.decode(errors='replace').strip()}")
    texts = []
    for name in sorted(n for n in result.stdout.decode().split("\0") if n):
        path = REPO / name
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return texts


def plain_documents(text):
    """text cut after '\\n' characters into documents of at most PLAIN_DOC_BYTES (a longer line stays whole)."""
    docs, current, size = [], [], 0
    for line in re.findall(r"[^\n]*\n|[^\n]+\Z", text):
        length = len(line.encode("utf-8"))
        if current and size + length > PLAIN_DOC_BYTES:
            docs.append("".join(current))
            current, size = [], 0
        current.append(line)
        size += length
    if current:
        docs.append("".join(current))
    return docs


def file_documents(path):
    p = pathlib.Path(path)
    if not p.is_file():
        sys.exit(f"error: {path}: no such file")
    raw = p.read_bytes().decode("utf-8", errors="replace")
    if p.suffix != ".jsonl":
        return plain_documents(raw)
    docs = []
    for number, line in enumerate(raw.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"error: {path}:{number}: not JSON ({e.msg})")
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            sys.exit(f"error: {path}:{number}: no string field \"text\"")
        # A JSON string may hold a lone surrogate ("\ud800"); it becomes U+FFFD, as tiktoken would make it.
        docs.append(re.sub("[\ud800-\udfff]", "\ufffd", record["text"]))
    return docs


# Letters and digits assigned in Unicode 15.0 to 18.0, a few per version (code
# points from Unicode's DerivedAge.txt): the reference libraries split by
# their own Unicode version's classes (docs/data.md), so a character newer
# than it is "other" there.
RECENT_CHARACTERS = {
    "15.0": [0x31350, 0x11F04, 0x1E4D0, 0x1E4F0],  # CJK Ext H, Kawi letter A, Nag Mundari letter O, digit 0
    "15.1": [0x2EBF0, 0x2EE5D],  # CJK Ext I, first and last
    "16.0": [0x1C89, 0x105C0, 0x10D40, 0x16130, 0x13460],  # Cyrillic TJE, Todhri A, Garay and Gurung Khema 0
    "17.0": [0x323B0, 0x10940, 0x18D09, 0x1E6C0, 0x11DE0],  # CJK Ext J, Sidetic, Tangut, Tai Yo, Tolong Siki 0
    "18.0": [0xA7DD, 0x18E00, 0x3D000, 0x12550, 0x1246F],  # Latin, Jurchen, small seal, cuneiform numbers
}


def recent_unicode():
    """One document per version: each character before a contraction, inside words and digit runs, alone."""
    docs = []
    for version, code_points in RECENT_CHARACTERS.items():
        lines = [f"Unicode {version}:"]
        for c in map(chr, code_points):
            lines.append(f"{c}'s {c}{c}'ll x{c}y 7{c}7 {c}12345 ${c} '{c}' {c}\n")
        docs.append("\n".join(lines))
    return docs


def build(fixtures, repeat, extra_files):
    docs = fixture_cases(fixtures) * repeat + recent_unicode() + repository_texts()
    for path in extra_files:
        docs += file_documents(path)
    return docs


def write_jsonl(path, docs, copies=1):
    """One {"text": ...} line per document; the whole list copies times."""
    lines = "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(copies):
            f.write(lines)
