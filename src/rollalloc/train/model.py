"""Policy models: any local `AutoModelForCausalLM` checkpoint, or the built-in `tiny` one.

`tiny` is a Qwen2-class decoder (about 0.6M parameters) with a character-level tokenizer that is a
real `PreTrainedTokenizerFast`: it saves and loads with `save_pretrained` / `AutoTokenizer` like any
other, so a trained tiny policy is an ordinary Hugging Face checkpoint.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

import torch

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
CHARS = string.digits + string.ascii_letters + string.punctuation + " \n"
"""The tiny tokenizer's alphabet: printable ASCII plus newline; anything else maps to <unk>."""


@dataclass
class TinyModelConfig:
    """The built-in tiny Qwen2 (used when `model: tiny`)."""

    hidden_size: int = 128
    """Width of the residual stream."""
    num_layers: int = 3
    """Decoder blocks."""
    num_heads: int = 4
    """Attention heads (as many key/value heads: plain multi-head attention)."""
    intermediate_size: int = 384
    """Width of the SwiGLU MLP."""
    max_positions: int = 128
    """Longest prompt + completion in tokens."""


def make_char_tokenizer():
    """A character-level `PreTrainedTokenizerFast`: one token per character, left padding."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, EOS: 1, UNK: 2}
    for ch in CHARS:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        model_max_length=1024,
    )


def make_tiny_model(vocab_size: int, cfg: TinyModelConfig | None = None, seed: int = 0):
    """A freshly initialised tiny Qwen2 for `vocab_size` tokens (deterministic for `seed`)."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = cfg or TinyModelConfig()
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return model


def load_policy(path: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """Model and tokenizer from a local checkpoint directory (no hub access, no remote code)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model checkpoint {path} is not a directory")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=dtype, attn_implementation="sdpa"
    ).to(device)
    return model, tokenizer


def save_policy(model, tokenizer, path: str | Path) -> None:
    """Save as an ordinary Hugging Face checkpoint (safetensors)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
