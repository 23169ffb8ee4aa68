#!/usr/bin/env python3
"""Writes the tokenizer fixtures that the C++ tokenizer tests check (test/data/tokenizers/).

Three small tokenizers of our own, one per file format the trainer reads, and
the reference libraries' encodings of the same documents:
  cases.json                  the documents (base64 of raw bytes, some not UTF-8), from tools/tokenizer_cases.py
  tokenizer.json              byte-level BPE trained by HF `tokenizers`, laid out like Llama 3's
                              (Split(pattern) + ByteLevel pre-tokenizer, ignore_merges, 256 specials)
  qwen2_tokenizer.json        the same, laid out like Qwen2's and Qwen3's: an NFC normalizer, Qwen2's
                              pattern (one digit a piece), merges not ignored, no BOS, ChatML's specials
  bpe.tiktoken                the same BPE in tiktoken's format: base64(token bytes) SPACE rank
  sentencepiece.model         SentencePiece BPE with byte fallback
  expected_<format>.json      {"tokenizer", "reference", "ids": one list per document}
Each document is encoded as raw.decode("utf-8", errors="replace"), without
special tokens: tiktoken encode_ordinary, tokenizers encode(add_special_tokens=False)
with encode_special_tokens on (so "<|eot_id|>" in the text is text, as in
tiktoken), sentencepiece encode. tiktoken and tokenizers may differ on the same
BPE: tiktoken merges any pair whose concatenation is a token (by that token's
rank), tokenizers only the pairs in the merges list; the difference is reported.

The training text is the repository's README.md, docs/*.md, Makefile and
data/, trainer/ sources at a fixed commit (--train-rev), plus the cases, so the
output bytes depend only on the library versions. Not part of `make test`,
which reads the committed files:
    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tiktoken tokenizers sentencepiece
    /tmp/tokvenv/bin/python tools/make_tokenizer_fixtures.py            # writes test/data/tokenizers
    /tmp/tokvenv/bin/python tools/make_tokenizer_fixtures.py --check    # exit 1 if the files differ
"""
import argparse
import base64
import io
import json
import pathlib
import subprocess
import sys
import tempfile

import sentencepiece
import tiktoken
import tiktoken.load
import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import llama3_tokens  # noqa: E402
import tokenizer_cases  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
TRAIN_REV = "7197f311749f09161c854284eca946612f32bfe6"
BPE_VOCAB = 2000  # base vocabulary, the 256 byte symbols included
# Qwen2's pattern is Llama 3's with \p{N} (one digit a piece) for \p{N}{1,3};
# its first specials follow the base vocabulary (151643.. in Qwen2 and Qwen3).
QWEN2_PATTERN = llama3_tokens.PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SP_VOCAB = 1000
SP_SEED = 20240520


def byte_symbols():
    """GPT-2's bytes_to_unicode: byte -> the printable character ByteLevel writes for it."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in kept:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def git(*args):
    result = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True)
    if result.returncode != 0:
        sys.exit(f"error: git {' '.join(args)}: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def training_documents(rev, cases):
    """Our own text at commit rev (docs, README, Makefile, a slice of the C++ sources) plus the cases."""
    names = git("ls-tree", "-r", "--name-only", rev, "--", "README.md", "Makefile", "docs", "data",
                "trainer").decode().split()
    wanted = [n for n in names if n.endswith(".md") or n == "Makefile"
              or (n.split("/")[0] in ("data", "trainer") and n.endswith((".cpp", ".h")))]
    if not wanted:
        sys.exit(f"error: no training text found at {rev}")
    texts = [git("show", f"{rev}:{n}").decode("utf-8", errors="replace") for n in sorted(wanted)]
    return texts + [raw.decode("utf-8", errors="replace") for raw in cases]


def train_bpe(texts):
    """Byte-level BPE with Llama 3's pre-tokenizer, ignore_merges and 256 specials after the base vocab."""
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(llama3_tokens.PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.model.ignore_merges = True  # training builds a fresh model
    base = tok.get_vocab_size()
    specials = llama3_tokens.SPECIALS
    tok.add_special_tokens([AddedToken(s, single_word=False, lstrip=False, rstrip=False, normalized=False,
                                       special=True) for s in specials])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{specials[0]} $A",
                                      pair=f"{specials[0]} $A {specials[0]}:1 $B:1",
                                      special_tokens=[(specials[0], base)])])
    return tok, base


def train_qwen2_bpe(texts):
    """Byte-level BPE laid out as Qwen2/Qwen3 ship theirs: NFC, Qwen2's split, no BOS template."""
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken(s, single_word=False, lstrip=False, rstrip=False, normalized=False,
                                       special=True) for s in QWEN2_SPECIALS])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def tiktoken_text(tok, base):
    """The BPE's base vocabulary as tiktoken lines, rank = id."""
    to_byte = {c: b for b, c in byte_symbols().items()}
    by_id = {i: t for t, i in tok.get_vocab(with_added_tokens=False).items()}
    if sorted(by_id) != list(range(base)):
        sys.exit("error: the trained BPE's ids are not 0..N-1")
    lines = []
    for i in range(base):
        raw = bytes(to_byte[c] for c in by_id[i])
        lines.append(f"{base64.b64encode(raw).decode()} {i}\n")
    return "".join(lines)


def load_tiktoken(path, base):
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    if len(ranks) != base:
        sys.exit(f"error: {path}: tiktoken read {len(ranks)} ranks, expected {base}")
    specials = {s: base + i for i, s in enumerate(llama3_tokens.SPECIALS)}
    enc = tiktoken.Encoding(name=path.name, pat_str=llama3_tokens.PATTERN, mergeable_ranks=ranks,
                            special_tokens=specials)
    if enc.encode("<|begin_of_text|>", allowed_special="all") != [base]:
        sys.exit("error: tiktoken does not map <|begin_of_text|> to the first special id")
    return enc


def train_sentencepiece(texts):
    """SentencePiece BPE, byte fallback, identity normalization; one sentence per non-empty line."""
    lines = [line for text in texts for line in text.split("\n") if line.strip()]
    model = io.BytesIO()
    sentencepiece.set_random_generator_seed(SP_SEED)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=SP_VOCAB,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=1, input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    return model.getvalue()


def expected_json(name, reference, ids):
    rows = ",\n".join(json.dumps(r, separators=(",", ":")) for r in ids)
    return (f'{{"tokenizer": {json.dumps(name)}, "reference": {json.dumps(reference)}, "ids": [\n'
            f"{rows}\n]}}\n")


def cases_json(cases):
    note = ("Tokenizer test documents: base64 of raw bytes (some are not valid UTF-8). Encoders see "
            "raw.decode('utf-8', errors='replace'). Written by tools/make_tokenizer_fixtures.py.")
    rows = ",\n".join(json.dumps(base64.b64encode(raw).decode()) for raw in cases)
    return f'{{"note": {json.dumps(note)}, "documents": [\n{rows}\n]}}\n'


def build(rev):
    """Every fixture file as {name: bytes}."""
    cases = tokenizer_cases.documents()
    texts = training_documents(rev, cases)
    docs = [raw.decode("utf-8", errors="replace") for raw in cases]
    files = {"cases.json": cases_json(cases).encode()}

    tok, base = train_bpe(texts)
    files["tokenizer.json"] = (tok.to_str(pretty=False) + "\n").encode()
    files["bpe.tiktoken"] = tiktoken_text(tok, base).encode()
    files["sentencepiece.model"] = train_sentencepiece(texts)

    files["qwen2_tokenizer.json"] = (train_qwen2_bpe(texts).to_str(pretty=False) + "\n").encode()

    hf = Tokenizer.from_str(files["tokenizer.json"].decode())
    hf.encode_special_tokens = True
    qwen2 = Tokenizer.from_str(files["qwen2_tokenizer.json"].decode())
    qwen2.encode_special_tokens = True
    sp = sentencepiece.SentencePieceProcessor(model_proto=files["sentencepiece.model"])
    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(scratch) / "bpe.tiktoken"
        path.write_bytes(files["bpe.tiktoken"])
        enc = load_tiktoken(path, base)

    tt_ids = [enc.encode_ordinary(d) for d in docs]
    hf_ids = [hf.encode(d, add_special_tokens=False).ids for d in docs]
    sp_ids = [sp.encode(d) for d in docs]
    files["expected_tiktoken.json"] = expected_json(
        "bpe.tiktoken", f"tiktoken {tiktoken.__version__}", tt_ids).encode()
    files["expected_tokenizer_json.json"] = expected_json(
        "tokenizer.json", f"tokenizers {tokenizers.__version__}", hf_ids).encode()
    files["expected_qwen2_tokenizer_json.json"] = expected_json(
        "qwen2_tokenizer.json", f"tokenizers {tokenizers.__version__}",
        [qwen2.encode(d, add_special_tokens=False).ids for d in docs]).encode()
    files["expected_sentencepiece.json"] = expected_json(
        "sentencepiece.model", f"sentencepiece {sentencepiece.__version__}", sp_ids).encode()

    differ = [i for i, (a, b) in enumerate(zip(tt_ids, hf_ids)) if a != b]
    print(f"{len(cases)} documents, {sum(map(len, cases))} bytes; BPE base vocab {base} + 256 specials, "
          f"{sp.get_piece_size()} sentencepiece pieces; training text {sum(map(len, texts))} chars")
    print(f"tiktoken vs tokenizers on the same BPE: {len(cases) - len(differ)} documents agree, "
          f"{len(differ)} differ{': ' + ' '.join(map(str, differ)) if differ else ''}")
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "test/data/tokenizers"), help="output folder")
    parser.add_argument("--train-rev", default=TRAIN_REV, help="commit whose files are the training text")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = parser.parse_args()
    out = pathlib.Path(args.out)

    files = build(args.train_rev)
    if args.check:
        stale = [n for n, data in files.items() if not (out / n).is_file() or (out / n).read_bytes() != data]
        if stale:
            sys.exit(f"error: {out}: these files differ from a fresh build: {' '.join(stale)}")
        print(f"{out}: all {len(files)} files are up to date")
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
        print(f"wrote {out / name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
