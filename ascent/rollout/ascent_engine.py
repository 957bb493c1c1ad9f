"""The `ascent` rollout backend (the default): `FastEngine`, ascent's functional decoder (`ascent.rollout.decoder`)
over a KV cache preallocated once, with shared prompt prefill, continuous batching under a cap, CPU decode
shards and an optional bfloat16 sampling copy (`PRECISIONS`)."""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import torch
from transformers import PreTrainedModel

from ascent.kernels import machine
from ascent.rollout.cached_engine import CachedEngine
from ascent.rollout.decoder import ATTENTION, DECODE_STEP, Decoder, prefill_prompts, supports
from ascent.rollout.engine import check_prompts, left_pad
from ascent.rollout.sampling import draw_uniforms, sample_tokens
from ascent.rollout.scheduling import LengthPredictor, RequestQueue, balance_groups
from ascent.rollout.speculative import DRAFTERS, decode_speculative
from ascent.rollout.types import Generation, SamplingSettings

PRECISIONS: dict[str, torch.dtype | None] = {"model": None, "bfloat16": torch.bfloat16}
"""`rollout.precision`: the dtype the ascent engine computes in (None: the model's own)."""


def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU multiplies bf16 natively (x86 AVX512-BF16 or AMX-BF16, Arm BF16); None when unknown
    (no /proc/cpuinfo). Without it oneDNN emulates bf16 matmuls and bf16 rollouts are slower than fp32."""
    return machine.native_bf16(cpuinfo)


def warn_if_emulated_bf16(device: torch.device) -> None:
    if device.type == "cpu" and cpu_has_native_bf16() is False:
        warnings.warn(
            "rollout.precision=bfloat16 on a CPU without native bf16 (no avx512_bf16 / amx_bf16 / bf16 flag): "
            "bf16 matmuls are emulated and rollouts will likely be slower than rollout.precision=model",
            RuntimeWarning,
            stacklevel=3,
        )


class FastEngine:
    """ascent's engine: the functional Llama/Qwen2 decoder (`ascent.rollout.decoder`) over a KV cache
    preallocated once. Each prompt is prefilled once and its keys/values copied into the cache slots of its
    samples. Models it does not support go to `CachedEngine`.

    Requests are (group, sample) pairs. With `max_active_sequences` = 0 all of them decode at once and
    finished rows are compacted out of the batch (once `compact_fraction` of it has ended). With a cap C,
    at most C decode at once (continuous batching): when a row finishes, its slot is refilled at the next
    step from a queue of waiting requests, ordered longest-predicted-first (`schedule="longest"`, see
    `ascent.rollout.scheduling`) or in request order (`schedule="fifo"`). `predictor`, the per-prompt
    length history, lives with the engine and is updated after every call.

    `precision="bfloat16"` samples from a bfloat16 copy of the block matrices (residual stream, norms and
    output layer stay in the model's dtype; see `ascent.rollout.decoder`): 1.5-2x faster on CPUs with
    AVX512-BF16/AMX, at a small, logged mismatch against the learner's log-probs (pair it with
    `algorithm.tis_cap`). Models the fast decoder does not support sample in their own dtype.

    Every uniform a call can use is drawn up front per (sequence, position), so neither the cap nor the
    order changes what a sequence samples.

    On a CPU the groups are decoded in `shards` threads (0: one per torch thread while each gets
    `min_shard_rows` sequences), each with its share of the intra-op threads and its own KV cache, the
    groups balanced by predicted length (`shard_plan`): two threads that each own a batch do not wait for
    each other inside every small op, as two threads splitting one batch's ops do. Samples are unchanged.

    A slot's cache holds the prompt's first L-1 tokens (left-padded, prefilled once per prompt), then one
    column per decode step: the first step feeds the prompt's last token, step t feeds token t-1 and samples
    token t. Rows admitted at different times sit at different steps, so each writes its own column.
    """

    compact_fraction = 0.25
    """Compact the batch when this share of its rows has finished and no request waits."""

    def __init__(
        self,
        max_active_sequences: int = 0,
        schedule: str = "longest",
        predictor: LengthPredictor | None = None,
        precision: str = "model",
        shards: int = 0,
        attention: str = "auto",
        decode_step: str = "auto",
        speculative: str = "none",
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"rollout.precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
        if max_active_sequences < 0:
            raise ValueError(f"max_active_sequences must be >= 0 (0: no cap), got {max_active_sequences}")
        if schedule not in ("longest", "fifo"):
            raise ValueError(f"schedule must be 'longest' or 'fifo', got {schedule!r}")
        if shards < 0:
            raise ValueError(
                f"shards must be >= 0 (0: one per CPU thread when the batch is large enough), got {shards}"
            )
        if attention not in ATTENTION:
            raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
        if decode_step not in DECODE_STEP:
            raise ValueError(f"decode_step must be one of {DECODE_STEP}, got {decode_step!r}")
        self.attention = attention
        self.decode_step = decode_step
        self.speculative = DRAFTERS.resolve(speculative, key="rollout.speculative")
        self.draft_params = self.speculative()
        """Grouped speculative decoding's parameters (`ascent.rollout.speculative`), None: off."""
        if self.draft_params is not None and max_active_sequences:
            raise ValueError(
                f"rollout.speculative={speculative} decodes every sequence at once: set rollout.max_active_sequences=0"
            )
        self.shards = shards
        self._warned_shards = False
        self.fallback = CachedEngine()
        self.precision = precision
        self.compute_dtype = PRECISIONS[precision]
        self._checked_bf16 = False
        self.max_active_sequences = max_active_sequences
        self.schedule = schedule
        self.predictor = LengthPredictor() if predictor is None else predictor
        self.last_stats: dict[str, float] = {}
        """Decode steps and mean active rows of the last call."""

    @torch.inference_mode()
    def generate(
        self,
        model: PreTrainedModel,
        prompt_ids: list[list[int]],
        n: int,
        s: SamplingSettings,
        generator: torch.Generator | None,
    ) -> Generation:
        if not supports(model):
            gen = self.fallback.generate(model, prompt_ids, n, s, generator)
        else:
            dec = Decoder(model, self.compute_dtype, self.attention, self.decode_step)
            device = dec.embed.device
            if self.compute_dtype is not None and not self._checked_bf16:
                self._checked_bf16 = True
                warn_if_emulated_bf16(device)
            check_prompts(prompt_ids)
            total = len(prompt_ids) * n
            u = draw_uniforms(generator, s.max_new_tokens, total, s, device)  # (max_new, N) or None: the whole call's
            dec.rope_table(max(len(q) for q in prompt_ids) + s.max_new_tokens + 1)  # once, before any shard reads it
            parts = self.shard_plan(prompt_ids, n, s, device)
            if len(parts) == 1:
                cap = total if self.max_active_sequences == 0 else min(self.max_active_sequences, total)
                gen, self.last_stats = self._decode(dec, prompt_ids, n, s, u, cap)
            else:
                gen, self.last_stats = self._decode_sharded(dec, prompt_ids, n, s, u, parts)
        self.predictor.update(prompt_ids, gen.lengths.reshape(len(prompt_ids), n).cpu())
        return gen

    min_shard_rows = 32
    """Automatic sharding gives each shard at least this many sequences: below it a decode step is bound by
    reading the weights, which every shard would read again."""

    def shard_plan(
        self, prompt_ids: list[list[int]], n: int, s: SamplingSettings, device: torch.device
    ) -> list[list[int]]:
        """The prompts (groups) each decode shard takes: one shard unless on a CPU; `shards` of them when set,
        else one per torch thread as long as each gets `min_shard_rows` sequences; never more than the
        groups. Groups are balanced across shards by predicted length (longest first, `balance_groups`)."""
        groups = len(prompt_ids)
        if device.type != "cpu":
            if self.shards > 1 and not self._warned_shards:
                self._warned_shards = True
                warnings.warn(
                    f"rollout.shards={self.shards} applies to CPU rollouts only; "
                    f"decoding on {device.type} in one shard",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return [list(range(groups))]
        k = self.shards or min(torch.get_num_threads(), groups * n // self.min_shard_rows)
        k = max(1, min(k, groups))
        if k == 1:
            return [list(range(groups))]
        loads = [(self.predictor.predict(q) or float(s.max_new_tokens)) * n + len(q) for q in prompt_ids]
        return balance_groups(loads, k)

    def _decode_sharded(
        self,
        dec: Decoder,
        prompt_ids: list[list[int]],
        n: int,
        s: SamplingSettings,
        u: torch.Tensor | None,
        parts: list[list[int]],
    ) -> tuple[Generation, dict[str, float]]:
        """Decode each shard's groups in its own thread with `threads // shards` intra-op threads each, then
        put the rows back in request order. Every sequence keeps its own pre-drawn uniforms, so it samples
        what it would in one shard (up to float rounding of matmuls over fewer rows). A cap on active
        sequences is split evenly across the shards."""
        k, total = len(parts), len(prompt_ids) * n
        rows = [torch.tensor([g * n + j for g in groups for j in range(n)], dtype=torch.long) for groups in parts]
        threads = torch.get_num_threads()

        def run(i: int) -> tuple[Generation, dict[str, float]]:
            m = len(rows[i])
            cap = m if self.max_active_sequences == 0 else min(m, -(-self.max_active_sequences // k))
            with torch.inference_mode():  # grad mode is per thread
                return self._decode(
                    dec, [prompt_ids[g] for g in parts[i]], n, s, None if u is None else u[:, rows[i].to(u.device)], cap
                )

        torch.set_num_threads(max(1, threads // k))
        try:
            with ThreadPoolExecutor(max_workers=k, thread_name_prefix="ascent-decode") as pool:
                results = list(pool.map(run, range(k)))
        finally:
            torch.set_num_threads(threads)
        first = results[0][0]
        out = Generation(
            first.tokens.new_empty((total, s.max_new_tokens)),
            first.logprobs.new_empty((total, s.max_new_tokens)),
            first.lengths.new_empty(total),
            first.finished.new_empty(total),
        )
        for r, (gen, _) in zip(rows, results):
            out.tokens[r], out.logprobs[r], out.lengths[r], out.finished[r] = (
                gen.tokens,
                gen.logprobs,
                gen.lengths,
                gen.finished,
            )
        stats = {
            "decode_steps": max(st["decode_steps"] for _, st in results),
            "mean_active": sum(st["mean_active"] for _, st in results),
            "shards": float(k),
        }
        if "spec_drafted" in results[0][1]:  # grouped speculative decoding: totals over the shards
            for key in ("spec_verify_steps", "spec_drafted", "spec_accepted", "spec_chains"):
                stats[key] = sum(st[key] for _, st in results)
            stats["spec_mean_accepted"] = stats["spec_accepted"] / max(stats["spec_chains"], 1.0)
        return out, stats

    def _decode(
        self, dec: Decoder, prompt_ids: list[list[int]], n: int, s: SamplingSettings, u: torch.Tensor | None, cap: int
    ) -> tuple[Generation, dict[str, float]]:
        """Decode P prompts x n samples with at most `cap` sequences at once; `u` (max_new, P*n): their
        pre-drawn uniforms (None: greedy). Returns the generation and the call's decode statistics. With
        `rollout.speculative` set, `ascent.rollout.speculative.decode_speculative` decodes instead."""
        if self.draft_params is not None:
            return decode_speculative(dec, prompt_ids, n, s, u, self.draft_params, self.compact_fraction)
        device = dec.embed.device
        ids, mask = left_pad(prompt_ids, s.pad_id, device)  # (P, L)
        (p, width), total, max_new = ids.shape, len(prompt_ids) * n, s.max_new_tokens
        head = width - 1  # prompt columns prefilled; column `head` (every prompt's last token) is fed at step 0
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, L)
        prompt_kv = self.prefill(dec, ids[:, :head], mask[:, :head], positions[:, :head]) if head else None
        keys, values = cache = dec.new_cache(cap, head + max_new)
        key_valid = torch.zeros((cap, head + max_new), dtype=torch.bool, device=device)
        out = Generation(
            torch.full((total, max_new), s.pad_id, dtype=torch.long, device=device),
            torch.zeros((total, max_new), device=device),
            torch.zeros(total, dtype=torch.long, device=device),
            torch.zeros(total, dtype=torch.bool, device=device),
        )
        # per slot: request (sequence) id, step (tokens sampled so far), token to feed, its position, alive
        seq, step = torch.zeros(cap, dtype=torch.long, device=device), torch.zeros(cap, dtype=torch.long, device=device)
        feed, pos = torch.zeros(cap, dtype=torch.long, device=device), torch.zeros(cap, dtype=torch.long, device=device)
        alive = torch.zeros(cap, dtype=torch.bool, device=device)
        longest = (
            self.schedule == "longest" and cap < total
        )  # all at once: request order (row order can move float ULPs)
        history = [self.predictor.predict(q) for q in prompt_ids] if longest else [None] * p
        queue = RequestQueue(p, n, history, longest, unknown=float(max_new))

        def admit(slots: torch.Tensor, requests: list[int]) -> None:
            r = torch.tensor(requests, dtype=torch.long, device=device)
            g = r // n
            if head:
                keys[:, slots, :, :head] = prompt_kv[0][:, g]
                values[:, slots, :, :head] = prompt_kv[1][:, g]
            key_valid[slots] = False
            key_valid[slots, :head] = mask[g, :head].bool()
            seq[slots], step[slots], feed[slots], pos[slots], alive[slots] = (
                r,
                0,
                ids[g, head],
                positions[g, head],
                True,
            )

        a = cap  # rows in use: 0..a-1 (dead ones included until compaction)
        admit(torch.arange(cap, device=device), queue.pop(cap))
        lockstep, steps, active_sum = True, 0, 0  # lockstep: every row at the same step (nothing refilled yet)
        identity = cap == total  # slot i holds request i, every row alive at step `steps`: until a row ends
        while True:
            if identity:  # the same step as below in slices instead of per-row indexing: ~20 fewer small ops
                t0 = steps
                key_valid[:a, head + t0] = True
                logits = dec.forward(
                    feed[:a, None], pos[:a, None], cache, head + t0, key_valid[:a, None, None, : head + t0 + 1]
                )  # (a, V)
                steps, active_sum = steps + 1, active_sum + a
                tok, lp = sample_tokens(logits, s, u=None if u is None else u[t0, :a])  # (a,)
                if t0 < max_new - 1 and (s.ignore_eos or not bool((tok == s.eos_id).any())):  # nobody ends here
                    out.tokens[:a, t0], out.logprobs[:a, t0] = tok, lp
                    out.lengths[:a] += 1
                    step[:a] += 1
                    feed[:a], pos[:a] = tok, pos[:a] + 1
                    continue
                identity = False  # a row ends: this step's bookkeeping, and the rest, per row
                r, t, live, end = seq[:a], step[:a], alive[:a], head + t0 + 1
            else:
                col = head + step[:a]  # (a,) each row's cache column
                key_valid[torch.arange(a, device=device), col] = True
                end = int(col.max()) + 1
                start = int(col[0]) if lockstep else col
                logits = dec.forward(
                    feed[:a, None], pos[:a, None], cache, start, key_valid[:a, None, None, :end]
                )  # (a, V)
                steps, active_sum = steps + 1, active_sum + int(alive[:a].sum())
                r, t, live = seq[:a], step[:a], alive[:a]
                tok, lp = sample_tokens(logits, s, u=None if u is None else u[t, r])  # (a,)
            lr, lt = r[live], t[live]
            out.tokens[lr, lt], out.logprobs[lr, lt] = tok[live], lp[live]
            out.lengths[lr] += 1
            eos = live & (tok == s.eos_id) if not s.ignore_eos else torch.zeros_like(live)
            out.finished[r[eos]] = True
            ended = eos | (live & (t == max_new - 1))
            alive[:a] = live & ~ended
            step[:a] = (t + 1).clamp(max=max_new - 1)  # dead rows stay in range until refilled or compacted
            feed[:a], pos[:a] = tok, pos[:a] + 1
            free = (~alive[:a]).nonzero().squeeze(-1)
            if len(queue) and len(free):
                if longest:  # context: what this call's finished and running siblings say about their groups
                    done = ended.nonzero().squeeze(-1)
                    queue.observe_finished(r[done].tolist(), out.lengths[r[done]].tolist())
                    queue.observe_running(r[alive[:a]].tolist(), step[:a][alive[:a]].tolist())
                requests = queue.pop(len(free))
                admit(free[: len(requests)], requests)
                lockstep = False
            if not bool(alive[:a].any()):
                break
            if not len(queue) and len(free) >= self.compact_fraction * a:
                keep = alive[:a].nonzero().squeeze(-1)
                keys[:, : len(keep), :, :end] = keys[:, keep, :, :end]
                values[:, : len(keep), :, :end] = values[:, keep, :, :end]
                key_valid[: len(keep)] = key_valid[keep].clone()
                for x in (seq, step, feed, pos, alive):
                    x[: len(keep)] = x[keep].clone()
                a = len(keep)
        stats = {"decode_steps": float(steps), "mean_active": active_sum / max(steps, 1), "shards": 1.0}
        return Generation(out.tokens.cpu(), out.logprobs.cpu(), out.lengths.cpu(), out.finished.cpu()), stats

    @staticmethod
    def prefill(
        dec: Decoder, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the P (left-padded) prompts once into their own cache (P rows), copied into sample slots later."""
        return prefill_prompts(dec, ids, mask, positions)
