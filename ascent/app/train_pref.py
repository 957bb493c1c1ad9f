"""`ascent train-pref`: offline preference optimisation of the policy (DPO, IPO, SimPO, cDPO) on preference pairs.

    pairs (pairs.file, or made from the task's verifier, as `ascent train-rm`)
      -> policy π_θ (pref.init, or the recipe's warm start trained first) and its frozen copy π_ref
      -> reference log-probs of every pair, once (none for reference-free losses)
      -> steps x [batch_size pairs in micro-batches: loss(PreferenceInput), AdamW]
      -> OUT/ a run directory: config.yaml, checkpoints/step_N/ (the policy, LoRA merged), metrics.jsonl,
         summary.json with held-out pair accuracy of the implicit reward and greedy accuracy before and after

A pair's sequences are laid out as RL's are (`assemble`): the prompt encoded by the run's `PromptEncoder` (chat
template and system prompt included), the completion's tokens and EOS after it; log π(y | x) is the sum of the
teacher-forced token log-probs (`token_logprobs`, temperature 1) over the completion's tokens. `ascent eval OUT`
and `ascent export OUT` read the result like any run.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import yaml

from ascent.algorithms.preference import PREFERENCE_LOSSES, PreferenceInput
from ascent.app.export import policy_at
from ascent.app.pairs import PreferencePair, load_pairs
from ascent.app.pipeline import Run, evaluate, peak_rss_mb, prepare, warmstart
from ascent.app.runs import RunDirError, find_config, make_private_dir, read_run_config, remove_marked_dir
from ascent.app.train_rm import batches
from ascent.config.loader import to_dict
from ascent.config.preference import PrefJob
from ascent.config.schema import RunConfig
from ascent.data.prompts import PromptEncoder
from ascent.logging import jsonsafe
from ascent.logging.metrics import console
from ascent.policy.model import Policy, add_lora, count_parameters, token_logprobs
from ascent.rollout.batch import assemble
from ascent.rollout.types import Generation, RolloutBatch
from ascent.trainer.checkpoint import Checkpointer, write_text_atomic
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler
from ascent.typed import ConfigError

PreferenceLoss = Callable[[PreferenceInput], tuple[torch.Tensor, dict[str, float]]]


def encode_pairs(encoder: PromptEncoder, tokenizer: Any, pairs: list[PreferencePair]) -> RolloutBatch:
    """The 2P sequences of P pairs (chosen ones first, then rejected), laid out as a rollout batch: prompt ids,
    then the completion's ids and EOS, which `completion_mask` marks."""
    prompts = [p.prompt for p in pairs] * 2
    completions = [encoder.completion(p.chosen) for p in pairs] + [encoder.completion(p.rejected) for p in pairs]
    width = max(len(c) for c in completions)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    tokens = torch.full((len(completions), width), int(pad), dtype=torch.long)  # (2P, C)
    for i, c in enumerate(completions):
        tokens[i, : len(c)] = torch.tensor(c)
    gen = Generation(
        tokens=tokens,
        logprobs=torch.zeros(tokens.shape),
        lengths=torch.tensor([len(c) for c in completions]),
        finished=torch.ones(len(completions), dtype=torch.bool),
    )
    return assemble(prompts, [encoder(p) for p in prompts], [{} for _ in prompts], gen, 1, tokenizer)


def sequence_logprobs(model: torch.nn.Module, batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) log π(completion | prompt) of each row (summed token log-probs) and (N,) its completion tokens."""
    dev = next(model.parameters()).device
    mask = batch.completion_mask.to(dev)  # (N, T)
    logp = token_logprobs(model, batch.input_ids.to(dev), batch.attention_mask.to(dev))  # (N, T)
    return (logp * mask).sum(-1), mask.sum(-1)


def pair_input(
    model: torch.nn.Module,
    encoder: PromptEncoder,
    tokenizer: Any,
    pairs: list[PreferencePair],
    refs: Optional[torch.Tensor],
) -> PreferenceInput:
    """The loss input of `pairs`: the policy's sequence log-probs (one forward of the 2P sequences) and the
    reference's `refs` (P, 2) = [chosen, rejected] (None: a reference-free loss)."""
    logp, tokens = sequence_logprobs(model, encode_pairs(encoder, tokenizer, pairs))  # (2P,)
    n = len(pairs)
    ref = refs.to(logp.device) if refs is not None else None
    return PreferenceInput(
        policy_chosen=logp[:n],
        policy_rejected=logp[n:],
        ref_chosen=None if ref is None else ref[:, 0],
        ref_rejected=None if ref is None else ref[:, 1],
        chosen_tokens=tokens[:n],
        rejected_tokens=tokens[n:],
    )


@torch.no_grad()
def reference_logprobs(
    model: torch.nn.Module, encoder: PromptEncoder, tokenizer: Any, pairs: list[PreferencePair], mb: int
) -> torch.Tensor:
    """(P, 2) log π(chosen | x), log π(rejected | x) under `model` (the reference: the policy before training)."""
    was = model.training
    model.eval()
    out = []
    for i in range(0, len(pairs), mb):
        logp, _ = sequence_logprobs(model, encode_pairs(encoder, tokenizer, pairs[i : i + mb]))
        out.append(logp.view(2, -1).T.cpu())  # (p, 2)
    model.train(was)
    return torch.cat(out)


def accumulate(
    model: torch.nn.Module,
    loss_fn: PreferenceLoss,
    encoder: PromptEncoder,
    tokenizer: Any,
    pairs: list[PreferencePair],
    refs: Optional[torch.Tensor],
    micro_batch_size: int,
) -> dict[str, float]:
    """Backward of the batch's mean loss in micro-batches, each weighted by its share of the pairs (every loss
    is a mean over pairs, so the gradient is the one of a single forward of the batch). Returns the batch's
    metrics (pair-weighted means)."""
    sums: dict[str, float] = {}
    for i in range(0, len(pairs), micro_batch_size):
        part = pairs[i : i + micro_batch_size]
        w = len(part) / len(pairs)
        loss, m = loss_fn(
            pair_input(model, encoder, tokenizer, part, None if refs is None else refs[i : i + len(part)])
        )
        (loss * w).backward()
        sums = {k: sums.get(k, 0.0) + v * w for k, v in m.items()}
    return sums


@torch.no_grad()
def pair_metrics(
    model: torch.nn.Module,
    loss_fn: PreferenceLoss,
    encoder: PromptEncoder,
    tokenizer: Any,
    pairs: list[PreferencePair],
    refs: Optional[torch.Tensor],
    mb: int,
) -> dict[str, float]:
    """The loss's `pref/` metrics over all `pairs` (pair-weighted), without gradients, in eval mode."""
    was = model.training
    model.eval()
    sums: dict[str, float] = {}
    for i in range(0, len(pairs), mb):
        part = pairs[i : i + mb]
        _, m = loss_fn(pair_input(model, encoder, tokenizer, part, None if refs is None else refs[i : i + len(part)]))
        sums = {k: sums.get(k, 0.0) + v * len(part) / len(pairs) for k, v in m.items()}
    model.train(was)
    return sums


def verifier_labels(
    pairs: list[PreferencePair], refs: Optional[torch.Tensor]
) -> tuple[list[PreferencePair], Optional[torch.Tensor]]:
    """The pairs with the noisy labeller's flips undone (and their reference columns swapped to match)."""
    fixed = [replace(p, chosen=p.rejected, rejected=p.chosen, flipped=False) if p.flipped else p for p in pairs]
    if refs is None:
        return fixed, None
    flipped = torch.tensor([p.flipped for p in pairs])
    return fixed, torch.where(flipped[:, None], refs.flip(-1), refs)


def out_config(job: PrefJob) -> RunConfig:
    """The config.yaml of the output run: the recipe's, with a `model` that builds the saved policy (the init
    run's model, or the HF folder `pref.init`; LoRA off: adapters are merged when saved) and no warm start of its
    own when `pref.init` is given."""
    run, init = job.run, job.pref.init
    if init is None:
        return run
    try:
        init_dir, _ = find_config(Path(init))
    except FileNotFoundError:
        model = replace(run.model, source="hf", path=str(Path(init).resolve()))
    else:
        model = replace(read_run_config(init_dir).model, device=run.model.device)
    model = replace(model, lora=replace(model.lora, enabled=False))
    return replace(run, model=model, warmstart=replace(run.warmstart, steps=0, init_from=None))


def check_out(job: PrefJob) -> None:
    """Refuse an existing non-empty `out` unless pref.overwrite (and then one that holds pref.init); clear it."""
    out = job.out_dir
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not job.pref.overwrite:
        raise RunDirError(f"{out} already exists; set pref.overwrite=true or choose another pref.out")
    init = Path(job.pref.init).resolve() if job.pref.init else None
    if not out.is_dir() or (init is not None and (init == out.resolve() or out.resolve() in init.parents)):
        raise RunDirError(f"{out} is not a directory or holds pref.init; choose another pref.out")
    remove_marked_dir(out, "an output of ascent train-pref")


def starting_policy(job: PrefJob, run: Run, built: Policy, init: Optional[Policy]) -> Policy:
    """The policy to optimise (also the reference): `init` (the policy at `pref.init`, its tokenizer checked
    against the run's), else the recipe's warm start trained into the output run (`built` as configured when
    warmstart.steps=0); LoRA adapters added with `pref.lora`, else every weight trainable."""
    if init is not None:
        policy = init
        if policy.tokenizer.get_vocab() != built.tokenizer.get_vocab():
            raise ConfigError(
                f"pref.init={job.pref.init!r} has another tokenizer than the recipe's task; give the recipe "
                "(data.task, model) the init was trained with"
            )
        policy.model.to(run.cfg.model.device)
    else:
        policy = built
        if run.cfg.warmstart.steps or run.cfg.warmstart.init_from:
            warmstart(run, policy)
    if job.pref.lora:
        torch.manual_seed(job.pref_seed)
        return Policy(model=add_lora(policy.model, run.cfg.model), tokenizer=policy.tokenizer)
    policy.model.requires_grad_(True)
    return policy


class PairSets:
    """The pairs a run evaluates on, with their reference log-probs: held-out, training (labels as given), and
    training with the noisy labeller's flips undone (the verifier's labels; only when some were flipped)."""

    def __init__(
        self,
        policy: Policy,
        run: Run,
        train: list[PreferencePair],
        held: list[PreferencePair],
        mb: int,
        reference: bool,
    ) -> None:
        tok, enc = policy.tokenizer, run.encoder
        ref = (lambda ps: reference_logprobs(policy.model, enc, tok, ps, mb)) if reference else (lambda ps: None)
        self.train, self.held, self.ref_train, self.ref_held = train, held, ref(train), ref(held)
        self.sets = {"pair": (held, self.ref_held), "train_pair": (train, self.ref_train)}
        if any(p.flipped for p in train):
            self.sets["train_pair_verifier"] = verifier_labels(train, self.ref_train)

    def metrics(self, policy: Policy, run: Run, loss_fn: PreferenceLoss, mb: int) -> dict[str, float]:
        """{'pair_accuracy', 'pair_margin', 'train_pair_accuracy', ...}: the loss's implicit-reward accuracy and
        margin on each set."""
        out = {}
        for name, (pairs, refs) in self.sets.items():
            m = pair_metrics(policy.model, loss_fn, run.encoder, policy.tokenizer, pairs, refs, mb)
            out[f"{name}_accuracy"], out[f"{name}_margin"] = m["pref/accuracy"], m["pref/margin"]
        return out


def snapshot(run: Run, policy: Policy, sets: PairSets, loss_fn: PreferenceLoss, mb: int, pass_k: bool) -> dict:
    """Held-out greedy evaluation of the task (`ascent.trainer.evaluate`) and the pair metrics, together."""
    out = {**evaluate(run, policy, pass_k=pass_k), **sets.metrics(policy, run, loss_fn, mb)}
    policy.model.train()
    return out


def fit(job: PrefJob, run: Run, policy: Policy, loss_fn: PreferenceLoss, sets: PairSets) -> list[dict[str, Any]]:
    """`pref.steps` optimizer steps of `pref.batch_size` pairs; logs phase `pref` to metrics.jsonl and returns
    the evaluation curve (every `pref.eval_every` steps)."""
    cfg, model = job.pref, policy.model
    opt = make_optimizer(model, cfg.optim)
    sched = make_scheduler(opt, cfg.optim, cfg.steps)
    order, curve = batches(list(range(len(sets.train))), cfg.batch_size, job.pref_seed), []
    model.train()
    for step in range(1, cfg.steps + 1):
        idx = next(order)
        refs = None if sets.ref_train is None else sets.ref_train[idx]
        lr = sched.get_last_lr()[0]
        m = accumulate(
            model, loss_fn, run.encoder, policy.tokenizer, [sets.train[i] for i in idx], refs, cfg.micro_batch_size
        )
        norm, stepped = clip_and_step(model, opt, sched, cfg.optim.grad_clip)
        m.update({"pref/grad_norm": norm, "optim/lr": lr, "pref/skipped": float(not stepped)})
        if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
            point = snapshot(run, policy, sets, loss_fn, cfg.micro_batch_size, pass_k=False)
            curve.append({"step": step, **point})
            m.update({f"eval/{k}": v for k, v in point.items()})
            console.print(
                f"pref step {step}/{cfg.steps}  loss {m['pref/loss']:.4f}  held-out pair accuracy "
                f"{point['pair_accuracy']:.3f}  greedy accuracy {point['accuracy']:.3f}"
            )
        run.logger.log("pref", step, m)
    return curve


def save_policy(out: Path, policy: Policy, step: int, state: dict[str, Any]) -> Path:
    """The trained policy as the output run's checkpoints/step_N (LoRA adapters merged), atomically."""
    model = policy.model.merge_and_unload() if hasattr(policy.model, "merge_and_unload") else policy.model
    return Checkpointer(out / "checkpoints", keep=1).save(step, Policy(model=model, tokenizer=policy.tokenizer), state)


def train_pref(job: PrefJob) -> dict[str, Any]:
    """Read or make the pairs, optimise the policy with `pref.loss`, write the output run; returns its summary."""
    check_out(job)
    t0 = time.perf_counter()
    loss_fn = PREFERENCE_LOSSES.resolve(job.pref.loss, key="pref.loss")
    train, held = load_pairs(job)
    init = policy_at(job.pref.init, job.run) if job.pref.init is not None else None
    cfg, out = out_config(job), job.out_dir
    make_private_dir(out, "pref")
    write_text_atomic(out / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    run, built = prepare(cfg, out, {})
    policy = starting_policy(job, run, built, init)
    mb = job.pref.micro_batch_size
    sets = PairSets(policy, run, train, held, mb, reference=not getattr(loss_fn.fn, "reference_free", False))
    console.print(
        f"[bold]ascent train-pref[/bold] {loss_fn.spec} -> [cyan]{out}[/cyan]: {len(train)} training pairs "
        f"({sum(p.flipped for p in train)} flipped), {len(held)} held-out; "
        f"{count_parameters(policy.model, trainable_only=True):,} trainable parameters; "
        f"{job.pref.steps} steps x {job.pref.batch_size} pairs in micro-batches of {mb}"
    )
    before = snapshot(run, policy, sets, loss_fn, mb, pass_k=True)
    t1 = time.perf_counter()
    curve = fit(job, run, policy, loss_fn, sets)
    seconds = time.perf_counter() - t1
    after = snapshot(run, policy, sets, loss_fn, mb, pass_k=True)
    folder = save_policy(out, policy, job.pref.steps, {"pref": asdict(job.pref), "pairs": asdict(job.pairs)})
    summary = {
        "name": cfg.name,
        "seed": cfg.seed,
        "loss": loss_fn.spec,
        "init": job.pref.init,
        "checkpoint": str(folder),
        "steps": job.pref.steps,
        **{f"{k}_before": v for k, v in before.items()},
        **{f"{k}_after": v for k, v in after.items()},
        "curve": curve,
        "train_pairs": len(train),
        "flipped_pairs": sum(p.flipped for p in train),
        "held_out_pairs": len(held),
        "pref_seconds": round(seconds, 2),
        "warmstart_seconds": round(run.state.get("warmstart_seconds", 0.0), 2),
        "wall_seconds": round(time.perf_counter() - t0, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    write_text_atomic(out / "summary.json", jsonsafe.dumps(summary, indent=2))
    run.state.update(pref_done=True, pref_seconds=seconds)
    run.save_state()
    return summary
