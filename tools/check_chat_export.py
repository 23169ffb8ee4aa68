#!/usr/bin/env python3
"""Loads a chat fine-tune's export in transformers and checks it chats as the run does.

    python3 tools/check_chat_export.py --export hf/chat --shards data/chat \\
        --conversations chats.jsonl --run checkpoints/chat --prompt "What is 2 + 2?"

1. AutoTokenizer.apply_chat_template renders every conversation of
   --conversations to the ids `./train prepare --chat` wrote for it into
   --shards (prepared with --val-fraction 0, so that every conversation is
   in the train_*.bin shards, in file order).
2. AutoModelForCausalLM's greedy generate of the reply to --prompt (stopping
   at generation_config.json's end-of-turn and end-of-text ids) gives the text
   `./train generate --checkpoint RUN --chat --temperature 0` prints.
Prints what it compared and exits non-zero on the first difference.

Needs torch and transformers (not part of `make test`; docs/finetune.md):
    python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers==4.51.3
"""
import argparse
import json
import pathlib
import subprocess
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from llmc_shards import shard_documents  # noqa: E402


def check_template(tokenizer, conversations, shards):
    bos = tokenizer.bos_token
    boundary = tokenizer.convert_tokens_to_ids(bos or tokenizer.eos_token)
    prepared = shard_documents(shards, boundary, bos is not None)
    if len(prepared) != len(conversations):
        sys.exit(f"FAIL: {len(prepared)} conversations in {shards}, {len(conversations)} given")
    for number, (messages, ids) in enumerate(zip(conversations, prepared), start=1):
        theirs = tokenizer.apply_chat_template(messages, tokenize=True)
        if theirs != ids:
            sys.exit(f"FAIL: conversation {number}: apply_chat_template gives {theirs}, "
                     f"prepare --chat wrote {ids}")
    print(f"apply_chat_template: the ids of prepare --chat for all {len(conversations)} "
          f"conversations")


def check_reply(tokenizer, export, args):
    model = AutoModelForCausalLM.from_pretrained(export, torch_dtype=torch.float32).eval()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}],
                                           add_generation_prompt=True, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(prompt, do_sample=False, max_new_tokens=args.max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id)
    reply_ids = out[0, prompt.shape[1]:].tolist()
    # ./train generate prints the prompt and the reply decoded together,
    # BOS left out, then a line of tokens per second.
    text = tokenizer.decode(prompt[0].tolist() + reply_ids)
    if tokenizer.bos_token and text.startswith(tokenizer.bos_token):
        text = text[len(tokenizer.bos_token):]
    ours = subprocess.run([args.train, "generate", "--checkpoint", args.run, "--chat", "--prompt",
                           args.prompt, "--temperature", "0", "--max-new-tokens",
                           str(args.max_new_tokens)], check=True, capture_output=True,
                          text=True).stdout
    ours = ours[:ours.rstrip("\n").rfind("\n")]
    if ours != text:
        sys.exit(f"FAIL: transformers replies {text!r}, ./train generate --chat {ours!r}")
    print(f"greedy reply: {len(reply_ids)} tokens, as ./train generate --chat: "
          f"{tokenizer.decode(reply_ids)!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", required=True, help="the directory ./train export wrote")
    parser.add_argument("--shards", required=True, help="the --out of ./train prepare --chat")
    parser.add_argument("--conversations", required=True, help="the JSONL prepare --chat read")
    parser.add_argument("--run", required=True, help="the run (or step) that was exported")
    parser.add_argument("--prompt", required=True, help="a user's turn for both to answer")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--train", default="./train")
    args = parser.parse_args()
    lines = pathlib.Path(args.conversations).read_text(encoding="utf-8").splitlines()
    conversations = [json.loads(line)["messages"] for line in lines if line.strip()]
    tokenizer = AutoTokenizer.from_pretrained(args.export)
    check_template(tokenizer, conversations, args.shards)
    check_reply(tokenizer, args.export, args)


if __name__ == "__main__":
    main()
