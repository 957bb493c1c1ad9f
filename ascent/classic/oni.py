"""ONI (Zheng, Henaff, Zhang, Grover & Amos 2024, "Online Intrinsic Rewards for Decision Making Agents from Large
Language Model Feedback", arXiv:2410.23022): while the policy trains, the messages of the experience it collects
are sent to an annotator that runs asynchronously beside it; the annotations are distilled into an intrinsic reward
model, whose reward is added to the sparse extrinsic one.

ascent's reading (the classification variant of the paper):
- The annotator is a scripted, LLM-free labeller (`annotate`): a message is labelled 1 when it reports progress
  toward the task ("pick up", "unlock", "open" and the like), else 0. It stands where the paper's LLM server stands
  (Llama-3.1-8B prompted to say whether a NetHack message is helpful); no language model is involved here.
- Asynchrony: each iteration the messages never seen before are submitted to a one-worker thread pool running the
  annotator; their labels are collected `annotation_delay` iterations later (the policy meanwhile trains on the
  reward model's predictions, which cover unlabelled messages by generalisation). Collecting at a fixed iteration
  keeps runs reproducible, where the paper's server answers whenever it is done.
- Reward model: a hashed bag of words and word pairs of the message -> MLP -> logit, trained by binary
  cross-entropy on every labelled message for `reward_epochs` passes per iteration (the paper: a character CNN).
- Intrinsic reward (the paper's classification reward with its episodic count normalisation):
  r_int = intrinsic_coef * 1[sigmoid(logit) > threshold] / N_episode(message)^count_exponent, 0 for no message;
  PPO learns from r_ext + r_int (the extrinsic coefficient 1).
"""

from __future__ import annotations

import re
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ascent import papers
from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.networks import adam, mlp
from ascent.classic.ppo import PPO, PPOParams, check

PROGRESS = ("pick up", "unlock", "open", "you find", "you descend", "welcome")
"""Phrases the scripted annotator takes as progress (case-insensitive)."""


def annotate(message: str) -> int:
    """The scripted annotator: 1 when the message reports progress, else 0.

    >>> annotate("You pick up the red key."), annotate("The red door is locked."), annotate("You feel a draft.")
    (1, 0, 0)
    """
    text = message.lower()
    return int(any(p in text for p in PROGRESS))


def message_features(message: str, dim: int) -> np.ndarray:
    """A hashed bag of the message's lower-case words and adjacent word pairs, (dim,) float32 (crc32: stable
    across processes, unlike Python's hash).

    >>> f = message_features("You pick up the key.", 64)
    >>> float(f.sum()), f.shape
    (9.0, (64,))
    """
    words = re.findall(r"[a-z]+", message.lower())
    out = np.zeros(dim, np.float32)
    for token in words + [a + " " + b for a, b in zip(words, words[1:])]:
        out[zlib.crc32(token.encode()) % dim] += 1.0
    return out


def intrinsic_rewards(
    positive: np.ndarray, counts: np.ndarray, coef: float, exponent: float, has_message: np.ndarray
) -> np.ndarray:
    """coef * positive / count^exponent where a message was shown, else 0 (all (E,)).

    >>> intrinsic_rewards(np.array([1.0, 1.0, 0.0]), np.array([1, 4, 1]), 0.1, 0.5, np.array([True, True, True]))
    array([0.1 , 0.05, 0.  ])
    """
    return np.where(has_message, coef * positive / np.maximum(counts, 1) ** exponent, 0.0)


@dataclass(frozen=True)
class ONIParams(PPOParams):
    """ONI (Zheng et al. 2024, arXiv:2410.23022): PPO's parameters for the policy, plus the annotator and the
    intrinsic reward model."""

    intrinsic_coef: float = 0.1
    """Weight of the intrinsic reward, >= 0 (0: extrinsic-only PPO)."""
    threshold: float = 0.5
    """A message is rewarded when the reward model's probability exceeds this, in (0, 1)."""
    count_exponent: float = 0.5
    """The reward is divided by (times the message was shown in this episode)^count_exponent, >= 0."""
    annotation_delay: int = 1
    """Iterations between submitting a message to the annotator and using its label, >= 0."""
    feature_dim: int = 128
    """Buckets of the hashed message features."""
    reward_hidden: list[int] = field(default_factory=lambda: [64])
    """Hidden widths of the reward model (ReLU)."""
    reward_lr: float = 1e-3
    """Adam learning rate of the reward model, > 0."""
    reward_epochs: int = 4
    """Passes over the labelled messages per iteration, >= 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.intrinsic_coef < 0 or self.count_exponent < 0 or self.annotation_delay < 0 or self.reward_epochs < 0:
            raise ValueError("intrinsic_coef, count_exponent, annotation_delay and reward_epochs must be >= 0")
        if not 0.0 < self.threshold < 1.0 or not self.reward_lr > 0 or self.feature_dim <= 0:
            raise ValueError(f"threshold must be in (0, 1), reward_lr and feature_dim > 0, got {self.threshold}")
        if not self.reward_hidden or min(self.reward_hidden) <= 0:
            raise ValueError(f"reward_hidden must list positive layer widths, got {self.reward_hidden}")


class ONI(PPO):
    """PPO on r_ext + r_int, r_int from a reward model distilled online from an asynchronous annotator."""

    def __init__(self, ctx: ClassicContext, params: ONIParams) -> None:
        super().__init__(ctx, params)
        p = params
        self.reward_model = mlp([p.feature_dim, *p.reward_hidden, 1], "relu")
        self.reward_opt = adam(list(self.reward_model.parameters()), p.reward_lr)
        self.labels: dict[str, int] = {}
        """The annotations received so far: message -> 0/1."""
        self.pending: list[tuple[int, list[str]]] = []
        """(iteration submitted, messages) sent to the annotator and not yet collected."""
        self.seen: set[str] = set()
        self.iterations = 0
        self.episode_counts: list[dict[str, int]] = [{} for _ in range(ctx.envs.num_envs)]
        self.new_messages: list[str] = []
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oni-annotator")
        self.futures: dict[int, Future] = {}
        self.cache: dict[str, bool] = {}
        self.intrinsic_sum, self.intrinsic_n = 0.0, 0

    # ----- the annotator -----
    def submit(self) -> None:
        if self.new_messages:
            batch = list(self.new_messages)
            self.pending.append((self.iterations, batch))
            self.futures[self.iterations] = self.pool.submit(lambda b=batch: [annotate(m) for m in b])
            self.new_messages = []

    def collect_labels(self) -> int:
        """Labels of the batches submitted annotation_delay or more iterations ago (waits for them if needed)."""
        got, keep = 0, []
        for it, batch in self.pending:
            if self.iterations - it >= self.p.annotation_delay:
                future = self.futures.pop(it, None)
                labels = future.result() if future else [annotate(m) for m in batch]  # resumed: resubmit inline
                self.labels.update(zip(batch, labels))
                got += len(batch)
            else:
                keep.append((it, batch))
        self.pending = keep
        return got

    # ----- the reward model -----
    def positive(self, messages: list[str]) -> np.ndarray:
        """1.0 where the reward model classifies the message as progress (cached per iteration)."""
        todo = [m for m in dict.fromkeys(messages) if m not in self.cache]
        if todo:
            x = torch.from_numpy(np.stack([message_features(m, self.p.feature_dim) for m in todo]))
            with torch.no_grad():
                probs = torch.sigmoid(self.reward_model(x)).squeeze(-1)
            self.cache.update(zip(todo, (probs > self.p.threshold).tolist()))
        return np.array([float(self.cache[m]) for m in messages], np.float32)

    def train_reward_model(self) -> float:
        if not self.labels or self.p.reward_epochs == 0:
            return 0.0
        msgs = list(self.labels)
        x = torch.from_numpy(np.stack([message_features(m, self.p.feature_dim) for m in msgs]))
        y = torch.tensor([float(self.labels[m]) for m in msgs])
        for _ in range(self.p.reward_epochs):
            loss = F.binary_cross_entropy_with_logits(self.reward_model(x).squeeze(-1), y)
            self.reward_opt.zero_grad(set_to_none=True)
            loss.backward()
            self.reward_opt.step()
        self.cache = {}
        return loss.item()

    def reward(self, obs: torch.Tensor, action: torch.Tensor, step: Any) -> torch.Tensor:
        extrinsic = torch.from_numpy(step.reward)
        if step.messages is None or self.p.intrinsic_coef == 0:
            return extrinsic
        msgs = step.messages
        counts = np.zeros(len(msgs), np.int64)
        for i, m in enumerate(msgs):
            if m:
                counts[i] = self.episode_counts[i][m] = self.episode_counts[i].get(m, 0) + 1
                if m not in self.seen:
                    self.seen.add(m)
                    self.new_messages.append(m)
            if step.terminated[i] or step.truncated[i]:
                self.episode_counts[i] = {}
        has = np.array([bool(m) for m in msgs])
        r_int = intrinsic_rewards(self.positive(msgs), counts, self.p.intrinsic_coef, self.p.count_exponent, has)
        self.intrinsic_sum += float(r_int.sum())
        self.intrinsic_n += len(msgs)
        return extrinsic + torch.from_numpy(r_int.astype(np.float32))

    def iteration(self, want_metrics: bool) -> dict[str, float]:
        metrics = super().iteration(want_metrics)  # collect (rewards through `reward`) + PPO epochs
        self.submit()
        self.iterations += 1
        got = self.collect_labels()
        loss = self.train_reward_model()
        if not want_metrics:
            return metrics
        r_int = self.intrinsic_sum / max(1, self.intrinsic_n)
        self.intrinsic_sum, self.intrinsic_n = 0.0, 0
        extra = {"oni/labels": float(len(self.labels)), "oni/new_labels": float(got), "oni/intrinsic_mean": r_int}
        return {**metrics, **extra, "loss/reward_model": loss}

    def modules(self) -> dict[str, torch.nn.Module]:
        return {**super().modules(), "reward_model": self.reward_model}

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "reward_opt": self.reward_opt.state_dict(),
            "labels": dict(self.labels),
            "pending": [(it, list(b)) for it, b in self.pending],
            "new_messages": list(self.new_messages),
            "seen": sorted(self.seen),
            "iterations": self.iterations,
            "episode_counts": [dict(c) for c in self.episode_counts],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.reward_opt.load_state_dict(state["reward_opt"])
        self.labels, self.pending = dict(state["labels"]), [(it, list(b)) for it, b in state["pending"]]
        self.new_messages, self.seen = list(state["new_messages"]), set(state["seen"])
        self.iterations, self.episode_counts = state["iterations"], [dict(c) for c in state["episode_counts"]]
        self.futures, self.cache = {}, {}


@CLASSIC.register(
    "oni",
    params=ONIParams,
    paper=papers.ONI,
    fidelity="ascent",
    departures=(
        "the annotator is a scripted, LLM-free labeller (progress phrases such as 'pick up', 'unlock'), not the "
        "paper's LLM server; it runs in a worker thread, but its labels are collected at a fixed iteration lag so "
        "runs are reproducible",
        "the classification variant only (no hashing or ranking variants); the reward model reads a hashed bag of "
        "words and word pairs with an MLP, not the paper's character CNN",
        "synchronous PPO on a gridworld that prints messages (ascent/KeyDoor-v0), not APPO on NetHack",
    ),
)
def oni(ctx: ClassicContext, params: ONIParams = ONIParams()) -> ONI:
    """ONI: PPO with an intrinsic reward distilled online from an asynchronous (scripted) message annotator."""
    return ONI(ctx, params)


oni.action_spaces = frozenset({"discrete", "continuous"})
oni.check = check
