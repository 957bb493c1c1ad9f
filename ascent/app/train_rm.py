"""`ascent train-rm`: train a Bradley–Terry reward model from preference pairs and save it as a reward folder.

    pairs (pairs.file, or made from the task's verifier) -> trunk (scratch / run / HF folder, optional LoRA)
      -> steps x [batch_size pairs in micro-batches: L = -log σ(r_c - r_r - m), AdamW] -> held-out pair accuracy
      -> OUT/ (trunk save_pretrained + reward_head.safetensors + reward_model.json + the pairs used), atomically

The model and its loss are `ascent.rewards.reward_model`; `reward=rm:OUT` scores with the result.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from safetensors.torch import save_file

from ascent.app.export import policy_at, save_tokenizer
from ascent.app.pairs import PreferencePair, load_pairs, write_pairs
from ascent.app.runs import RunDirError
from ascent.config.reward_model import RewardModelJob
from ascent.logging.metrics import console
from ascent.policy.model import Policy, build_policy, count_parameters
from ascent.rewards.reward_model import FORMAT, HEAD_FILE, META_FILE, VERSION, RewardModel, bt_loss, encode, score
from ascent.tasks import load_task
from ascent.trainer.checkpoint import save_folder_atomic
from ascent.trainer.optim import clip_and_step, make_optimizer, make_scheduler


def trunk_policy(job: RewardModelJob) -> Policy:
    """The causal LM the reward model starts from (`rm.init`, else a scratch model of the recipe's `model.*`)
    and its tokenizer, LoRA adapters merged, on the recipe's `model.device`."""
    run = job.run
    if job.rm.init is not None:
        policy = policy_at(job.rm.init, run)
    else:
        task = load_task(run.data, run.seed if run.data.split_seed is None else run.data.split_seed)
        model_cfg = replace(run.model, lora=replace(run.model.lora, enabled=False), device="cpu")
        policy = build_policy(model_cfg, task.tokenizer, job.rm_seed)
    return Policy(model=policy.model.float().to(run.model.device), tokenizer=policy.tokenizer)


def reward_model_of(job: RewardModelJob, policy: Policy) -> RewardModel:
    """The reward model on `policy`'s trunk: all weights trainable, or (`rm.lora`) LoRA adapters with the
    recipe's `model.lora` settings, plus the head."""
    torch.manual_seed(job.rm_seed)
    lm = policy.model
    if not job.rm.lora:
        lm.requires_grad_(True)
        return RewardModel(lm)
    from peft import LoraConfig, get_peft_model

    lora = job.run.model.lora
    lm.requires_grad_(False)
    trunk = get_peft_model(
        lm.base_model,
        LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=lora.target_modules),
    )
    return RewardModel(lm, trunk)


def pair_batch_loss(
    rm: RewardModel, tokenizer: Any, pairs: list[PreferencePair], max_length: int, use_margin: bool
) -> tuple[torch.Tensor, dict[str, float]]:
    """The Bradley–Terry loss of `pairs`: chosen and rejected scored in one forward of 2P sequences."""
    prompts = [p.prompt for p in pairs] * 2
    completions = [p.chosen for p in pairs] + [p.rejected for p in pairs]
    ids, mask = encode(tokenizer, prompts, completions, max_length)  # (2P, T)
    device = rm.head.weight.device
    scores = rm(ids.to(device), mask.to(device))  # (2P,)
    margin = torch.tensor([p.margin or 0.0 for p in pairs], device=device) if use_margin else None
    return bt_loss(scores[: len(pairs)], scores[len(pairs) :], margin)


def pair_accuracy(rm: RewardModel, tokenizer: Any, pairs: list[PreferencePair], mb: int, max_length: int) -> float:
    """Share of pairs whose chosen completion the model scores strictly higher than the rejected one."""
    prompts = [p.prompt for p in pairs]
    chosen = score(rm, tokenizer, prompts, [p.chosen for p in pairs], mb, max_length)
    rejected = score(rm, tokenizer, prompts, [p.rejected for p in pairs], mb, max_length)
    return sum(c > r for c, r in zip(chosen, rejected)) / len(pairs)


def batches(pairs: list[PreferencePair], size: int, seed: int):
    """Endless batches of `size` pairs: a seeded shuffle per epoch, taken in order."""
    rng, order = random.Random(seed), []
    while True:
        if len(order) < size:
            order += rng.sample(range(len(pairs)), len(pairs))
            continue
        yield [pairs[i] for i in order[:size]]
        del order[:size]


def fit(
    job: RewardModelJob,
    rm: RewardModel,
    tokenizer: Any,
    train: list[Any],
    held: list[Any],
    batch_loss: Optional[Callable[[list[Any]], tuple[torch.Tensor, dict[str, float]]]] = None,
    held_out: Optional[Callable[[], dict[str, float]]] = None,
) -> dict[str, Any]:
    """Train `rm` for `rm.steps` optimizer steps; returns the final held-out metrics, their curve, the last step's
    training metrics and the max length. By default on preference pairs (Bradley–Terry loss, held-out pair
    accuracy); `batch_loss(examples) -> (loss, metrics)` and `held_out() -> metrics` train on other examples
    (the process reward model of `ascent train-prm`)."""
    cfg, max_length = job.rm, job.rm.max_length or int(rm.lm.config.max_position_embeddings)

    def pair_loss(micro: list[PreferencePair]) -> tuple[torch.Tensor, dict[str, float]]:
        return pair_batch_loss(rm, tokenizer, micro, max_length, cfg.use_margin)

    def pair_scores() -> dict[str, float]:
        return {"pair_accuracy": pair_accuracy(rm, tokenizer, held, cfg.score_micro_batch_size, max_length)}

    batch_loss, held_out = batch_loss or pair_loss, held_out or pair_scores
    opt = make_optimizer(rm, cfg.optim)
    sched = make_scheduler(opt, cfg.optim, cfg.steps)
    draw, curve, metrics = batches(train, cfg.batch_size, job.rm_seed), [], {}
    rm.train()
    for step in range(1, cfg.steps + 1):
        batch, sums = next(draw), {}
        for i in range(0, len(batch), cfg.micro_batch_size):
            micro = batch[i : i + cfg.micro_batch_size]
            loss, m = batch_loss(micro)
            (loss * len(micro) / len(batch)).backward()
            sums = {k: sums.get(k, 0.0) + v * len(micro) / len(batch) for k, v in m.items()}
        norm, _ = clip_and_step(rm, opt, sched, cfg.optim.grad_clip)
        metrics = {**sums, "rm/grad_norm": norm}
        if step == cfg.steps or (cfg.eval_every and step % cfg.eval_every == 0):
            scores = held_out()
            curve.append({"step": step, **scores})
            shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k.endswith(("/loss", "/accuracy")))
            console.print(
                f"rm step {step}/{cfg.steps}  {shown}  held-out "
                + "  ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in scores.items())
            )
            rm.train()
    return {**scores, "curve": curve, "last_step": metrics, "max_length": max_length}


def save_reward_model(
    out: Path,
    rm: RewardModel,
    tokenizer: Any,
    meta: dict[str, Any],
    pairs: dict[str, list],
    write_extra: Optional[Callable[[Path], None]] = None,
) -> Path:
    """Write the reward-model folder atomically (see ascent.rewards.reward_model); LoRA adapters are merged;
    `write_extra(folder)` adds files of its own (the step data of a process reward model)."""
    lm = rm.lm
    if rm.trunk is not lm.base_model and hasattr(rm.trunk, "merge_and_unload"):
        rm.trunk.merge_and_unload()  # folds the adapters into lm's own layers, in place

    def write(tmp: Path) -> None:
        lm.save_pretrained(tmp, safe_serialization=True)
        save_tokenizer(tokenizer, tmp)
        save_file({k: v.detach().cpu().contiguous() for k, v in rm.head.state_dict().items()}, str(tmp / HEAD_FILE))
        for name, rows in pairs.items():
            write_pairs(rows, tmp / f"pairs.{name}.jsonl")
        if write_extra is not None:
            write_extra(tmp)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")

    return save_folder_atomic(out, write)


def train_rm(job: RewardModelJob) -> dict[str, Any]:
    """Make or read the pairs, train the reward model, save it to `job.out_dir`; returns reward_model.json."""
    out = job.out_dir
    if out.exists() and any(out.iterdir()) and not job.rm.overwrite:
        raise RunDirError(f"{out} already exists; set rm.overwrite=true or choose another rm.out")
    t0 = time.perf_counter()
    train, held = load_pairs(job)
    policy = trunk_policy(job)
    rm = reward_model_of(job, policy)
    console.print(
        f"[bold]ascent train-rm[/bold] -> [cyan]{out}[/cyan]: {len(train)} training pairs "
        f"({sum(p.flipped for p in train)} flipped), {len(held)} held-out; "
        f"{count_parameters(rm, trainable_only=True):,} trainable parameters; "
        f"{job.rm.steps} steps x {job.rm.batch_size} pairs in micro-batches of {job.rm.micro_batch_size}"
    )
    result = fit(job, rm, policy.tokenizer, train, held)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "hidden_size": int(rm.lm.config.hidden_size),
        "max_length": result["max_length"],
        "micro_batch_size": job.rm.score_micro_batch_size,
        "pair_accuracy": result["pair_accuracy"],
        "pair_accuracy_curve": result["curve"],
        "train_pairs": len(train),
        "held_out_pairs": len(held),
        "flipped_pairs": sum(p.flipped for p in train),
        "last_step": result["last_step"],
        "init": job.rm.init,
        "recipe": job.run.name,
        "pairs": asdict(job.pairs),
        "rm": asdict(job.rm),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    save_reward_model(out, rm, policy.tokenizer, meta, {"train": train, "eval": held})
    return meta
