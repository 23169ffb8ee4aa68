#!/usr/bin/env python3
"""Writes the Hugging Face references that test/test_hf_reference.cpp checks.

A tiny model built by transformers itself (grouped-query attention,
non-trivial norm gains), saved with save_pretrained (model.safetensors +
config.json), its fp32 logits on fixed tokens and its greedy continuation of
a prompt. Our importer loads the same files, our forward must reproduce the
logits and our generation the tokens, so the test pins transformers'
semantics (RoPE layout, q/k/v and gate/up split, RMSNorm eps placement, GQA
head grouping, Qwen3's per-head q/k norms) rather than our own round trip.
  --arch llama:   LlamaForCausalLM, untied head, RoPE theta 1e4.
  --arch llama32: LlamaForCausalLM as Llama 3.2 is: tied embeddings, RoPE
                  theta 5e5 with Llama 3.1's scaling (rope_type llama3), its
                  original context such that every band of the scaling
                  (kept, smoothed, divided by the factor) has frequencies.
  --arch qwen2:   Qwen2ForCausalLM as Qwen2.5 is: biases on q, k and v, tied
                  embeddings, RoPE theta 1e6.
  --arch qwen3:   Qwen3ForCausalLM (QK-norm), tied embeddings, RoPE theta 1e6,
                  head_dim twice hidden_size / heads.

Needs torch and transformers >= 4.51 (Qwen3), before 5 (whose config.json
spells RoPE otherwise), not part of `make test`, which only reads the
committed output:
    python3 -m venv /tmp/hfref && /tmp/hfref/bin/pip install torch transformers==4.51.3 safetensors
    /tmp/hfref/bin/python tools/make_hf_reference.py --arch qwen3 --out test/data/hf_tiny_qwen3
"""
import argparse
import json
import pathlib

import torch
import transformers
from transformers import LlamaConfig

SEED = 20240520
BATCH, SEQ = 2, 12
PROMPT, NEW_TOKENS = [5, 17, 42, 9], 16


# What both references share: the sizes (grouped-query attention) and the ids.
SHAPE = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             bos_token_id=1, eos_token_id=2, torch_dtype="float32")


def build_config(arch: str):
    if arch == "qwen3":
        from transformers import Qwen3Config  # transformers >= 4.51
        # Heads twice as wide as hidden_size / heads (64 = 4 x 16 > 32), as
        # Qwen3-0.6B's (16 heads of 128 over a hidden size of 1024).
        return Qwen3Config(**SHAPE, head_dim=16, rms_norm_eps=1e-6, rope_theta=1000000.0,
                           tie_word_embeddings=True)
    if arch == "qwen2":
        # Qwen2Config has no attention_bias key: q, k and v always carry one.
        return transformers.Qwen2Config(**SHAPE, rms_norm_eps=1e-6, rope_theta=1000000.0,
                                        tie_word_embeddings=True, use_sliding_window=False)
    if arch == "llama32":
        # Llama 3.2's scaling (factor 32, frequency factors 1 and 4) over an
        # original context of 256: with head_dim 8 the wavelengths (6.3, 167,
        # 4.4e3, 1.2e5 positions) fall below the smoothed band (64 .. 256),
        # in it and beyond it.
        scaling = dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                       original_max_position_embeddings=256)
        return LlamaConfig(**dict(SHAPE, max_position_embeddings=8192), rms_norm_eps=1e-5,
                           rope_theta=500000.0, rope_scaling=scaling, tie_word_embeddings=True)
    return LlamaConfig(**SHAPE, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)


def build_model(arch: str):
    config = build_config(arch)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))  # gains far from 1: the norm weight matters
            else:
                p.normal_(0.0, 0.25)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["llama", "llama32", "qwen2", "qwen3"], default="llama")
    parser.add_argument("--out", default="test/data/hf_tiny_llama")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    model = build_model(args.arch)
    generator = torch.Generator().manual_seed(SEED + 1)
    tokens = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=generator)
    with torch.no_grad():
        logits = model(input_ids=tokens).logits.float()
        # Greedy, never stopping at EOS: every step is the argmax of the logits.
        greedy = model.generate(torch.tensor([PROMPT]), do_sample=False, max_new_tokens=NEW_TOKENS,
                                min_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)

    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    reference = {
        "made_by": f"tools/make_hf_reference.py with transformers {transformers.__version__}, "
                   f"torch {torch.__version__}",
        "batch": BATCH,
        "seq_len": SEQ,
        "tokens": tokens.flatten().tolist(),
        "logits": [float(f"{v:.9g}") for v in logits.flatten().tolist()],
        "prompt": PROMPT,
        "greedy": greedy[0, len(PROMPT):].tolist(),
    }
    (out / "reference_logits.json").write_text(json.dumps(reference) + "\n")
    print(f"wrote {out}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"logits {tuple(logits.shape)}")


if __name__ == "__main__":
    main()
