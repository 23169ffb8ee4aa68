"""Llama 3's pre-tokenizer pattern and special tokens, as llama_models/llama3/tokenizer.py defines them.

The pattern is cl100k_base's. The 256 specials take the ids right after the
base vocabulary (128000.. for Llama 3); the names are those of Llama 3.1 and
later (Llama 3.0 had reserved names where 3.1 has <|finetune_right_pad_id|>,
<|step_id|>, <|eom_id|>, <|python_tag|>, <|image|>).
"""

PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

NAMED = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
         "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
         "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
         "<|python_tag|>", "<|image|>"]

SPECIALS = NAMED + [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(NAMED))]
