#!/usr/bin/env python3
"""Load a directory written by hf_export with transformers and run one forward pass.

Compare its numbers with our model on the same tokens: the loss is the mean
next-token cross-entropy (token i predicts token i+1), as our trainer computes
it for inputs ids[:-1] and targets ids[1:].

Usage (needs torch and transformers, which the trainer itself does not):
    python tools/check_hf_export.py EXPORT_DIR 1 17 42 5 9
    python tools/check_hf_export.py EXPORT_DIR 1 17 42 5 9 --top 10
"""
import argparse

import torch
from transformers import LlamaForCausalLM


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export_dir", help="directory holding config.json and model.safetensors")
    parser.add_argument("token_ids", type=int, nargs="+", help="at least two token ids")
    parser.add_argument("--top", type=int, default=5, help="logits to print per position")
    args = parser.parse_args()
    if len(args.token_ids) < 2:
        parser.error("give at least two token ids (the loss needs a target)")

    # float32 compute whatever the stored dtype, so bf16 exports compare in fp32.
    model = LlamaForCausalLM.from_pretrained(args.export_dir, torch_dtype=torch.float32)
    model.eval()
    ids = torch.tensor([args.token_ids])
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)  # transformers shifts the labels itself
    logits = out.logits[0]  # (T, vocab)
    for t in range(logits.shape[0]):
        values, indices = logits[t].topk(min(args.top, logits.shape[1]))
        pairs = " ".join(f"{i}:{v:.6f}" for i, v in zip(indices.tolist(), values.tolist()))
        print(f"pos {t} token {args.token_ids[t]}: {pairs}")
    print(f"logits[0, :5] = {logits[0, :5].tolist()}")
    print(f"loss = {out.loss.item():.6f}")


if __name__ == "__main__":
    main()
