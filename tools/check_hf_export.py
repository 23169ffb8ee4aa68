#!/usr/bin/env python3
"""Load a directory written by `./train export` with transformers and run it.

Token ids: one forward pass; prints the top logits at each position and the
loss, the mean next-token cross-entropy (token i predicts token i+1), as our
trainer computes it for inputs ids[:-1] and targets ids[1:].

--prompt TEXT: greedy generation instead, with the export's own tokenizer
(BOS first, as `./train generate` encodes a prompt); prints the new token ids
and their text, to compare with
    ./train generate --checkpoint RUN --prompt TEXT --temperature 0 --max-new-tokens N
Every architecture the export writes loads (LlamaForCausalLM,
Qwen2ForCausalLM for a model with q, k and v biases, or Qwen3ForCausalLM for
a model with QK-norm).

Usage (needs torch and transformers >= 4.51, which the trainer itself does
not; sentencepiece too for a tokenizer.model):
    python tools/check_hf_export.py EXPORT_DIR 1 17 42 5 9
    python tools/check_hf_export.py EXPORT_DIR 1 17 42 5 9 --top 10
    python tools/check_hf_export.py EXPORT_DIR --prompt "Once upon" --max-new-tokens 20
"""
import argparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def forward(model, token_ids, top):
    ids = torch.tensor([token_ids])
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)  # transformers shifts the labels itself
    logits = out.logits[0]  # (T, vocab)
    for t in range(logits.shape[0]):
        values, indices = logits[t].topk(min(top, logits.shape[1]))
        pairs = " ".join(f"{i}:{v:.6f}" for i, v in zip(indices.tolist(), values.tolist()))
        print(f"pos {t} token {token_ids[t]}: {pairs}")
    print(f"logits[0, :5] = {logits[0, :5].tolist()}")
    print(f"loss = {out.loss.item():.6f}")


def greedy(model, export_dir, prompt, max_new_tokens):
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    encoded = tokenizer(prompt, return_tensors="pt")  # BOS added as in training
    ids = encoded.input_ids
    with torch.no_grad():
        out = model.generate(ids, attention_mask=encoded.attention_mask, do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=tokenizer.eos_token_id)
    new = out[0, ids.shape[1]:].tolist()
    print(f"architecture: {type(model).__name__}")
    print(f"prompt ids: {ids[0].tolist()}")
    print(f"greedy ids: {new}")
    print(f"greedy text: {tokenizer.decode(new, skip_special_tokens=True)!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export_dir", help="directory holding config.json and model.safetensors")
    parser.add_argument("token_ids", type=int, nargs="*", help="at least two token ids")
    parser.add_argument("--top", type=int, default=5, help="logits to print per position")
    parser.add_argument("--prompt", help="generate greedily from this text instead")
    parser.add_argument("--max-new-tokens", type=int, default=20)
    args = parser.parse_args()
    if args.prompt is None and len(args.token_ids) < 2:
        parser.error("give at least two token ids (the loss needs a target), or --prompt")

    # float32 compute whatever the stored dtype, so bf16 exports compare in fp32.
    model = AutoModelForCausalLM.from_pretrained(args.export_dir, torch_dtype=torch.float32)
    model.eval()
    if args.prompt is not None:
        greedy(model, args.export_dir, args.prompt, args.max_new_tokens)
    else:
        forward(model, args.token_ids, args.top)


if __name__ == "__main__":
    main()
