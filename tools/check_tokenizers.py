#!/usr/bin/env python3
"""Checks `./train prepare`'s tokenizers against the reference libraries, and its speed against tiktoken.

Not part of `make test` (it needs Python packages and, unless given
--llama3-tokenizer, PyPI). It writes a corpus as JSONL ({"text": ...} per
document, see tools/tokenizer_corpus.py), and for each tokenizer runs
    ./train prepare --tokenizer FILE --input corpus.jsonl --out DIR --val-fraction 0 --jobs N --quiet
reads DIR/train_*.bin (llm.c shards; each document BOS + ids + EOS, in input
order) and compares every document with the reference encoding, done without
special tokens (text that reads "<|eot_id|>" is text):
  llama3          Llama 3's tokenizer.model (out of the llama-models wheel) through tiktoken
                  encode_ordinary, Llama 3's pattern and 256 specials (BOS 128000, EOS 128001)
  tiktoken        test/data/tokenizers/bpe.tiktoken, the same way
  tokenizer-json  test/data/tokenizers/tokenizer.json through HF tokenizers
                  (encode(add_special_tokens=False) with encode_special_tokens on)
  sentencepiece   test/data/tokenizers/sentencepiece.model through sentencepiece (its bos/eos ids)
  export          `./train export`'s tokenizer.json for Llama 3, against tiktoken as in llama3: in a
                  folder, the first EXPORT_DOCS documents are prepared (--val-fraction 0.1), a tiny
                  model (EXPORT_TOML) trains one step, and `./train export --checkpoint run --out hf`
                  writes hf/; then every document is encoded by HF tokenizers from hf/tokenizer.json
                  (encode_special_tokens on; add_special_tokens=False, and =True, which must add BOS)
                  and, if transformers is installed, by AutoTokenizer.from_pretrained(hf):
                  tok(text)["input_ids"] must be BOS + the ids and tok.decode(ids) the text, for
                  the documents without "<|" (it would cut out the look-alikes of special tokens),
                  and tok.bos_token / eos_token must be <|begin_of_text|> / <|end_of_text|> (ids too)
The corpus: the fixture cases (cases.json, decoded with errors="replace")
--repeat times, every UTF-8 text file git tracks, and the --corpus files. A
mismatch prints the first differing document with a short diff and makes the
exit status 1. A dry run skips export.

Speed, on Llama 3 and the corpus copied up to --speed-mb: ours at --jobs 1
(tokens and seconds parsed from prepare's closing line, PREPARE_LINE below;
these runs leave out --quiet, which silences that line) against tiktoken
encode_ordinary in one thread on the same documents, in MB/s and tokens/s;
then ours at --jobs 2 and its speedup. Both runs are checked too.
llama-models' own Tokenizer.encode also cuts runs of more than 25,000
whitespace or non-whitespace characters before tiktoken; this check does
not, so --corpus documents should hold no such runs.

Usage:
    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tiktoken tokenizers sentencepiece
    /tmp/tokvenv/bin/pip install transformers                          # optional, for export; no torch needed
    /tmp/tokvenv/bin/python tools/check_tokenizers.py                  # after building ./train
    /tmp/tokvenv/bin/python tools/check_tokenizers.py --corpus more.jsonl --only llama3
    /tmp/tokvenv/bin/python tools/check_tokenizers.py --only export --no-speed
    /tmp/tokvenv/bin/python tools/check_tokenizers.py --dry-run        # without ./train: the corpus, the
        references, tiktoken's timing, and the shard reader and comparer on shards written from the references
"""
import argparse
import array
import datetime
import importlib
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import llama3_tokens  # noqa: E402
import llmc_shards  # noqa: E402
import tokenizer_corpus  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / "test/data/tokenizers"
LLAMA_MODELS = "llama-models==0.3.0"
LLAMA3_MEMBER = "llama_models/llama3/tokenizer.model"
# prepare's closing line, e.g. "prepare: encoded 31.72 MiB of text into 9371022 tokens in 1.52 s (...)".
# Only the groups tokens and seconds are read (the bytes are the corpus's); adjust if the wording changes.
PREPARE_LINE = re.compile(r"prepare: encoded .+? into (?P<tokens>\d+) tokens in (?P<seconds>[0-9.]+) ?s\b")
CHECKS = ("llama3", "tiktoken", "tokenizer-json", "sentencepiece", "export")
EXPORT_DOCS = 300
# The export check's model: Llama 3's vocabulary, everything else tiny.
EXPORT_TOML = """\
[model]
dim = 64
n_layers = 1
n_heads = 4
n_kv_heads = 2
ffn_dim = 128
vocab_size = {vocab_size}
tie_embeddings = false

[training]
steps = 1
batch_size = 2
micro_batch_size = 2
seq_len = 32
eval_interval = 0
sample_tokens = 0

[data]
train = "data/train_*.bin"
val = "data/val_*.bin"
tokenizer = {tokenizer}

[checkpoint]
dir = "run"
"""


def need(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        sys.exit(f"error: this check needs the Python package {module.split('.')[0]} "
                 "(pip install tiktoken tokenizers sentencepiece)")


def fetch_llama3(cache):
    """llama_models/llama3/tokenizer.model out of the llama-models wheel, downloaded once into cache."""
    target = cache / "llama3_tokenizer.model"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("llama_models-*.whl"))
    if not wheels:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                 "--dest", str(cache), LLAMA_MODELS], capture_output=True, text=True)
        wheels = sorted(cache.glob("llama_models-*.whl"))
        if result.returncode != 0 or not wheels:
            last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
            sys.exit(f"error: pip download {LLAMA_MODELS} failed ({last}); give --llama3-tokenizer PATH")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        try:
            data = wheel.read(LLAMA3_MEMBER)
        except KeyError:
            sys.exit(f"error: {wheels[-1]} has no {LLAMA3_MEMBER}")
    target.write_bytes(data)
    return target


# ---- reference encoders: each gives (encode(text) -> ids, bos, eos, uint32 shards?, "library version")

def tiktoken_reference(path):
    tiktoken = need("tiktoken")
    ranks = need("tiktoken.load").load_tiktoken_bpe(str(path))
    specials = {s: len(ranks) + i for i, s in enumerate(llama3_tokens.SPECIALS)}
    enc = tiktoken.Encoding(name=path.name, pat_str=llama3_tokens.PATTERN, mergeable_ranks=ranks,
                            special_tokens=specials)
    bos, eos = specials["<|begin_of_text|>"], specials["<|end_of_text|>"]
    return enc.encode_ordinary, bos, eos, enc.n_vocab > 65536, f"tiktoken {tiktoken.__version__}"


def tokenizer_json_reference(path):
    tokenizers = need("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.encode_special_tokens = True
    bos, eos = tok.token_to_id("<|begin_of_text|>"), tok.token_to_id("<|end_of_text|>")
    if bos is None or eos is None:
        sys.exit(f"error: {path}: no <|begin_of_text|> / <|end_of_text|> token")

    def encode(text):
        return tok.encode(text, add_special_tokens=False).ids
    return encode, bos, eos, tok.get_vocab_size() > 65536, f"tokenizers {tokenizers.__version__}"


def sentencepiece_reference(path):
    spm = need("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return sp.encode, sp.bos_id(), sp.eos_id(), sp.get_piece_size() > 65536, f"sentencepiece {spm.__version__}"


def reference_for(name, llama3):
    path = pathlib.Path({"llama3": llama3, "export": llama3, "tiktoken": FIXTURES / "bpe.tiktoken",
                         "tokenizer-json": FIXTURES / "tokenizer.json",
                         "sentencepiece": FIXTURES / "sentencepiece.model"}[name])
    if not path.is_file():
        sys.exit(f"error: {path}: missing")
    make = {"llama3": tiktoken_reference, "export": tiktoken_reference, "tiktoken": tiktoken_reference,
            "tokenizer-json": tokenizer_json_reference, "sentencepiece": sentencepiece_reference}[name]
    return path, make(path)


# ---- running ./train prepare and comparing

def read_tokens(out):
    shards = sorted(out.glob("train_*.bin"))
    if not shards:
        sys.exit(f"error: no train_*.bin in {out}")
    tokens = array.array("I")
    for shard in shards:
        tokens.extend(llmc_shards.read_shard(shard))
    return tokens


def run_command(command, cwd=None):
    """Runs command (in cwd); returns its stdout + stderr, or exits with its last lines if it fails."""
    command = [str(c) for c in command]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        sys.exit(f"error: {' '.join(command)} exited {result.returncode}: {' | '.join(tail)}")
    return result.stdout + result.stderr


def run_prepare(train, tokenizer, corpus, out, jobs, quiet=True):
    """Runs prepare; returns (the train shards' tokens in order, its closing line or '', wall seconds)."""
    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    output = run_command([train, "prepare", "--tokenizer", tokenizer, "--input", corpus, "--out", out,
                          "--val-fraction", "0", "--jobs", jobs] + (["--quiet"] if quiet else []))
    wall = time.perf_counter() - start
    lines = [line for line in output.splitlines() if PREPARE_LINE.search(line)]
    return read_tokens(out), (lines[-1] if lines else ""), wall


def expected_stream(expected, bos, eos):
    stream = array.array("I")
    for ids in expected:
        stream.append(bos)
        stream.extend(ids)
        stream.append(eos)
    return stream


def split_documents(tokens, bos, eos):
    """The token stream cut into documents at BOS ... EOS; None if it is not of that form."""
    docs, i = [], 0
    while i < len(tokens):
        if tokens[i] != bos:
            return None
        try:
            end = tokens.index(eos, i + 1)
        except ValueError:
            return None
        docs.append(tokens[i + 1:end])
        i = end + 1
    return docs


def show_diff(text, ours, expected):
    at = next((k for k, (a, b) in enumerate(zip(ours, expected)) if a != b), min(len(ours), len(expected)))
    lo = max(0, at - 4)
    return (f"    text[:120] = {text[:120]!r}\n"
            f"    first difference at token {at} (ours {len(ours)} tokens, reference {len(expected)})\n"
            f"    ours      [{lo}:] {ours[lo:at + 6]}\n"
            f"    reference [{lo}:] {expected[lo:at + 6]}")


def compare(label, docs, expected, tokens, bos, eos, copies=1):
    """Prints the comparison of tokens with copies x (BOS + expected + EOS); returns the mismatching documents."""
    nbytes = copies * sum(len(d.encode("utf-8")) for d in docs)
    ntok = copies * sum(map(len, expected))
    ndocs = copies * len(docs)
    head = f"  {label}: {ndocs} documents, {nbytes} bytes, {ntok} tokens"
    if tokens == expected_stream(expected, bos, eos) * copies:
        print(f"{head}, 0 mismatching")
        return 0
    ours = split_documents(tokens.tolist(), bos, eos)
    if ours is None or len(ours) != ndocs:
        found = "not a series of BOS ... EOS documents" if ours is None else f"{len(ours)} documents"
        print(f"{head}: MISMATCH: the shards hold {found} (BOS {bos}, EOS {eos})")
        return ndocs
    bad = [k for k in range(ndocs) if ours[k] != list(expected[k % len(docs)])]
    first = bad[0] % len(docs)
    print(f"{head}, {len(bad)} mismatching\n  first mismatch: document {first}\n"
          f"{show_diff(docs[first], ours[bad[0]], list(expected[first]))}")
    return len(bad)


def compare_docs(label, docs, encode, expected, keep=None):
    """Prints how encode(docs[k]) compares with expected[k] for each k in keep (default: all); returns mismatches."""
    keep = range(len(docs)) if keep is None else keep
    bad = [k for k in keep if list(encode(docs[k])) != list(expected[k])]
    ntok = sum(len(expected[k]) for k in keep)
    print(f"  {label}: {len(keep)} documents, {ntok} tokens, {len(bad)} mismatching")
    if bad:
        first = bad[0]
        print(f"  first mismatch: document {first}\n"
              f"{show_diff(docs[first], list(encode(docs[first])), list(expected[first]))}")
    return len(bad)


def self_test(name, docs, expected, bos, eos, wide, work):
    """Dry run: the shard reader and comparer on shards written from the reference, then on a corrupted copy."""
    stream = expected_stream(expected, bos, eos).tolist()
    out = work / f"self_test_{name}"
    out.mkdir(parents=True, exist_ok=True)
    half = len(stream) // 2
    llmc_shards.write_shard(out / "train_000.bin", stream[:half], wide)
    llmc_shards.write_shard(out / "train_001.bin", stream[half:], wide)
    tokens = read_tokens(out)
    if compare(f"{name}, shards written from the reference", docs, expected, tokens, bos, eos) != 0:
        sys.exit("error: self-test: the comparer rejected the reference's own shards")
    victim = next((k for k, ids in enumerate(expected) if ids), None)
    if victim is not None:
        at = sum(len(ids) + 2 for ids in expected[:victim]) + 1
        tokens[at] = min({0, 1, 2, 3, 4} - {bos, eos, tokens[at]})
        if compare(f"{name}, one token changed (must be caught)", docs, expected, tokens, bos, eos) != 1:
            sys.exit("error: self-test: the comparer missed a changed token")


# ---- speed

def rate(nbytes, ntok, seconds):
    return f"{nbytes / seconds / 1e6:8.2f} MB/s {ntok / seconds / 1e6:8.3f} Mtokens/s ({seconds:.3f} s)"


def parse_prepare_line(line, wall):
    """(tokens, seconds) from prepare's closing line; (None, wall) if it does not match."""
    match = PREPARE_LINE.search(line)
    if not match:
        print(f"  warning: no line matching PREPARE_LINE in prepare's output; using the wall time {wall:.3f} s")
        return None, wall
    return int(match.group("tokens")), float(match.group("seconds"))


def speed(args, train, llama3, docs, reference, work):
    """Times ours (--jobs 1 and 2) and tiktoken on Llama 3; returns the mismatching documents of our runs."""
    encode, expected, bos, eos = reference
    doc_bytes = sum(len(d.encode("utf-8")) for d in docs)
    copies = max(1, round(args.speed_mb * 1e6 / doc_bytes))
    corpus = work / "speed.jsonl"
    tokenizer_corpus.write_jsonl(corpus, docs, copies)
    nbytes = copies * doc_bytes
    print(f"speed (Llama 3): the corpus {copies} times, {copies * len(docs)} documents, {nbytes} bytes")
    start = time.perf_counter()
    ntok = sum(len(encode(d)) for _ in range(copies) for d in docs)
    reference_s = time.perf_counter() - start
    print(f"  tiktoken, 1 thread: {rate(nbytes, ntok, reference_s)}")
    if args.dry_run:
        return 0
    failures, seconds = 0, {}
    for jobs in (1, 2):
        # Not --quiet: quiet prepare prints no closing line.
        tokens, line, wall = run_prepare(train, llama3, corpus, work / f"speed_{jobs}", jobs, quiet=False)
        t, seconds[jobs] = parse_prepare_line(line, wall)
        print(f"  ours --jobs {jobs}:      {rate(nbytes, t or len(tokens), seconds[jobs])}   [{line.strip()}]")
        failures += compare(f"ours --jobs {jobs}", docs, expected, tokens, bos, eos, copies)
    print(f"  ours --jobs 1 vs tiktoken: {reference_s / seconds[1]:.2f}x the speed")
    print(f"  ours --jobs 2 vs --jobs 1: {seconds[1] / seconds[2]:.2f}x")
    return failures


# ---- export

def check_export(args, train, llama3, docs, expected, bos, eos, work):
    """Trains and exports a tiny Llama 3 run; compares its tokenizer with expected; returns the mismatches."""
    tokenizers = need("tokenizers")
    folder = work / "export"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    train, llama3 = train.resolve(), llama3.resolve()
    tokenizer_corpus.write_jsonl(folder / "corpus.jsonl", docs[:EXPORT_DOCS])
    run_command([train, "prepare", "--tokenizer", llama3, "--input", "corpus.jsonl", "--out", "data",
                 "--val-fraction", "0.1", "--jobs", args.jobs, "--quiet"], folder)
    (folder / "tiny.toml").write_text(EXPORT_TOML.format(vocab_size=bos + len(llama3_tokens.SPECIALS),
                                                         tokenizer=json.dumps(str(llama3))))
    run_command([train, "--config", "tiny.toml"], folder)
    run_command([train, "export", "--checkpoint", "run", "--out", "hf"], folder)
    hf = folder / "hf"
    print(f"  exported a 1-step run on the first {min(EXPORT_DOCS, len(docs))} documents to {hf}")

    tok = tokenizers.Tokenizer.from_file(str(hf / "tokenizer.json"))
    tok.encode_special_tokens = True
    with_bos = [[bos] + list(ids) for ids in expected]
    label = f"tokenizers {tokenizers.__version__}, hf/tokenizer.json"
    failures = compare_docs(f"{label}, add_special_tokens=False", docs,
                            lambda d: tok.encode(d, add_special_tokens=False).ids, expected)
    failures += compare_docs(f"{label}, add_special_tokens=True", docs, lambda d: tok.encode(d).ids, with_bos)

    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # "PyTorch was not found ..."
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        print("  transformers: not installed, AutoTokenizer not checked (pip install transformers)")
        return failures
    auto = transformers.AutoTokenizer.from_pretrained(str(hf))
    label = f"transformers {transformers.__version__}, AutoTokenizer ({type(auto).__name__})"
    wrong = (auto.bos_token, auto.bos_token_id, auto.eos_token, auto.eos_token_id) != (
        "<|begin_of_text|>", bos, "<|end_of_text|>", eos)
    keep = [k for k, d in enumerate(docs) if "<|" not in d]
    print(f"  {label}: bos_token {auto.bos_token} ({auto.bos_token_id}), eos_token {auto.eos_token} "
          f"({auto.eos_token_id}){' MISMATCH' if wrong else ''}; {len(docs) - len(keep)} documents holding "
          f"\"<|\" skipped")
    failures += wrong
    # verbose=False: no warning that a document is longer than model_max_length (seq_len).
    failures += compare_docs(f"{label}, tok(text)", docs, lambda d: auto(d, verbose=False)["input_ids"],
                             with_bos, keep)
    # Every document is valid UTF-8 (a str without surrogates), so decoding its ids gives it back.
    bad = [k for k in keep if auto.decode(list(expected[k])) != docs[k]]
    print(f"  {label}, decode(ids): {len(keep)} documents, {len(bad)} not giving the text back")
    if bad:
        print(f"  first: document {bad[0]}\n    text[:120]    = {docs[bad[0]][:120]!r}\n"
              f"    decoded[:120] = {auto.decode(list(expected[bad[0]]))[:120]!r}")
    return failures + len(bad)


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def run(args, train, work):
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"machine: {machine()}\ndate: {now}")
    llama3 = None
    if {"llama3", "export"} & set(args.only):
        llama3 = pathlib.Path(args.llama3_tokenizer) if args.llama3_tokenizer else fetch_llama3(args.cache)
        if not llama3.is_file():
            sys.exit(f"error: {llama3}: no such file")
    docs = tokenizer_corpus.build(FIXTURES, args.repeat, args.corpus)
    corpus = work / "corpus.jsonl"
    tokenizer_corpus.write_jsonl(corpus, docs)
    print(f"corpus: {corpus}, {len(docs)} documents, {sum(len(d.encode('utf-8')) for d in docs)} bytes")

    failures, references = 0, {}
    for name in args.only:
        path, (encode, bos, eos, wide, version) = reference_for(name, llama3)
        start = time.perf_counter()
        expected = [array.array("I", encode(d)) for d in docs]
        print(f"{name}: {path} against {version} (reference: {time.perf_counter() - start:.2f} s)")
        references[name] = (encode, expected, bos, eos)
        if args.dry_run and name == "export":
            print("  (skipped in a dry run)")
        elif args.dry_run:
            self_test(name, docs, expected, bos, eos, wide, work)
        elif name == "export":
            failures += check_export(args, train, llama3, docs, expected, bos, eos, work)
        elif name == "llama3" and not args.no_speed:
            print("  (checked in the speed runs below)")
        else:
            tokens, _, _ = run_prepare(train, path, corpus, work / f"out_{name}", args.jobs)
            failures += compare(f"ours --jobs {args.jobs}", docs, expected, tokens, bos, eos)

    if not args.no_speed and "llama3" in references:
        failures += speed(args, train, llama3, docs, references["llama3"], work)
    if failures:
        print(f"FAILED: {failures} mismatching documents")
        return 1
    print("OK" + (" (dry run: ./train was not run)" if args.dry_run else ""))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--train", default=str(REPO / "train"), help="the trainer binary (default: ./train)")
    parser.add_argument("--llama3-tokenizer", help="Llama 3's tokenizer.model (default: out of the llama-models wheel)")
    parser.add_argument("--cache", type=pathlib.Path, default=pathlib.Path.home() / ".cache/llm-trainer-tokenizers",
                        help="where the llama-models wheel is kept (default: %(default)s)")
    parser.add_argument("--corpus", nargs="+", default=[], metavar="FILE",
                        help="more documents: .jsonl with a \"text\" field, or plain text")
    parser.add_argument("--repeat", type=int, default=20, help="copies of the fixture cases (default: 20)")
    parser.add_argument("--jobs", type=int, default=2, help="prepare's --jobs for the checks (default: 2)")
    parser.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS), help="checks to run (default: all)")
    parser.add_argument("--speed-mb", type=float, default=32.0, help="corpus size for the timing (default: 32)")
    parser.add_argument("--no-speed", action="store_true", help="skip the timing")
    parser.add_argument("--work", type=pathlib.Path, help="keep the corpus and shards here (default: a temp folder)")
    parser.add_argument("--dry-run", action="store_true", help="no ./train; see above")
    args = parser.parse_args()
    if args.repeat < 0 or args.jobs < 1 or args.speed_mb <= 0:
        parser.error("--repeat must be >= 0, --jobs >= 1 and --speed-mb > 0")
    train = pathlib.Path(args.train)
    if not args.dry_run and not (train.is_file() and os.access(train, os.X_OK)):
        sys.exit(f"error: {train}: no trainer binary (build it, pass --train, or use --dry-run)")

    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="check_tokenizers_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return run(args, train, work)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
