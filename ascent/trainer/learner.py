"""The learner: turns a scored rollout batch into optimizer steps with the registered policy loss.

It owns the policy's weights, the optimizer and scheduler, and provides what the loss declares it needs
(its `requires` attribute) generically:

- "ref": a frozen copy of the initial policy (also whenever kl_coef > 0) -> LossInput.ref_logprobs
- "rewards": the sequence rewards passed to `update` -> LossInput.rewards
- "groups": mini-batches and micro-batches made of whole groups -> LossInput.group_index
- "full_logits": the policy's full-vocabulary log-softmax -> LossInput.logits

Anything else a piece needs comes from its state's hooks (`ascent.algorithms.state.PieceState`): per-sequence
inputs, per-micro-batch inputs, and a step of its own after each optimizer step. Its input is a
`RolloutBatch` plus advantages: it never reaches into the rollout engine or the rewards.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from typing import Optional, Sequence

import torch

from ascent.algorithms import LOSSES, LossInput
from ascent.algorithms.aggregate import masked_mean
from ascent.algorithms.losses import tis_weight
from ascent.algorithms.state import PieceState
from ascent.config.schema import RunConfig
from ascent.policy.fused import fuse_rms_norms
from ascent.policy.model import Policy, full_logprobs, shared_prefix_logprobs, supports_shared_prefix, token_logprobs
from ascent.rollout.types import RolloutBatch
from ascent.trainer import fsdp
from ascent.trainer.batching import MicroBatch, micro_batches, mini_batch_bounds
from ascent.trainer.distributed import DataParallel, Ranks, init_group, pack, receive, unpack
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler
from ascent.trainer.precision import Precision, decide, resolve, settled
from ascent.trainer.threads import ThreadGovernor
from ascent.typed import ConfigError

log = logging.getLogger(__name__)


class Learner:
    """Optimizer steps on rollout batches (PPO epochs x mini-batches, micro-batch accumulation), built from the
    run config: the loss from `algorithm.loss`, the optimizer from `train.optim`, batch sizes from `train`,
    the sampling temperature and completion length from `rollout`. `states`: the configured pieces' states
    (`ascent.algorithms.state.PieceState`), whose hooks add loss inputs and steps of their own."""

    def __init__(
        self, policy: Policy, cfg: RunConfig, states: Sequence[PieceState] = (), ranks: Optional[Ranks] = None
    ) -> None:
        algo, train = cfg.algorithm, cfg.train
        self.policy, self.algo, self.optim_cfg = policy, algo, train.optim
        self.fused_norms = fuse_rms_norms(policy.model) if train.fused_norm else 0
        """How many RMSNorm modules of the policy run ascent's fused kernels (`train.fused_norm`)."""
        self.precision: Precision = resolve(train.precision, policy.model, policy.device)
        """The forwards' arithmetic (`train.precision`), with the reason for it (`auto`: settled by
        `settle_precision` on the first update)."""
        self.shared_prefix = train.shared_prefix
        """Forward each distinct prompt of a micro-batch once (`shared_prefix_logprobs`); `train.shared_prefix`."""
        self.loss_fn = LOSSES.resolve(algo.loss, key="algorithm.loss")
        self.requires = self.loss_fn.requires
        self.total_optimizer_steps = train.steps * algo.ppo_epochs * algo.mini_batches
        self.optimizer = make_optimizer(policy.model, train.optim)
        self.scheduler = make_scheduler(self.optimizer, train.optim, self.total_optimizer_steps)
        self.micro_batch_size = train.micro_batch_size
        self.temperature = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0
        self.norm_length = algo.norm_length or cfg.rollout.max_new_tokens
        self.adapters_off = adapters_are_identity(policy.model)
        """The policy is a LoRA model whose adapters are still zero: the reference is the same model with its
        adapters switched off (no copy)."""
        self.reference = None
        self.uses_reference = uses_reference = algo.kl_coef > 0 or "ref" in self.requires
        """The loss reads the reference's log-probs on every micro-batch (a KL term or a `ref` input); otherwise the
        reference serves the KL monitor (one micro-batch an update) and pieces that ask for it."""
        if uses_reference or cfg.train.kl_monitor:
            # made here, from the policy the phase starts from, before a resume loads later weights into the
            # policy (made on first use, the monitor's reference was the resumed policy and its KL restarted at 0)
            self.reference = policy.model if self.adapters_off else self._frozen_copy(policy.model)
        self.kl_monitor = cfg.train.kl_monitor
        self.skip_zero_advantage = (
            train.skip_zero_advantage
            and getattr(self.loss_fn.fn, "zero_advantage_free", False)
            and algo.kl_coef == 0
            and not uses_reference
        )
        """Rows whose advantages are all zero are left out of the forward/backward (`train.skip_zero_advantage`)."""
        self._monitor_next = False  # the next micro-batch logs kl/ref_k3 (the first one of each update)
        self.states: list[PieceState] = list(states)
        self.cfg = cfg
        n = cfg.learner.world_size
        self.ranks: Ranks = ranks or (
            DataParallel(n, cfg.learner.timeout_s, policy.device, serve_rank, cfg.learner.shard) if n > 1 else Ranks()
        )
        self.lockstep = self.ranks.lockstep
        """`learner.shard=fsdp2`: `train_model` is a sharded copy (`ascent.trainer.fsdp`) whose every forward and
        backward all ranks run together; the plain forward then (not `shared_prefix`, whose forward count
        depends on the rows)."""
        if self.lockstep:
            self.shared_prefix = False
        self.train_model: torch.nn.Module = policy.model
        """The model the optimizer steps: the policy's own, or with fsdp2 its sharded copy (made on the first
        update, `shard_training_copy`); rank 0's `policy.model` then stays whole for the rollout and is refreshed
        from the shards after each update."""
        self.pending: Optional[dict] = None
        """fsdp2: the one-process optimizer and scheduler state to load into the next sharded copy."""
        self._whole_fingerprint: Optional[float] = None
        """This process's rank among `learner.world_size` data-parallel learner ranks (`ascent.trainer.distributed`):
        a `DataParallel` in the driver when world_size > 1 (rank 0, which starts the others)."""
        self.governor: Optional[ThreadGovernor] = None
        """`learner.adaptive_threads`: the update's thread count, from the waiting share of the last updates."""
        if cfg.learner.adaptive_threads and n == 1 and policy.device.type == "cpu":
            self.governor = ThreadGovernor(torch.get_num_threads())
        if n > 1 and ranks is None:
            rows = cfg.train.prompts_per_step * cfg.rollout.samples_per_prompt / algo.mini_batches
            if math.ceil(rows / self.micro_batch_size) < n:
                log.warning(
                    "learner.world_size=%d but an optimizer step has about %d rows in micro-batches of %d: some ranks "
                    "get no micro-batch and idle; lower train.micro_batch_size to <= %d to give every rank work",
                    n,
                    rows,
                    self.micro_batch_size,
                    max(1, int(rows // n)),
                )

    def reference_model(self) -> torch.nn.Module:
        """The frozen reference (the policy as it was when the learner was built), made on first use; with
        `adapters_off`, the policy itself (run it under `reference_mode`)."""
        if self.reference is None:
            self.reference = self.policy.model if self.adapters_off else self._frozen_copy(self.policy.model)
        return self.reference

    def standalone_reference(self) -> torch.nn.Module:
        """The reference as a model of its own that needs no `reference_mode` (pieces that sample from it)."""
        if self.adapters_off and (self.reference is None or self.reference is self.policy.model):
            ref = self._frozen_copy(self.policy.model)
            for name, p in ref.named_parameters():
                if "lora_B" in name:
                    p.zero_()  # the base model's function, also after the policy's adapters have trained
            self.reference, self.adapters_off = ref, False
        return self.reference_model()

    def reference_mode(self) -> contextlib.AbstractContextManager:
        """The context in which `reference_model()` computes the reference's log-probs."""
        return self.policy.model.disable_adapter() if self.adapters_off else contextlib.nullcontext()

    def reference_logprobs(self, mb: "MicroBatch") -> torch.Tensor:
        """(n, T) the reference's log-probs of a micro-batch, without grad."""
        model = self.reference_model()
        with torch.no_grad(), self.reference_mode():
            return self.token_logprobs(model, mb.input_ids, mb.attention_mask, mb.completion_mask, mb.prompt_group)

    @staticmethod
    def _frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
        ref = copy.deepcopy(model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    @torch.no_grad()
    def logprobs(self, model: torch.nn.Module, batch: RolloutBatch, shared: bool = False) -> torch.Tensor:
        """Teacher-forced log-probs (N, T) in micro-batches, without grad. `shared` (inside `update`, which every
        learner rank runs): each rank computes its share of the micro-batches and the ranks exchange them."""
        m, dev = self.micro_batch_size, self.policy.device
        ranks = self.ranks if shared else Ranks()
        starts = list(range(0, len(batch), m))
        mine = {}
        for i in ranks.passes(starts):
            rows = slice(i, i + m) if i is not None else slice(0, 1)  # None: an idle pass (lockstep)
            lp = self.token_logprobs(
                model,
                batch.input_ids[rows].to(dev),
                batch.attention_mask[rows].to(dev),
                batch.completion_mask[rows].to(dev),
                batch.group_index[rows].to(dev),
            )
            if i is not None:
                mine[i] = lp.to(batch.input_ids.device)
        parts = ranks.merge(mine)
        return torch.cat([parts[i] for i in starts])

    def token_logprobs(
        self,
        model: torch.nn.Module,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        completion_mask: torch.Tensor,
        prompt_group: torch.Tensor,
    ) -> torch.Tensor:
        """(n, T) teacher-forced log-probs of the completion tokens: each shared prompt forwarded once when
        `shared_prefix` is on and the model and rows allow it, else the plain forward over every row."""
        with self.precision.autocast(input_ids.device):
            return self.forward_logprobs(model, input_ids, attention_mask, completion_mask, prompt_group)

    def forward_logprobs(
        self,
        model: torch.nn.Module,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        completion_mask: torch.Tensor,
        prompt_group: torch.Tensor,
    ) -> torch.Tensor:
        """`token_logprobs` in whatever precision the caller's context sets."""
        if self.shared_prefix and supports_shared_prefix(model):
            lp = shared_prefix_logprobs(
                model, input_ids, attention_mask, completion_mask, prompt_group, self.temperature
            )
            if lp is not None:
                return lp
        return token_logprobs(model, input_ids, attention_mask, self.temperature)

    def settle_precision(self, batch: RolloutBatch, rows: int = 8) -> None:
        """`train.precision=auto` where bf16 is native: probe fp32 against bf16 on the first `rows` rows of
        the batch and keep the verdict (`ascent.trainer.precision.decide`)."""
        n = min(len(batch), rows)
        dev = self.policy.device
        width = int(batch.attention_mask[:n].sum(-1).max())
        ids, att = batch.input_ids[:n, :width].to(dev), batch.attention_mask[:n, :width].to(dev)
        comp, groups = batch.completion_mask[:n, :width].to(dev), batch.group_index[:n].to(dev)
        model = self.policy.model
        self.precision = decide(model, lambda: self.forward_logprobs(model, ids, att, comp, groups), comp, dev)

    def update(
        self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor, rewards: Optional[torch.Tensor] = None
    ) -> dict[str, float]:
        """All optimizer steps for one rollout batch. advantages: (N, T); valid: (N,) usable rewards;
        rewards (N,): for losses and piece states that need them."""
        if self.governor is None:
            return self._update(batch, advantages, valid, rewards)
        self.governor.before()
        try:
            metrics = self._update(batch, advantages, valid, rewards)
        finally:
            governed = self.governor.after()
        return {**metrics, **governed}

    def _update(
        self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor, rewards: Optional[torch.Tensor]
    ) -> dict[str, float]:
        self.policy.model.train()
        if self.precision.pending:
            self.settle_precision(batch)
        if isinstance(self.ranks, DataParallel):
            self.share_update(batch, advantages, valid, rewards)
            if self.lockstep:  # the sharded model's forwards are collectives: a failure inside them is one line too
                return self.ranks.guarded(lambda: self._steps(batch, advantages, valid, rewards))
        return self._steps(batch, advantages, valid, rewards)

    def _steps(
        self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor, rewards: Optional[torch.Tensor]
    ) -> dict[str, float]:
        self.train_model.train()
        steps = self.algo.ppo_epochs * self.algo.mini_batches
        old = self.logprobs(self.train_model, batch, shared=True) if steps > 1 else None  # (N, T) pre-update policy
        mask = batch.completion_mask * valid[:, None].float()  # (N, T)
        seq = self.sequence_inputs(batch, valid, rewards)
        metrics: dict[str, float] = {}
        if old is not None:
            metrics["rollout/logprob_mismatch"] = float(
                ((old - batch.sampled_logprobs).abs() * batch.completion_mask).max()
            )
        for state in self.states:
            state.begin_update(batch, rewards, valid, mask)
        bounds = self.mini_batch_bounds(batch)
        skipped = 0
        self._monitor_next = self.kl_monitor and self.ranks.rank == 0  # the step's first micro-batch is rank 0's
        if self.skip_zero_advantage and not bool(((advantages * mask) != 0).any()):
            # every row will be skipped: the monitors run on the batch's first rows before the (zero) step
            kl, mismatch = self.monitor_kl(batch, mask, self.kl_monitor)
            if kl is not None:
                metrics["kl/ref_k3"] = kl
            metrics.setdefault("rollout/logprob_mismatch", mismatch)
            self._monitor_next = False
        for _ in range(self.algo.ppo_epochs):
            for start, stop in zip(bounds[:-1], bounds[1:]):
                rows = slice(start, stop)
                m = self.optimizer_step(batch, advantages, mask, old, rows, seq)
                skipped += int(m.pop("loss/skipped"))
                for state in self.states:
                    m.update(state.after_optimizer_step(batch, torch.arange(len(batch))[rows], mask))
                for k, v in m.items():
                    metrics.setdefault(k, v)  # first mini-batch's values (pre-update mismatch included)
        metrics["loss/skipped_steps"] = float(skipped)
        metrics["optim/bf16"] = float(self.precision.dtype == torch.bfloat16)
        metrics["optim/lr"] = float(self.scheduler.get_last_lr()[0])
        if self.lockstep:  # rank 0's whole model takes the steps' weights (every rank sends its shards)
            fsdp.refresh(self.train_model, self.policy.model if self.ranks.rank == 0 else None)
            if self.ranks.rank == 0:
                self._whole_fingerprint = fingerprint(self.policy.model)
        if self.ranks.world_size > 1:
            metrics.update(self.ranks.memory(fsdp.optimizer_state_bytes(self.optimizer)))
        return metrics

    @torch.no_grad()
    def monitor_kl(self, batch: RolloutBatch, mask: torch.Tensor, kl: bool = True) -> tuple[float | None, float]:
        """`kl/ref_k3` (None unless `kl`) and the sampler/learner log-prob mismatch on the batch's first
        micro-batch of rows, without grad (fsdp2: rank 0 alone, on its whole model; the others return (None, 0))."""
        if self.lockstep and self.ranks.rank != 0:
            return None, 0.0
        dev, rows = self.policy.device, slice(0, self.micro_batch_size)
        width = int(batch.attention_mask[rows].sum(-1).max())
        args = (
            batch.input_ids[rows, :width].to(dev),
            batch.attention_mask[rows, :width].to(dev),
            batch.completion_mask[rows, :width].to(dev),
            batch.group_index[rows].to(dev),
        )
        logp = self.token_logprobs(self.policy.model, *args)
        sampled = batch.sampled_logprobs[rows, :width].to(dev)
        mismatch = float(((logp - sampled).abs() * args[2]).max())
        if not kl:
            return None, mismatch
        with self.reference_mode():
            ref = self.token_logprobs(self.reference_model(), *args)
        log_ratio = (ref - logp).clamp(-20.0, 20.0)
        return float(masked_mean(log_ratio.exp() - log_ratio - 1.0, mask[rows, :width].to(dev))), mismatch

    def sequence_inputs(
        self, batch: RolloutBatch, valid: torch.Tensor, rewards: Optional[torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The per-sequence (N,) loss inputs: rewards (0 where invalid) and group_index when the loss requires
        them, and what the pieces' states add (`PieceState.sequence_inputs`)."""
        seq: dict[str, torch.Tensor] = {}
        if "rewards" in self.requires:
            if rewards is None:
                raise ValueError(f"loss {self.algo.loss!r} requires 'rewards': pass rewards= to Learner.update")
            seq["rewards"] = torch.where(valid, rewards, torch.zeros_like(rewards))
        if "groups" in self.requires:
            seq["group_index"] = batch.group_index
        for state in self.states:
            seq.update(state.sequence_inputs(batch))
        return seq

    def mini_batch_bounds(self, batch: RolloutBatch) -> list[int]:
        """Row boundaries of exactly `mini_batches` mini-batches (`ascent.trainer.batching.mini_batch_bounds`)."""
        return mini_batch_bounds(batch, self.algo.mini_batches, "groups" in self.requires, self.algo.loss)

    def micro_batches(
        self, batch: RolloutBatch, rows: slice, keep: Optional[torch.Tensor] = None
    ) -> list[torch.Tensor]:
        """Row indices of each micro-batch of the mini-batch `rows` (`ascent.trainer.batching.micro_batches`)."""
        return micro_batches(batch, rows, self.micro_batch_size, "groups" in self.requires, keep)

    def optimizer_step(
        self,
        batch: RolloutBatch,
        adv: torch.Tensor,
        mask: torch.Tensor,
        old: torch.Tensor | None,
        rows: slice,
        seq: Optional[dict[str, torch.Tensor]] = None,
    ) -> dict[str, float]:
        """One optimizer step on rows `rows`, accumulated over micro-batches; skipped on a NaN/inf loss."""
        seq = seq or {}
        num_tokens, num_seqs = float(mask[rows].sum()), float(mask[rows].shape[0])
        metrics: dict[str, float] = {}
        keep = None
        if self.skip_zero_advantage:  # the same gradient from the rows that carry one
            keep = ((adv * mask) != 0).any(-1)  # (N,)
            metrics["loss/zero_advantage_rows_skipped"] = 1.0 - float(keep[rows].float().mean())
        subs = self.micro_batches(batch, rows, keep)
        weight = float(sum(len(s) for s in subs)) or 1.0
        summed: dict[str, float] = {}
        maxed: dict[str, float] = {}
        bad = False
        for sub in self.ranks.passes(subs):  # all of them with one rank
            if sub is None or bad:  # lockstep only: this rank has nothing (left) to add but must join the pass
                self.idle_pass(batch, subs[0])
                continue
            width = int(batch.attention_mask[sub].sum(-1).max())
            dev = self.policy.device  # rollout batches live on the CPU; the micro-batch goes where the model is
            mb = MicroBatch(
                batch.input_ids[sub, :width].to(dev),
                batch.attention_mask[sub, :width].to(dev),
                mask[sub, :width].to(dev),
                adv[sub, :width].to(dev),
                None if old is None else old[sub, :width].to(dev),
                batch.sampled_logprobs[sub, :width].to(dev),
                batch.completion_mask[sub, :width].to(dev),
                batch.group_index[sub].to(dev),
                {k: (v[sub, :width] if v.dim() == 2 else v[sub]).to(dev) for k, v in seq.items()},  # (n,) / (n, T)
            )
            loss, m, mismatch = self.micro_loss(mb, num_tokens, num_seqs)
            if mismatch is not None:
                maxed["rollout/logprob_mismatch"] = max(maxed.get("rollout/logprob_mismatch", 0.0), mismatch)
            if not math.isfinite(float(loss.detach())):
                bad = True
                if not self.lockstep:
                    break
            if self.lockstep:
                (loss * fsdp.sum_scale(self.ranks.world_size)).backward()  # FSDP2 averages over the ranks
                if bad:
                    continue
            else:
                loss.backward()
            for k, v in m.items():
                summed[k] = summed.get(k, 0.0) + v * len(sub) / weight
        if not subs:  # every row skipped: a zero gradient, as the full forward would have given
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    p.grad = torch.zeros_like(p)
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if self.ranks.reduce_gradients(params, bad):  # the sum over the ranks' micro-batches (one rank: as is)
            self.optimizer.zero_grad(set_to_none=True)
            return {"loss/skipped": 1.0, "loss/nonfinite": 1.0}
        summed, maxed = self.ranks.reduce_metrics(summed, maxed)
        metrics.update(maxed)
        metrics.update(summed)
        norm, stepped = clip_and_step(self.train_model, self.optimizer, self.scheduler, self.optim_cfg.grad_clip)
        metrics.update({"loss/grad_norm": norm, "loss/skipped": float(not stepped)})
        return metrics

    def idle_pass(self, batch: RolloutBatch, rows: torch.Tensor) -> None:
        """A forward and backward of the sharded model on one row that adds nothing to the gradient: it keeps a
        rank with fewer micro-batches in step with the others' all-gathers and reduce-scatters."""
        row = rows[:1]
        width = int(batch.attention_mask[row].sum(-1).max())
        dev = self.policy.device
        lp = self.token_logprobs(
            self.train_model,
            batch.input_ids[row, :width].to(dev),
            batch.attention_mask[row, :width].to(dev),
            batch.completion_mask[row, :width].to(dev),
            batch.group_index[row].to(dev),
        )
        (lp.sum() * 0.0).backward()

    def micro_loss(
        self, mb: MicroBatch, num_tokens: float, num_seqs: float
    ) -> tuple[torch.Tensor, dict[str, float], float | None]:
        """The registered loss on one micro-batch, normalised by the whole mini-batch's counts; also the
        max |learner - sampler| log-prob gap when this pass is the pre-update one (on-policy single step)."""
        full = None
        if "full_logits" in self.requires:
            with self.precision.autocast(mb.input_ids.device):
                full = full_logprobs(self.train_model, mb.input_ids, mb.attention_mask, self.temperature)  # (n, T, V)
            logp = full.gather(-1, mb.input_ids.unsqueeze(-1)).squeeze(-1)  # (n, T); 0 at t=0 like token_logprobs
        else:
            logp = self.token_logprobs(
                self.train_model, mb.input_ids, mb.attention_mask, mb.completion_mask, mb.prompt_group
            )  # (n, T)
        monitor, self._monitor_next = self._monitor_next, False
        ref = self.reference_logprobs(mb) if self.uses_reference or monitor else None
        with torch.no_grad():
            extra = {
                k: v for state in self.states for k, v in state.token_inputs(mb.input_ids, mb.attention_mask).items()
            }
        old = mb.old_logprobs if mb.old_logprobs is not None else logp.detach()
        inp = LossInput(
            logprobs=logp,
            old_logprobs=old,
            advantages=mb.advantages,
            mask=mb.mask,
            num_tokens=num_tokens,
            num_seqs=num_seqs,
            norm_length=float(self.norm_length),
            ref_logprobs=ref if self.uses_reference else None,
            sampled_logprobs=mb.sampled_logprobs,
            logits=full,
            **mb.sequence,
            **extra,
        )
        loss, metrics = self.loss_fn(inp, self.algo)
        if monitor:
            log_ratio = (ref - logp.detach()).clamp(-20.0, 20.0)  # log pi_ref - log pi on the sampled tokens
            metrics["kl/ref_k3"] = float(masked_mean(log_ratio.exp() - log_ratio - 1.0, mb.mask))
        if self.algo.tis_cap is not None:  # the truncated importance weights the ratio-based losses applied
            metrics["loss/tis_weight_mean"] = float(masked_mean(tis_weight(inp, self.algo), mb.mask))
        mismatch = (
            None
            if mb.old_logprobs is not None
            else float(((old - mb.sampled_logprobs).abs() * mb.completion_mask).max())
        )
        return loss, metrics, mismatch

    def state_dict(self) -> dict:
        """Optimizer, scheduler and precision state in the one-process layout (with fsdp2 the optimizer's shards
        gathered from every rank: a collective, which rank 0 starts), so any world_size and shard resume it."""
        p = self.precision
        precision = None if p.pending else {"bf16": p.dtype == torch.bfloat16, "reason": p.reason, "probe": p.probe}
        if self.pending is not None:
            optimizer, scheduler = self.pending["optimizer"], self.pending["scheduler"]
        elif fsdp.is_sharded(self.train_model):
            if isinstance(self.ranks, DataParallel):
                self.ranks.send(("state", None))
            optimizer = self.ranks.guarded(lambda: fsdp.gather_optimizer(self.train_model, self.optimizer))
            scheduler = self.scheduler.state_dict()
        else:
            optimizer, scheduler = self.optimizer.state_dict(), self.scheduler.state_dict()
        return {"optimizer": optimizer, "scheduler": scheduler, "precision": precision}

    def shard_training_copy(self) -> None:
        """fsdp2, every rank together: `train_model` becomes a sharded copy of the policy (rank 0 keeps its whole
        model beside it; the other ranks shard theirs in place) and the optimizer and scheduler are rebuilt over
        the shards, loaded from `pending` (the one-process state)."""
        state = self.pending if self.pending is not None else self.state_dict()
        self.train_model, self.optimizer = self.policy.model, None  # drop an earlier sharded copy first
        model = copy.deepcopy(self.policy.model) if self.ranks.rank == 0 else self.policy.model
        self.train_model = fsdp.shard_model(model, self.ranks.world_size, self.policy.device.type)
        self.optimizer = make_optimizer(self.train_model, self.optim_cfg)
        self.scheduler = make_scheduler(self.optimizer, self.optim_cfg, self.total_optimizer_steps)
        fsdp.load_optimizer(self.train_model, self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.pending = None
        if self.ranks.rank == 0:
            self._whole_fingerprint = fingerprint(self.policy.model)

    def check_shardable(self) -> None:
        """Refuse learner.world_size > 1 with pieces whose states the ranks would not share (a learned value model,
        running statistics: each rank would see only its micro-batches, or only rank 0 the batch)."""
        if self.ranks.world_size > 1 and self.states:
            names = ", ".join(sorted({type(s).__name__ for s in self.states}))
            raise ConfigError(
                f"learner.world_size={self.ranks.world_size}: the pieces' states ({names}) are not sharded across "
                "learner ranks yet; set learner.world_size=1 for this algorithm"
            )

    def share_update(
        self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor, rewards: Optional[torch.Tensor]
    ) -> None:
        """Rank 0: start the other learner ranks (first update) or bring them to this rank's weights and state
        (after `load_state_dict`), then send them this update's inputs."""
        par = self.ranks
        assert isinstance(par, DataParallel)
        self.check_shardable()
        if self.lockstep and not par.stale and fingerprint(self.policy.model) != self._whole_fingerprint:
            raise RuntimeError(
                "learner.shard=fsdp2: rank 0's weights changed outside Learner.update (the trained copy is the "
                "sharded one); load weights through a checkpoint resume"
            )
        if par.stale:
            reference = (
                self.reference if self.reference is not None and self.reference is not self.policy.model else None
            )
            blob = pack(
                {
                    "model": self.policy.model,
                    "reference": reference,
                    "adapters_off": self.adapters_off,
                    "learner": self.state_dict(),
                }
            )
            if par.started:
                par.send(("sync", blob))
            else:
                par.start(blob, self.cfg)
            if self.lockstep:
                par.guarded(self.shard_training_copy)
            par.stale = False
        expected = None if self.lockstep else fingerprint(self.policy.model)  # fsdp2: no replica to compare
        par.send(("update", (batch, advantages, valid, rewards, expected)))

    def load_state_dict(self, state: dict) -> None:
        if isinstance(self.ranks, DataParallel):
            self.ranks.stale = True
        if self.lockstep:  # loaded into the next sharded copy: rank 0 never holds the whole moments
            self.pending = {"optimizer": state["optimizer"], "scheduler": state["scheduler"]}
        else:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        saved = state.get("precision")
        if self.precision.pending and saved is not None:  # auto: keep the verdict the run started with
            self.precision = settled(self.policy.model, saved["bf16"], saved["reason"], saved["probe"])


def adapters_are_identity(model: torch.nn.Module) -> bool:
    """True for a peft LoRA model whose every `lora_B` weight is zero (as `get_peft_model` creates it): the model
    computes exactly its base model's function, which `model.disable_adapter()` then gives without a copy."""
    if not hasattr(model, "disable_adapter"):
        return False
    b = [p for name, p in model.named_parameters() if "lora_B" in name]
    return bool(b) and all(not bool(p.detach().any()) for p in b)


def fingerprint(model: torch.nn.Module) -> float:
    """A sum over every weight (float64): replicas that took the same steps agree on it bit for bit."""
    with torch.no_grad():
        return float(sum(p.detach().double().sum() for p in model.parameters()).item())


def serve_rank(
    rank: int, world_size: int, init_method: str, timeout_s: float, backend: str, blob: bytes, cfg: RunConfig
) -> None:
    """Learner rank 1..N-1 (a process spawned by rank 0's `DataParallel`): a replica built from rank 0's model,
    reference and learner state (`blob`), which takes rank 0's updates in step with it until told to stop. Any
    failure prints one line and exits with status 1, which rank 0 reports. Ctrl-C is rank 0's to handle (a terminal
    sends SIGINT to every rank): this rank ignores it and stops when rank 0 says so or goes away, so rank 0's save at
    the next clean point can still gather this rank's optimizer shards (`learner.shard=fsdp2`)."""
    import signal
    import sys

    import torch.distributed as dist

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        control = init_group(rank, world_size, init_method, timeout_s, backend)
        ranks = Ranks(rank, world_size, cfg.learner.shard)
        learner = replica(unpack(blob, device), cfg, ranks)
        while True:
            kind, payload = receive(control)
            if kind == "stop":
                break
            if kind == "sync":
                learner = replica(unpack(payload, device), cfg, ranks)
                continue
            if kind == "state":  # fsdp2: rank 0 gathers the optimizer's shards for a checkpoint
                learner.state_dict()
                continue
            batch, advantages, valid, rewards, expected = payload
            if expected is not None and fingerprint(learner.policy.model) != expected:
                raise RuntimeError("this replica's weights differ from rank 0's (changed outside Learner.update)")
            learner.update(batch, advantages, valid, rewards)
    except Exception as err:  # noqa: BLE001 - one line for the log; rank 0 reports the exit
        print(
            f"ascent learner rank {rank}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            file=sys.stderr,
        )
        sys.exit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def replica(state: dict, cfg: RunConfig, ranks: Ranks) -> "Learner":
    """A learner rank's replica of rank 0's learner: its model, frozen reference and optimizer/scheduler state."""
    learner = Learner(Policy(model=state["model"], tokenizer=None), cfg, ranks=ranks)
    learner.adapters_off = state["adapters_off"]
    if state["reference"] is not None:
        learner.reference = state["reference"]
    elif learner.adapters_off and learner.reference is not None:
        learner.reference = learner.policy.model  # under reference_mode, as on rank 0
    learner.load_state_dict(state["learner"])
    if learner.lockstep:
        learner.shard_training_copy()
    return learner
