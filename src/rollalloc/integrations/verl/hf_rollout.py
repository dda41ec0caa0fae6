"""A verl rollout backend for CPUs: one Ray actor generating with a Hugging Face model (`hf_cpu`).

verl 0.9.x registers only vLLM, SGLang and TRT-LLM as rollout backends (its `HFRollout` is not
wired into the agent-loop path). This module registers a fourth one through verl's own extension
points (docs/extend_guide.rst), selected with `actor_rollout_ref.rollout.name=hf_cpu`:

- `RolloutReplicaRegistry.register("hf_cpu", ...)` -> `HFCPUReplica`: in the hybrid (colocated)
  mode verl's trainer uses, each replica launches one `HFCPUServer` Ray actor. The agent loop calls
  its `generate(prompt_ids, sampling_params) -> TokenOutput` exactly as it calls a vLLM server;
  sleep / wake_up / abort / kv-cache calls are no-ops (nothing to free on a CPU).
- `_ROLLOUT_REGISTRY[("hf_cpu", "async")]` -> `HFServerAdapter`, the object verl's actor worker
  builds in each training process. Its `update_weights` drains verl's weight generator on every
  rank (each tensor comes out of a collective gather of the FSDP shards, so every rank must take
  part) and ships the full state dict from the replica's first rank to its server. With the default
  `checkpoint_engine.backend=naive` verl calls it in-process after every actor update.

One replica spans `rollout.tensor_model_parallel_size` training ranks (set it to the number of
worker processes for one server). The server generates with per-rollout seeded samplers (seed,
weights version, prompt, occurrence of that prompt since the last sync), so a resumed run generates
what an uninterrupted one does. Registered in every process that imports verl, through the
`verl.plugins` entry-point group (pyproject.toml) or
`VERL_USE_EXTERNAL_MODULES=rollalloc.integrations.verl.hf_rollout`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Generator
from typing import Any

import ray
import torch
from verl.workers.rollout import base as _rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

logger = logging.getLogger(__name__)

ROLLOUT_NAME = "hf_cpu"
SKIP_SYNC_ENV = "ROLLALLOC_HF_CPU_SKIP_WEIGHT_SYNC"
"""Test switch: "1" makes update_weights drain the generator but not ship it (a broken sync)."""


def _server_name(replica_rank: int) -> str:
    return f"rollalloc_hf_cpu_server_{replica_rank}"


def _cfg(obj: Any, key: str, default: Any = None) -> Any:
    """A field of a verl config object (dataclass or DictConfig)."""
    if obj is None:
        return default
    if hasattr(obj, "get") and not hasattr(obj, "__dataclass_fields__"):
        value = obj.get(key, default)
    else:
        value = getattr(obj, key, default)
    return default if value is None else value


def weights_fingerprint(state_dict: dict[str, torch.Tensor]) -> str:
    """A short hash of a state dict's values (name order independent)."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().to(torch.float32).contiguous().cpu()
        h.update(name.encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


class HFCPUServer:
    """The rollout server of one replica: a Hugging Face causal LM on the CPU.

    Requests that arrive together are generated as one left-padded batch (in a worker thread, so the
    actor keeps accepting requests meanwhile)."""

    def __init__(self, model_path: str, response_length: int, seed: int = 0, threads: int = 1):
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(max(1, int(threads)))
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=torch.float32, local_files_only=True
        ).eval()
        self.pad_id = self.model.config.pad_token_id or 0
        eos = self.model.config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.response_length = int(response_length)
        self.seed = int(seed)
        self.version = -1  # global step of the weights held; -1: as loaded from model_path
        self.fingerprint = weights_fingerprint(self.model.state_dict())
        self.sync_log: list[dict[str, Any]] = []
        self._occurrence: dict[tuple[int, ...], int] = {}
        self._queue: list[tuple[list[int], dict, asyncio.Future]] = []
        self._draining = False
        self.generated = 0

    # -- generation ----------------------------------------------------------------------------

    async def generate(
        self, request_id: str = "", *, prompt_ids: list[int], sampling_params: dict, **_: Any
    ) -> TokenOutput:
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((list(prompt_ids), dict(sampling_params), fut))
        if not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            await asyncio.sleep(0.01)  # let the requests of one agent-loop chunk arrive together
            while self._queue:
                batch, self._queue = self._queue, []
                # seeds are assigned in arrival order per prompt; identical prompts are
                # interchangeable, so any arrival order yields the same multiset of rollouts
                seeds = [self._next_seed(p) for p, _, _ in batch]
                groups: dict[tuple, list[int]] = {}
                for i, (_, params, _) in enumerate(batch):
                    groups.setdefault(self._params_key(params), []).append(i)
                for idx in groups.values():
                    try:
                        outs = await asyncio.to_thread(
                            self._generate_batch,
                            [batch[i][0] for i in idx],
                            [seeds[i] for i in idx],
                            batch[idx[0]][1],
                        )
                        for i, out in zip(idx, outs):
                            batch[i][2].set_result(out)
                    except Exception as e:  # fail the requests, never hang them
                        for i in idx:
                            if not batch[i][2].done():
                                batch[i][2].set_exception(e)
        finally:
            self._draining = False

    def _next_seed(self, prompt_ids: list[int]) -> int:
        key = tuple(prompt_ids)
        k = self._occurrence.get(key, 0)
        self._occurrence[key] = k + 1
        h = hashlib.sha256(repr((self.seed, self.version, key, k)).encode()).digest()
        return int.from_bytes(h[:8], "little") & ((1 << 62) - 1)

    def _params_key(self, p: dict) -> tuple:
        return (
            float(p.get("temperature", 1.0)),
            float(p.get("top_p", 1.0)),
            int(p.get("top_k", -1) or -1),
            int(p.get("max_tokens") or p.get("max_new_tokens") or self.response_length),
            bool(p.get("logprobs", False)),
        )

    @torch.no_grad()
    def _generate_batch(
        self, prompts: list[list[int]], seeds: list[int], params: dict
    ) -> list[TokenOutput]:
        temperature, top_p, top_k, max_tokens, want_logprobs = self._params_key(params)
        b, width = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((b, width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p) :] = torch.as_tensor(p, dtype=torch.long)
            attn[r, width - len(p) :] = 1
        gens = [torch.Generator().manual_seed(s) for s in seeds]
        out_tokens: list[list[int]] = [[] for _ in range(b)]
        out_lp: list[list[float]] = [[] for _ in range(b)]
        done = torch.zeros(b, dtype=torch.bool)
        past, step_ids = None, ids
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        step_pos = pos
        for _ in range(max_tokens):
            out = self.model(
                input_ids=step_ids,
                attention_mask=attn,
                position_ids=step_pos,
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            logp_full = torch.log_softmax(logits / max(temperature, 1e-6), dim=-1)
            nxt = torch.empty(b, dtype=torch.long)
            for r in range(b):
                if done[r]:
                    nxt[r] = self.pad_id
                    continue
                if temperature <= 0:
                    tok = int(torch.argmax(logits[r]))
                else:
                    probs = _filter(logp_full[r].exp(), top_p, top_k)
                    tok = int(torch.multinomial(probs, 1, generator=gens[r]))
                nxt[r] = tok
                out_tokens[r].append(tok)
                out_lp[r].append(float(logp_full[r, tok]))
                if tok in self.eos_ids:
                    done[r] = True
            if bool(done.all()):
                break
            step_ids = nxt[:, None]
            attn = torch.cat([attn, torch.ones((b, 1), dtype=torch.long)], dim=1)
            step_pos = pos[:, -1:] + 1
            pos = torch.cat([pos, step_pos], dim=1)
        self.generated += b
        return [
            TokenOutput(
                token_ids=out_tokens[r],
                log_probs=out_lp[r] if want_logprobs else None,
                stop_reason="completed",
                extra_fields={"global_steps": self.version, "weights": self.fingerprint},
            )
            for r in range(b)
        ]

    # -- weights -------------------------------------------------------------------------------

    def update_weights(self, state_dict: dict[str, torch.Tensor], global_steps: int | None) -> str:
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        # tied embeddings: lm_head.weight may be absent from the actor's state dict
        missing = [
            k
            for k in missing
            if not (k == "lm_head.weight" and self.model.config.tie_word_embeddings)
        ]
        if missing or unexpected:
            raise ValueError(
                f"hf_cpu: weight sync mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
        self.version = -1 if global_steps is None else int(global_steps)
        self.fingerprint = weights_fingerprint(self.model.state_dict())
        self._occurrence.clear()
        self.sync_log.append({"global_steps": self.version, "weights": self.fingerprint})
        return self.fingerprint

    def stats(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "weights": self.fingerprint,
            "generated": self.generated,
            "sync_log": list(self.sync_log),
        }

    # -- lifecycle calls verl makes on every rollout server: nothing to free on a CPU ----------

    async def wake_up(self, tags: list[str] | None = None, **_: Any):
        return None

    async def sleep(self, **_: Any):
        return None

    async def abort_all_requests(self, reject_request: bool = False, **_: Any) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def start_profile(self, **_: Any):
        return None

    async def stop_profile(self):
        return None

    async def wait_for_requests_to_drain(self):
        while self._queue or self._draining:
            await asyncio.sleep(0.01)


def _filter(probs: torch.Tensor, top_p: float, top_k: int) -> torch.Tensor:
    """Top-k / nucleus filtering of one probability vector (renormalised by multinomial)."""
    if top_k is not None and 0 < top_k < probs.numel():
        kth = torch.topk(probs, top_k).values[-1]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = sorted_p.cumsum(0) - sorted_p < top_p
        mask = torch.zeros_like(probs, dtype=torch.bool)
        mask[order[keep]] = True
        probs = torch.where(mask, probs, torch.zeros_like(probs))
    return probs


class HFCPUReplica(RolloutReplica):
    """A replica whose server is one `HFCPUServer` actor (hybrid mode: the trainer's workers hold the
    training engine; the server process holds the generation copy)."""

    async def launch_servers(self):
        model_path = _cfg(self.model_config, "local_path") or _cfg(self.model_config, "path")
        threads = int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
        server = (
            ray.remote(HFCPUServer)
            .options(
                name=_server_name(self.replica_rank),
                num_cpus=0,  # shares the cores of the (idle while generating) training workers
                max_concurrency=self.max_concurrency,
            )
            .remote(
                model_path=model_path,
                response_length=int(_cfg(self.config, "response_length", 512)),
                seed=int(_cfg(self.config, "seed", 0) or 0),
                threads=threads,
            )
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf-cpu-{self.replica_rank}"
        await server.stats.remote()  # wait until the model is loaded

    async def sleep(self):
        return None


class HFServerAdapter(BaseRollout):
    """The rollout side of verl's actor worker for `hf_cpu`: weight sync into the replica's server."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **_: Any):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(_server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        **kwargs: Any,
    ):
        if wire_format != "named_tensors":
            raise ValueError(
                f"hf_cpu rollout supports wire_format='named_tensors' only, not {wire_format!r}"
            )
        state: dict[str, torch.Tensor] = {}
        for name, tensor in weights:  # every rank drains: each item is a collective gather
            if self.rollout_rank == 0:
                t = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
                state[name] = t.detach().to("cpu", torch.float32).clone()
        if self.rollout_rank != 0 or os.environ.get(SKIP_SYNC_ENV) == "1":
            return None
        await self._server_handle().update_weights.remote(state, global_steps)
        return None


def register() -> None:
    """Register the `hf_cpu` backend with verl (idempotent)."""
    RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFCPUReplica)
    _rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.HFServerAdapter"


register()
