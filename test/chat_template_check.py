"""Checks an export's tokenizer files against the shards `prepare --chat` wrote.

usage: chat_template_check.py EXPORT_DIR SHARD_DIR CONVERSATIONS_JSONL PROMPT GENERATED

The export's tokenizer_config.json, generation_config.json and config.json
must be JSON with the fields transformers reads; its chat template, rendered
by Jinja as transformers renders it (a sandboxed environment, trim_blocks and
lstrip_blocks, the special tokens as variables), must give for each
conversation the text of the ids prepare --chat wrote for it (decoded through
the exported tokenizer.json: its byte-level alphabet and added tokens; NFC
where the tokenizer normalizes). The file GENERATED, what `generate --chat
--prompt PROMPT` printed, must begin with the template's generation prompt
for a user turn holding PROMPT (BOS left out, as generate prints it).
Needs only Debian's python3 and python3-jinja2.
"""
import json
import pathlib
import sys
import unicodedata

from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
from llmc_shards import shard_documents  # noqa: E402


def fail(message):
    sys.exit(f"FAIL: {message}")


def byte_of_char():
    """GPT-2's byte-level alphabet, character -> byte."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def load_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


class ExportedTokenizer:
    def __init__(self, export):
        tokenizer = load_json(export / "tokenizer.json")
        alphabet = byte_of_char()
        self.text_of = {}
        for spelled, token_id in tokenizer["model"]["vocab"].items():
            self.text_of[token_id] = bytes(alphabet[c] for c in spelled)
        self.special_id = {}
        for added in tokenizer["added_tokens"]:
            self.text_of[added["id"]] = added["content"].encode("utf-8")
            self.special_id[added["content"]] = added["id"]
        self.nfc = (tokenizer.get("normalizer") or {}).get("type") == "NFC"

    def decode(self, ids):
        return b"".join(self.text_of[i] for i in ids).decode("utf-8")


def check_configs(export, tokenizer):
    config = load_json(export / "tokenizer_config.json")
    for key in ("tokenizer_class", "eos_token", "pad_token", "bos_token", "added_tokens_decoder",
                "chat_template"):
        if key not in config:
            fail(f"tokenizer_config.json has no {key}: {sorted(config)}")
    if config["tokenizer_class"] != "PreTrainedTokenizerFast":
        fail(f"tokenizer_class {config['tokenizer_class']}")
    decoder = {entry["content"]: int(i) for i, entry in config["added_tokens_decoder"].items()}
    if decoder != tokenizer.special_id:
        fail(f"added_tokens_decoder {decoder} is not tokenizer.json's {tokenizer.special_id}")
    end_of_turn = "<|eot_id|>" if "<|eot_id|>" in decoder else "<|im_end|>"
    eos = decoder[config["eos_token"]]
    generation = load_json(export / "generation_config.json")
    if generation["eos_token_id"] != [decoder[end_of_turn], eos]:
        fail(f"generation_config.json eos_token_id {generation['eos_token_id']}, "
             f"not [{end_of_turn}, {config['eos_token']}]")
    bos = config["bos_token"]
    if generation["bos_token_id"] != (decoder[bos] if bos else None):
        fail(f"generation_config.json bos_token_id {generation['bos_token_id']}, bos_token {bos}")
    model = load_json(export / "config.json")
    if model["eos_token_id"] != eos:
        fail(f"config.json eos_token_id {model['eos_token_id']}, not {eos}")
    return config


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    export, shard_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    lines = pathlib.Path(sys.argv[3]).read_text(encoding="utf-8").splitlines()
    conversations = [json.loads(line)["messages"] for line in lines]
    tokenizer = ExportedTokenizer(export)
    config = check_configs(export, tokenizer)
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = environment.from_string(config["chat_template"])
    variables = {key: config.get(key) for key in ("bos_token", "eos_token", "pad_token", "unk_token")}

    def render(messages, add_generation_prompt):
        text = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               **variables)
        return unicodedata.normalize("NFC", text) if tokenizer.nfc else text

    bos = config["bos_token"]
    prepared = shard_documents(shard_dir, tokenizer.special_id[bos or config["eos_token"]], bool(bos))
    if len(prepared) != len(conversations):
        fail(f"{len(prepared)} conversations in the shards, {len(conversations)} in the file")
    for number, (messages, ids) in enumerate(zip(conversations, prepared), start=1):
        if render(messages, False) != tokenizer.decode(ids):
            fail(f"conversation {number}: the template gives {render(messages, False)!r}, "
                 f"prepare --chat wrote {tokenizer.decode(ids)!r}")
    prompt = render([{"role": "user", "content": sys.argv[4]}], True)
    if bos and prompt.startswith(bos):
        prompt = prompt[len(bos):]
    generated = pathlib.Path(sys.argv[5]).read_text(encoding="utf-8")
    if not generated.startswith(prompt):
        fail(f"generate --chat printed {generated!r}, the template's prompt is {prompt!r}")


if __name__ == "__main__":
    main()
