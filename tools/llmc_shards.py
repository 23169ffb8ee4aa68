"""Reads and writes token shards in llm.c's format, as `./train prepare` writes them.

A shard is a header of 256 little-endian int32 (header[0] magic, header[1]
version, header[2] token count) followed by the tokens: magic 20240520 and
version 1 for uint16 tokens, magic 20240801 and version 7 for uint32 tokens.
"""
import array
import pathlib
import sys

HEADER_INTS = 256
FORMATS = {20240520: (1, "H"), 20240801: (7, "I")}  # magic: (version, array typecode)
assert array.array("i").itemsize == 4 and array.array("I").itemsize == 4 and array.array("H").itemsize == 2


def read_shard(path):
    """The tokens of one shard as array('I'); exits with an error on a malformed file."""
    with open(path, "rb") as f:
        data = f.read()
    header = array.array("i", data[:HEADER_INTS * 4])
    if len(header) < HEADER_INTS:
        sys.exit(f"error: {path}: shorter than the 1024-byte header")
    if sys.byteorder != "little":
        header.byteswap()
    magic, version, count = header[0], header[1], header[2]
    if magic not in FORMATS or FORMATS[magic][0] != version:
        sys.exit(f"error: {path}: unknown magic {magic} / version {version}")
    tokens = array.array(FORMATS[magic][1])
    body = data[HEADER_INTS * 4:]
    if len(body) != count * tokens.itemsize:
        sys.exit(f"error: {path}: header says {count} tokens, the file holds {len(body) // tokens.itemsize}")
    tokens.frombytes(body)
    if sys.byteorder != "little":
        tokens.byteswap()
    return tokens if tokens.typecode == "I" else array.array("I", tokens)


def write_shard(path, tokens, wide):
    """Writes tokens as one shard: uint32 if wide, else uint16."""
    magic = 20240801 if wide else 20240520
    version, code = FORMATS[magic]
    header = array.array("i", [0] * HEADER_INTS)
    header[0], header[1], header[2] = magic, version, len(tokens)
    body = array.array(code, tokens)
    if sys.byteorder != "little":
        header.byteswap()
        body.byteswap()
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(body.tobytes())


def documents(tokens, boundary, boundary_starts):
    """The documents of a token stream, in order, as lists: each starts at
    `boundary` (a BOS) when boundary_starts, else ends with it (an EOS)."""
    cut = [at + (0 if boundary_starts else 1) for at, t in enumerate(tokens) if t == boundary]
    if boundary_starts:
        return [list(tokens[a:b]) for a, b in zip(cut, cut[1:] + [len(tokens)])]
    return [list(tokens[a:b]) for a, b in zip([0] + cut[:-1], cut)]


def shard_documents(shard_dir, boundary, boundary_starts):
    """The documents of every train_*.bin shard in shard_dir, in shard order
    (as `prepare` wrote them, a document may cross into the next shard)."""
    shards = sorted(pathlib.Path(shard_dir).glob("train_*.bin"))
    tokens = [t for shard in shards for t in read_shard(str(shard))]
    return documents(tokens, boundary, boundary_starts)
