"""Policy models: any local `AutoModelForCausalLM` checkpoint, or the built-in `tiny` one.

`tiny` is a Qwen2-class decoder (about 0.6M parameters) with a character-level tokenizer that is a
real `PreTrainedTokenizerFast`: it saves and loads with `save_pretrained` / `AutoTokenizer` like any
other, so a trained tiny policy is an ordinary Hugging Face checkpoint.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np
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


# --------------------------------------------------------------------------------------------
# Prefix-shared forward of a Qwen2 policy (the trainer's fast path).
#
# A GRPO batch holds G prompts with several completions each, and the prompt is the same for every
# completion of a group. `Qwen2Runner` evaluates the model's own modules/parameters (so gradients,
# the optimiser and `load_state_dict` are untouched) on a layout without that redundancy:
#
#   prompts       (G, Pmax)  right-padded, each computed once (causal attention)
#   completions   flat, no padding: rollout r's inputs c_0..c_{C_r-2}, at positions P_g + j,
#                 attending to its prompt's keys (gathered per rollout) and causally to its own
#
# Every token's hidden state is the same function of its own prefix as in the model's forward on
# the row prompt + completion (the same ops in the same order per token: RMSNorm in float32, RoPE
# from `inv_freq`, scaled-dot-product attention, SwiGLU, tied/untied lm_head); only float summation
# order differs (tests/train/test_fastpath.py: log-probs and gradients to 1e-6, sampled tokens equal
# to HF `generate` under the same seed). Supported: `Qwen2ForCausalLM` with default RoPE, SiLU, no
# sliding window, no attention dropout; anything else takes the generic Hugging Face path.
# --------------------------------------------------------------------------------------------


def fast_path_supported(model) -> bool:
    """Whether `Qwen2Runner` computes exactly `model`'s forward (else the generic HF path)."""
    cfg = getattr(model, "config", None)
    if type(model).__name__ != "Qwen2ForCausalLM" or cfg is None:
        return False
    rope = getattr(cfg, "rope_parameters", None) or {}
    return (
        getattr(cfg, "hidden_act", None) == "silu"
        and rope.get("rope_type", "default") == "default"
        and not getattr(cfg, "use_sliding_window", False)
        and float(getattr(cfg, "attention_dropout", 0.0) or 0.0) == 0.0
        and getattr(model.lm_head, "bias", None) is None
        and all(
            getattr(layer.self_attn, "sliding_window", None) is None for layer in model.model.layers
        )
        and float(getattr(model.model.rotary_emb, "attention_scaling", 1.0)) == 1.0
    )


def generation_config_is_plain(model) -> bool:
    """True when `model.generation_config` adds no logits processor to a `generate` call with
    temperature/top_k=0/top_p=1 (no repetition penalty, bad words, min length, ...): then sampling
    from softmax(logits / T) is exactly what `generate` does."""
    gc = getattr(model, "generation_config", None)
    if gc is None:
        return True
    neutral = {
        "repetition_penalty": (None, 1.0),
        "encoder_repetition_penalty": (None, 1.0),
        "no_repeat_ngram_size": (None, 0),
        "encoder_no_repeat_ngram_size": (None, 0),
        "bad_words_ids": (None,),
        "min_length": (None, 0),
        "min_new_tokens": (None, 0),
        "typical_p": (None, 1.0),
        "epsilon_cutoff": (None, 0.0),
        "eta_cutoff": (None, 0.0),
        "min_p": (None, 0.0),
        "suppress_tokens": (None,),
        "begin_suppress_tokens": (None,),
        "forced_bos_token_id": (None,),
        "forced_eos_token_id": (None,),
        "sequence_bias": (None,),
        "exponential_decay_length_penalty": (None,),
        "renormalize_logits": (None, False),
        "guidance_scale": (None, 1.0),
        "watermarking_config": (None,),
        "top_h": (None,),
        "num_beams": (None, 1),
        "num_beam_groups": (None, 1),
        "penalty_alpha": (None, 0.0),
        "dola_layers": (None,),
        "stop_strings": (None,),
        "max_time": (None,),
    }
    return all(getattr(gc, k, None) in ok for k, ok in neutral.items())


class Qwen2Runner:
    """The prefix-shared forward (learner) and a KV-cache sampling loop (generator) of a Qwen2
    policy, on the model's own modules. See the block comment above."""

    def __init__(self, model) -> None:
        self.model = model
        cfg = model.config
        self.H = cfg.num_attention_heads
        self.Hkv = cfg.num_key_value_heads or self.H
        self.d = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.H
        self.scale = self.d**-0.5

    # -- pieces, mirroring transformers' modeling_qwen2 ------------------------------------
    @staticmethod
    def _rms(x: torch.Tensor, norm) -> torch.Tensor:
        dt = x.dtype
        xf = x.to(torch.float32)
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
        return norm.weight * xf.to(dt)

    def _cos_sin(self, pos: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) positions -> cos, sin (N, 1, d)."""
        inv = self.model.model.rotary_emb.inv_freq.to(device=pos.device, dtype=torch.float32)
        freqs = pos[:, None].float() * inv  # (N, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (N, d)
        return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin

    def _kv_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, Hkv, T, d) -> (B, H, T, d) (grouped-query attention)."""
        n = self.H // self.Hkv
        return t if n == 1 else t.repeat_interleave(n, dim=1)

    def _qkv(self, layer, x, cos, sin):
        """x (N, D) residual stream -> q (N, H, d), k and v (N, Hkv, d), RoPE applied."""
        a = layer.self_attn
        h = self._rms(x, layer.input_layernorm)
        q = a.q_proj(h).view(-1, self.H, self.d)
        k = a.k_proj(h).view(-1, self.Hkv, self.d)
        v = a.v_proj(h).view(-1, self.Hkv, self.d)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin), v

    def _finish(self, layer, x, attn):
        """Residual + o_proj of the attention output (N, H*d), then the MLP block."""
        x = x + layer.self_attn.o_proj(attn)
        m = layer.mlp
        h = self._rms(x, layer.post_attention_layernorm)
        return x + m.down_proj(torch.nn.functional.silu(m.gate_proj(h)) * m.up_proj(h))

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.lm_head(self._rms(x, self.model.model.norm))

    def _prompts(self, prompts: list) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded (G, Pmax) ids and (G,) lengths."""
        dev = self.model.lm_head.weight.device
        lens = torch.tensor([len(p) for p in prompts], dtype=torch.long)
        Pmax = int(lens.max())
        ids = torch.zeros((len(prompts), Pmax), dtype=torch.long)
        for g, p in enumerate(prompts):
            ids[g, : len(p)] = torch.as_tensor(p, dtype=torch.long)
        return ids.to(dev), lens.to(dev)

    # -- learner: log-probs of completions -------------------------------------------------
    def completion_logprobs(
        self,
        prompts: list,
        group: np.ndarray,
        completions: list,
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs under softmax(logits / T) of every completion token, (R, Cmax), and the
        (R, Cmax) mask of real tokens. prompts: G unique prompt token arrays; group: (R,) prompt
        index of each rollout; completions: R token arrays (each at least one token)."""
        dev = self.model.lm_head.weight.device
        R, G = len(completions), len(prompts)
        pids, plens = self._prompts(prompts)  # (G, Pmax), (G,)
        Pmax = pids.shape[1]
        C = np.array([len(c) for c in completions], dtype=np.int64)  # (R,)
        Cmax = max(1, int(C.max()) if R else 1)
        group = np.asarray(group, dtype=np.int64)
        plens_np = plens.cpu().numpy()
        # completion inputs c_0..c_{C-2}, bucketed by that length k (no padding within a bucket)
        k_r = np.maximum(C - 1, 0)
        buckets = []  # (k, rows)
        for k in np.unique(k_r[k_r > 0]).tolist():
            buckets.append((k, np.flatnonzero(k_r == k)))
        ids_c, pos_c, tgt_c, slot_c = [], [], [], []
        for k, rows in buckets:
            toks = np.stack([completions[r][: k + 1] for r in rows.tolist()])  # (n, k+1)
            ids_c.append(toks[:, :k].reshape(-1))
            tgt_c.append(toks[:, 1:].reshape(-1))
            pos_c.append((plens_np[group[rows]][:, None] + np.arange(k)[None]).reshape(-1))
            slot_c.append((rows[:, None] * Cmax + 1 + np.arange(k)[None]).reshape(-1))
        Nc = int(sum(len(a) for a in ids_c))
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)  # noqa: E731
        # prompt tokens without their padding: the per-token layers run on real tokens only, the
        # prompts' attention on the padded (G, Pmax) grid (pad_idx: flat token -> grid slot)
        GP = G * Pmax
        pad_idx = torch.from_numpy(
            np.concatenate([g * Pmax + np.arange(n) for g, n in enumerate(plens_np.tolist())])
        ).to(dev)  # (Np,)
        Np = int(pad_idx.shape[0])
        padded = Np != GP
        ids_all = torch.cat([pids.reshape(-1)[pad_idx], torch.from_numpy(cat(ids_c)).to(dev)])
        pos_all = torch.cat(
            [
                torch.arange(Pmax, device=dev).repeat(G)[pad_idx],
                torch.from_numpy(cat(pos_c)).to(dev),
            ]
        )
        masks = [
            self._bucket_mask(plens[torch.from_numpy(group[rows]).to(dev)], Pmax, k)
            for k, rows in buckets
        ]
        gidx = [torch.from_numpy(group[rows]).to(dev) for _, rows in buckets]
        x = self.model.model.embed_tokens(ids_all)  # (Np + Nc, D)
        cos, sin = self._cos_sin(pos_all, x.dtype)

        def grid(t: torch.Tensor) -> torch.Tensor:  # (Np, h, d) -> (G, h, Pmax, d)
            if padded:  # zeros at the pads: no valid query sees them (causal, right padding)
                t = t.new_zeros((GP,) + t.shape[1:]).index_copy(0, pad_idx, t)
            return t.view(G, Pmax, t.shape[1], self.d).transpose(1, 2)

        for layer in self.model.model.layers:
            q, k, v = self._qkv(layer, x, cos, sin)
            kp, vp, qp = grid(k[:Np]), grid(v[:Np]), grid(q[:Np])  # (G, h, Pmax, d)
            op = torch.nn.functional.scaled_dot_product_attention(
                qp, self._kv_heads(kp), self._kv_heads(vp), is_causal=True, scale=self.scale
            )  # (G, H, Pmax, d)
            op = op.transpose(1, 2).reshape(GP, self.H * self.d)
            outs = [op[pad_idx] if padded else op]
            off = Np
            for (kk, rows), m, gi in zip(buckets, masks, gidx):
                n = len(rows)
                sl = slice(off, off + n * kk)
                qc = q[sl].view(n, kk, self.H, self.d).transpose(1, 2)
                kc = torch.cat([kp[gi], k[sl].view(n, kk, self.Hkv, self.d).transpose(1, 2)], 2)
                vc = torch.cat([vp[gi], v[sl].view(n, kk, self.Hkv, self.d).transpose(1, 2)], 2)
                oc = torch.nn.functional.scaled_dot_product_attention(
                    qc, self._kv_heads(kc), self._kv_heads(vc), attn_mask=m, scale=self.scale
                )  # (n, H, k, d)
                outs.append(oc.transpose(1, 2).reshape(n * kk, self.H * self.d))
                off += n * kk
            x = self._finish(layer, x, torch.cat(outs))
        # logits at each prompt's last position (predicts c_0) and at every completion input
        last = torch.cumsum(plens, 0) - 1  # (G,) in the flat prompt tokens
        sel = torch.cat([last, torch.arange(Np, Np + Nc, device=dev)])
        logp_all = torch.log_softmax(self._logits(x[sel]).float() / temperature, dim=-1)
        has = np.flatnonzero(C >= 1)  # rollouts with a first token
        first_t = np.array([completions[r][0] for r in has.tolist()], dtype=np.int64)
        rows_i = torch.from_numpy(np.concatenate([group[has], G + np.arange(Nc)])).to(dev)
        tgt_i = torch.from_numpy(np.concatenate([first_t, cat(tgt_c)])).to(dev)
        vals = logp_all[rows_i, tgt_i]  # (len(has) + Nc,)
        slots = torch.from_numpy(np.concatenate([has * Cmax, cat(slot_c)])).to(dev)
        out = torch.zeros(R * Cmax, dtype=vals.dtype, device=dev).index_put((slots,), vals)
        mask = torch.from_numpy((np.arange(Cmax)[None] < C[:, None]).astype(np.float32)).to(dev)
        return out.view(R, Cmax), mask

    @staticmethod
    def _bucket_mask(plens: torch.Tensor, Pmax: int, k: int) -> torch.Tensor:
        """(n, 1, k, Pmax + k) bool: a completion query sees its prompt (j < P_g) and causally its
        own earlier completion inputs."""
        dev = plens.device
        pre = (torch.arange(Pmax, device=dev)[None] < plens[:, None])[:, None, None, :]
        own = torch.ones((k, k), dtype=torch.bool, device=dev).tril()[None, None]
        n = plens.shape[0]
        return torch.cat([pre.expand(n, 1, k, Pmax), own.expand(n, 1, k, k)], dim=-1)

    # -- generator: sampling with a KV cache -----------------------------------------------
    @torch.inference_mode()
    def sample(
        self,
        prompts: list,
        *,
        max_new_tokens: int,
        temperature: float,
        greedy: bool,
        pad_id: int,
        eos_id: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, S) sampled ids (pad after EOS; S <= max_new_tokens, the loop stops once every row
        has its EOS) and (N, S) log-probs of softmax(logits / T) (zeros for greedy).

        The same draws as `generate(do_sample=True, top_k=0, top_p=1.0, temperature=T)`: one
        `torch.multinomial(probs, 1)` of the (N, V) float32 probabilities per step from the global
        RNG (for one sample torch draws an (N, V) exponential tensor whatever the probabilities, so
        rows that have finished cost no compute and still consume their share, as in `generate`),
        pad after EOS, stop when all rows have ended. Greedy: argmax, as `generate`."""
        m = self.model
        dev = m.lm_head.weight.device
        keys: dict[tuple, int] = {}
        group = np.empty(len(prompts), dtype=np.int64)
        uniq: list = []
        for i, p in enumerate(prompts):
            key = tuple(p)
            if key not in keys:
                keys[key] = len(uniq)
                uniq.append(p)
            group[i] = keys[key]
        N, S, G = len(prompts), max_new_tokens, len(uniq)
        pids, plens = self._prompts(uniq)  # (G, Pmax)
        Pmax = pids.shape[1]
        gi = torch.from_numpy(group).to(dev)
        # prefill the unique prompts
        x = m.model.embed_tokens(pids.reshape(-1))
        cos, sin = self._cos_sin(torch.arange(Pmax, device=dev).repeat(G), x.dtype)
        T = Pmax + S - 1  # cache length: prompt slots + fed completion tokens
        Kc, Vc = [], []
        for layer in m.model.layers:
            q, k, v = self._qkv(layer, x, cos, sin)
            kp = k.view(G, Pmax, self.Hkv, self.d).transpose(1, 2)
            vp = v.view(G, Pmax, self.Hkv, self.d).transpose(1, 2)
            qp = q.view(G, Pmax, self.H, self.d).transpose(1, 2)
            op = torch.nn.functional.scaled_dot_product_attention(
                qp, self._kv_heads(kp), self._kv_heads(vp), is_causal=True, scale=self.scale
            )
            x = self._finish(layer, x, op.transpose(1, 2).reshape(G * Pmax, self.H * self.d))
            kc = torch.empty((N, self.Hkv, T, self.d), dtype=k.dtype, device=dev)
            vc = torch.empty_like(kc)
            kc[:, :, :Pmax] = kp[gi]
            vc[:, :, :Pmax] = vp[gi]
            Kc.append(kc)
            Vc.append(vc)
        last = torch.arange(G, device=dev) * Pmax + plens - 1
        logits_g = self._logits(x[last]).float()  # (G, V)
        V = logits_g.shape[-1]
        valid = torch.zeros((N, T), dtype=torch.bool, device=dev)
        valid[:, :Pmax] = torch.arange(Pmax, device=dev)[None] < plens[gi][:, None]
        pos0 = plens[gi]  # (N,) position of c_0
        tokens = torch.full((N, S), pad_id, dtype=torch.long, device=dev)
        logps = torch.zeros((N, S), dtype=torch.float32, device=dev)
        act = torch.arange(N, device=dev)  # rows still generating; the cache holds these
        scores_act = logits_g[gi] / temperature  # (n_act, V) float32
        steps = 0
        for t in range(S):
            steps = t + 1
            if greedy:
                nxt_act = scores_act.argmax(dim=-1)
            else:
                probs = torch.full((N, V), 1.0 / V, dtype=torch.float32, device=dev)
                probs[act] = torch.softmax(scores_act, dim=-1)
                nxt_act = torch.multinomial(probs, num_samples=1).squeeze(1)[act]
                lp_act = torch.log_softmax(scores_act, dim=-1)  # (n_act, V)
                logps[act, t] = lp_act.gather(-1, nxt_act[:, None])[:, 0]
            tokens[act, t] = nxt_act
            going = nxt_act != eos_id  # (n_act,)
            if t == S - 1 or not bool(going.any()):
                break
            if not bool(going.all()):  # drop finished rows from the cache
                act, nxt_act = act[going], nxt_act[going]
                Kc = [c[going] for c in Kc]
                Vc = [c[going] for c in Vc]
                valid = valid[going]
                pos0 = pos0[going]
            n = act.shape[0]
            valid[:, Pmax + t] = True
            x = m.model.embed_tokens(nxt_act)  # (n, D)
            cos, sin = self._cos_sin(pos0 + t, x.dtype)
            am = valid[:, None, None, : Pmax + t + 1]  # (n, 1, 1, Pmax + t + 1)
            for li, layer in enumerate(m.model.layers):
                q, k, v = self._qkv(layer, x, cos, sin)  # (n, H, d), (n, Hkv, d)
                Kc[li][:, :, Pmax + t] = k
                Vc[li][:, :, Pmax + t] = v
                o = torch.nn.functional.scaled_dot_product_attention(
                    q[:, :, None],
                    self._kv_heads(Kc[li][:, :, : Pmax + t + 1]),
                    self._kv_heads(Vc[li][:, :, : Pmax + t + 1]),
                    attn_mask=am,
                    scale=self.scale,
                )  # (n, H, 1, d)
                x = self._finish(layer, x, o.reshape(n, self.H * self.d))
            scores_act = self._logits(x).float() / temperature
        return tokens[:, :steps], logps[:, :steps]
