"""A reward model that keeps learning during RL: `reward=rm_online(path=RM_FOLDER, label_noise=0.2)`.

The closed loop of RLAnything ("RLAnything: Forge Environment, Policy, and Reward Model in Completely Dynamic RL
System", Wang et al. 2026, arXiv:2602.02488; github.com/Gen-Verse/Open-AgentRL), where the reward model is
optimised jointly with the policy, in its simplest form: the iterated / online RLHF loop (Ouyang et al. 2022,
arXiv:2203.02155, §3.5 "iterated"; Bai et al. 2022, arXiv:2204.05862, §4.5 "online"), with the preference
labels coming on the fly from a noisy labeller. RLAnything's own loop is the options `feedback=consistency`
(the reward model, read as a judge with p(verdict = +1) = σ(score), learns from whether its verdict agrees with
the labeller's outcome O = ±1: −log σ(O · score) on every judged sample) and `policy_reward=integrated` (the
policy gets R = O + step_weight · S̄, S̄ = 2σ(score) − 1 the judge's expected verdict, with the weights before
the update); see `integrated_call`. One step per sample: the per-turn verdicts of multi-turn rows are not
implemented; the environment (task) adaptation is the sampler `data.sampler=env_adapt` (ascent/tasks/env_adapt.py).
With the defaults (`feedback=pairs`, `policy_reward=rm`),
each call (one rollout batch, groups of completions of the same prompt):

1. score: r_i = RM_θ(x_i, y_i) for every completion, with the weights θ as they are (the reward returned);
2. label: groups are taken in a seeded random order; the labeller reward (a verifier, e.g. `exact_answer`) judges
   each group's completions until `pairs_per_step` groups with a right (labeller value > its threshold) and a
   wrong completion are found; each gives one pair (a random right one y⁺, a random wrong one y⁻);
3. noise: on exactly F_t − F_{t−1} of the call's P pairs, F_t = round(label_noise · S_t) (S_t pairs seen so far),
   chosen and rejected are swapped (picked with the seeded RNG): over the run the flipped share is exactly
   label_noise up to rounding, the noise model of `ascent make-pairs` (`pairs.label_noise`);
4. measure: the pair accuracy of θ on these fresh pairs before any update, 1[r(y⁺) > r(y⁻)] against the clean
   verdict (a diagnostic only; nothing trains on it);
5. update: `updates_per_step` AdamW steps on the Bradley–Terry loss of the (possibly flipped) pairs, plus
   `replay_pairs` earlier pairs drawn from a buffer of the newest `buffer_size` (no new labels),
       L(θ) = −(1/P) Σ_p log σ(RM_θ(x_p, y_p^chosen) − RM_θ(x_p, y_p^rejected)),
   so the next batch is scored by a model that has seen what the policy now produces.

Label budget: the labeller judges the completions of the groups it is shown (at most all N of the batch, or
`max_labels`; it stops once `pairs_per_step` pairs are found), counted in `rm_online/labels`; the RM trains on P ≤
`pairs_per_step` pairwise labels per call (`rm_online/pairs`). As in `ascent make-pairs`, which completions form a
pair is chosen from the labeller's clean verdicts; the preference the RM learns is the noisy one. The weights, the
optimizer's moments, the RNG and the counters are the reward's `state_dict`, checkpointed by the trainer (exact
resume).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.reward_model import bt_loss, encode, load_reward_model, read_meta, score
from ascent.typed import build


@dataclass(frozen=True)
class OnlineRMParams:
    """The `rm_online` reward's knobs: `rm_online(path=RM_FOLDER, labeller=exact_answer, label_noise=0.2)`."""

    path: str = ""
    """The reward model it starts from: a folder written by `ascent train-rm`."""
    labeller: str = "exact_answer"
    """The reward spec that labels pairs (a registered reward, `module:fn`, `file.py:fn`); it needs the row's
    fields (e.g. `answer`), which the reward runner passes on."""
    threshold: float = 0.5
    """A completion is right when the labeller's value is above this, wrong when at or below it."""
    label_noise: float = 0.0
    """Share of the pairs whose preference is flipped (exactly, over the run; picked with `seed`)."""
    pairs_per_step: int = 32
    """Most pairs labelled per call (one per group of completions of a prompt)."""
    max_labels: int = 0
    """Most completions the labeller judges per call (whole groups; 0: no cap beyond the batch)."""
    updates_per_step: int = 4
    """Bradley–Terry optimizer steps per call, each on all the call's pairs (0: score and label only)."""
    lr: float = 1e-4
    """AdamW learning rate of the reward model."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient-norm clip of each update (0: none)."""
    micro_batch_size: Optional[int] = None
    """Sequences per forward, scoring and training; None: the folder's `micro_batch_size` (64 if none)."""
    buffer_size: int = 4096
    """Labelled pairs kept for replay (the newest; 0: none): the reward model keeps learning from what the
    policy produced earlier, as iterated RLHF keeps its earlier comparisons."""
    replay_pairs: int = 64
    """Earlier pairs drawn from the buffer and trained on with each call's fresh pairs (no new labels)."""
    seed: int = 0
    """Seed of the group order, the pair picks, the flips and the replay draws."""
    device: Optional[str] = None
    """Device of the reward model; None: the learner's (`model.device`)."""
    feedback: str = "pairs"
    """What the reward model learns from: `pairs` (Bradley–Terry on the labeller's right-vs-wrong pairs, online
    RLHF) or `consistency` (RLAnything's consistency feedback: the model is a judge with p(S = +1) = σ(score),
    trained towards the verdict that agrees with the outcome O = ±1 of every judged sample)."""
    policy_reward: str = "rm"
    """What the policy gets: `rm` (the reward model's score) or `integrated` (RLAnything's integrated feedback
    R = O + step_weight · S̄, O = ±1 the labeller's outcome, S̄ = 2σ(score) − 1 the judge's expected verdict)."""
    step_weight: float = 1.0
    """λ of the policy's integrated reward R = O + λ · S̄ (RLAnything's default 1)."""

    def __post_init__(self) -> None:
        if self.feedback not in ("pairs", "consistency") or self.policy_reward not in ("rm", "integrated"):
            raise ValueError(
                f"feedback must be pairs|consistency and policy_reward rm|integrated, got {self.feedback!r}, "
                f"{self.policy_reward!r}"
            )
        if self.step_weight < 0:
            raise ValueError(f"step_weight must be >= 0, got {self.step_weight}")
        if self.feedback == "consistency" and self.label_noise:
            raise ValueError("label_noise flips pairs; with feedback=consistency the outcome is the labeller's own")
        if not self.path:
            raise ValueError("path must name a reward-model folder (ascent train-rm), e.g. rm_online(path=out/rm)")
        if not 0.0 <= self.label_noise < 0.5:
            raise ValueError(
                f"label_noise must be in [0, 0.5) (at 0.5 the labels carry nothing), got {self.label_noise}"
            )
        if self.pairs_per_step < 1 or self.updates_per_step < 0 or self.max_labels < 0:
            raise ValueError("pairs_per_step must be >= 1, updates_per_step and max_labels >= 0")
        if self.lr <= 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("lr must be > 0, weight_decay and grad_clip >= 0")
        if self.buffer_size < 0 or self.replay_pairs < 0 or (self.replay_pairs and not self.buffer_size):
            raise ValueError("buffer_size and replay_pairs must be >= 0, and replay_pairs needs a buffer_size")
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {self.micro_batch_size}")
        if self.labeller.startswith(("rm_online", "rm:")):
            raise ValueError("labeller must be a verifier-like reward, not a reward model")


def exact_flips(seen: int, flipped: int, n: int, share: float, rng: random.Random) -> list[int]:
    """Which of `n` new pairs to flip so that, with `seen` pairs and `flipped` flips before them, the flips total
    exactly round(share * (seen + n)) (picked with `rng`; never more than `n`).

    >>> len(exact_flips(0, 0, 10, 0.2, random.Random(0))), len(exact_flips(10, 2, 3, 0.2, random.Random(0)))
    (2, 1)
    >>> exact_flips(10, 2, 2, 0.2, random.Random(0))  # round(0.2 * 12) = 2 flips already
    []
    """
    want = min(max(round(share * (seen + n)) - flipped, 0), n)
    return sorted(rng.sample(range(n), want))


def step_verdict(score: float) -> float:
    """The judge's expected step verdict E[S] = 2σ(score) − 1 ∈ (−1, 1), S = ±1 with p(+1) = σ(score)
    (RLAnything's mean of m sampled verdicts as m → ∞).

    >>> step_verdict(0.0), round(step_verdict(2.0), 4)
    (0.0, 0.7616)
    """
    return 2.0 / (1.0 + math.exp(-score)) - 1.0


def group_keys(prompts: list[str], group: Optional[list[Any]]) -> list[Any]:
    """The group of each sample: the trainer's `group` field, else the prompt text."""
    return list(group) if group is not None and all(g is not None for g in group) else list(prompts)


@REWARDS.register(
    "rm_online",
    params=OnlineRMParams,
    paper=(papers.RLANYTHING, papers.ONLINE_ITERATED_RLHF),
    fidelity="reduced",
    departures=(
        (
            "feedback=pairs: the online-RLHF loop (Bradley-Terry steps on pairs from the policy's own batches, "
            "labelled by a possibly noisy verifier), not RLAnything's own reward-model update"
        ),
        (
            "feedback=consistency: a scalar judge (p(verdict=+1) = sigmoid(score)) trained by the log-likelihood of "
            "the verdict that agrees with the outcome, not RL on a generative judge's sampled reasoning and verdicts "
            "rewarded by the integrated signal (that expected reward stalls a saturated judge; ascent's reading)"
        ),
        (
            "policy_reward=integrated: R = O + step_weight * (2 sigmoid(score) - 1), the expected verdict (m -> "
            "infinity) of one step per sample; per-turn (step-wise) verdicts of multi-turn rows are not implemented"
        ),
        "RLAnything's environment/task adaptation is a separate piece, data.sampler=env_adapt (a rule-based task "
        "generator driven by the policy's accuracy; the judge's critiques do not reach it)",
    ),
)
class OnlineRewardModel:
    """A Bradley–Terry reward model updated on every batch it scores (RLAnything's jointly optimised reward model,
    Wang et al. 2026, arXiv:2602.02488; the online RLHF loop of Bai et al. 2022, arXiv:2204.05862):
    r = RM_θ(x, y) with θ before the update, then
    θ ← AdamW(θ, ∇ −log σ(RM_θ(x, y_c) − RM_θ(x, y_r))) on one right-vs-wrong pair per group, labelled by the
    `labeller` reward with exactly `label_noise` of the preferences flipped. See the module docstring."""

    def __init__(self, **params: Any) -> None:
        from ascent.rewards.runner import resolve_reward

        self.params = p = build(OnlineRMParams, params, "rm_online")
        self.rm, self.tokenizer, self.meta = load_reward_model(p.path, p.device or "cpu")
        self.labeller = resolve_reward(p.labeller)
        self.micro_batch_size = p.micro_batch_size or int(self.meta.get("micro_batch_size") or 64)
        self.max_length = int(self.meta.get("max_length") or 1024)
        self.optimizer = self._make_optimizer()
        self.rng = random.Random(p.seed)
        self.counts = {"calls": 0, "pairs": 0, "flipped": 0, "labels": 0, "correct": 0, "judged": 0, "consistent": 0}
        self.buffer: list[tuple[str, str, str]] = []
        """Earlier labelled (prompt, chosen, rejected) pairs, flips applied, newest last."""
        self._metrics: dict[str, float] = {}
        self.last_pairs: list[tuple[int, int]] = []
        """The last call's (chosen, rejected) sample indices as trained on (flips applied)."""
        self.__name__ = "rm_online"

    def _make_optimizer(self) -> torch.optim.Optimizer:
        trainable = [w for w in self.rm.parameters() if w.requires_grad]
        return torch.optim.AdamW(trainable, lr=self.params.lr, weight_decay=self.params.weight_decay)

    def place(self, device: str) -> None:
        """Move the model (and the optimizer's moments) to the learner's device, unless the spec fixed one."""
        if self.params.device is None:
            self.rm.to(device)
            for moments in self.optimizer.state.values():
                for k, v in moments.items():
                    if torch.is_tensor(v) and k != "step":
                        moments[k] = v.to(device)

    def metrics(self) -> dict[str, float]:
        """rm_online/ metrics of the last call (the reward runner merges them into its stats)."""
        return dict(self._metrics)

    def summary_fields(self) -> dict[str, Any]:
        """For summary.json: the starting model's held-out pair accuracy, and the online counts and accuracy."""
        c = self.counts
        return {
            "rm_pair_accuracy": self.meta.get("pair_accuracy"),
            "rm_online_pair_accuracy": c["correct"] / c["pairs"] if c["pairs"] else None,
            "rm_online_pairs": c["pairs"],
            "rm_online_flipped": c["flipped"],
            "rm_online_labels": c["labels"],
            "rm_online_consistency": c["consistent"] / c["judged"] if c.get("judged") else None,
        }

    def state_dict(self) -> dict[str, Any]:
        """Weights, optimizer, RNG and counters: a resumed run continues with the same reward model."""
        return {
            "model": {k: v.detach().cpu().clone() for k, v in self.rm.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.getstate(),
            "counts": dict(self.counts),
            "buffer": [list(p) for p in self.buffer],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rm.load_state_dict(state["model"])
        self.optimizer = self._make_optimizer()
        self.optimizer.load_state_dict(state["optimizer"])  # moments follow the weights' device
        self.rng.setstate(_as_tuple(state["rng"]))
        self.counts = {"judged": 0, "consistent": 0} | dict(state["counts"])
        self.buffer = [tuple(p) for p in state.get("buffer", [])]

    def __call__(self, prompts: list[str], completions: list[str], **fields: Any) -> list[Optional[float]]:
        rewards = score(self.rm, self.tokenizer, prompts, completions, self.micro_batch_size, self.max_length)
        if self.params.feedback == "consistency" or self.params.policy_reward == "integrated":
            return self.integrated_call(prompts, completions, fields, rewards)
        pairs, labels = self.label_pairs(prompts, completions, fields)
        correct = sum(rewards[i] > rewards[j] for i, j in pairs)  # fresh pairs, before the update
        flips = exact_flips(self.counts["pairs"], self.counts["flipped"], len(pairs), self.params.label_noise, self.rng)
        noisy = [(j, i) if k in flips else (i, j) for k, (i, j) in enumerate(pairs)]
        self.last_pairs = noisy
        fresh = [(prompts[i], completions[i], completions[j]) for i, j in noisy]
        replayed = self.replay_sample()
        train = self.update(fresh + replayed) if fresh or replayed else {}
        self.remember(fresh)
        c = self.counts
        c["calls"] += 1
        c["pairs"], c["flipped"], c["labels"] = c["pairs"] + len(pairs), c["flipped"] + len(flips), c["labels"] + labels
        c["correct"] += correct
        self._metrics = {
            "rm_online/pairs": float(len(pairs)),
            "rm_online/labels": float(labels),
            "rm_online/pairs_seen": float(c["pairs"]),
            "rm_online/flipped_seen": float(c["flipped"]),
            "rm_online/labels_seen": float(c["labels"]),
            "rm_online/replayed": float(len(replayed)),
            **({"rm_online/pair_accuracy": correct / len(pairs)} if pairs else {}),
            "rm_online/pair_accuracy_running": c["correct"] / c["pairs"] if c["pairs"] else 0.0,
            **train,
        }
        return rewards

    def integrated_call(
        self, prompts: list[str], completions: list[str], fields: dict[str, Any], scores: list[float]
    ) -> list[Optional[float]]:
        """RLAnything's loop on one batch: the labeller's outcome O = ±1 of every sample, the judge's expected
        verdict S̄ = 2σ(score) − 1 (weights before any update), the integrated signal R = O + λ S̄; then the
        reward model learns from `feedback` (consistency: −Σ log σ(O · s) / n; pairs: Bradley–Terry on the
        labeller's pairs). Returns R (`policy_reward=integrated`) or the scores; None where the labeller has no
        verdict."""
        p, n = self.params, len(prompts)
        verdicts = self.judge(prompts, completions, fields, list(range(n)))
        judged = sorted(verdicts)
        outcome = {i: 1.0 if verdicts[i] else -1.0 for i in judged}
        steps = {i: step_verdict(scores[i]) for i in judged}
        integrated = {i: outcome[i] + p.step_weight * steps[i] for i in judged}
        consistent = sum((steps[i] > 0) == (outcome[i] > 0) for i in judged)
        c = self.counts
        c["calls"], c["labels"] = c["calls"] + 1, c["labels"] + n
        c["judged"], c["consistent"] = c.get("judged", 0) + len(judged), c.get("consistent", 0) + consistent
        metrics: dict[str, float] = {
            "rm_online/labels": float(n),
            "rm_online/labels_seen": float(c["labels"]),
            "rm_online/outcome_mean": sum(outcome.values()) / len(judged) if judged else 0.0,
            "rm_online/step_mean": sum(steps.values()) / len(judged) if judged else 0.0,
            **({"rm_online/consistency": consistent / len(judged)} if judged else {}),
            "rm_online/consistency_running": c["consistent"] / c["judged"] if c["judged"] else 0.0,
        }
        if p.feedback == "consistency":
            batch = [(prompts[i], completions[i], outcome[i]) for i in judged]
            metrics |= self.consistency_update(batch) if batch else {}
        else:
            pairs, _ = self.label_pairs(prompts, completions, fields)
            self.last_pairs = pairs
            fresh = [(prompts[i], completions[i], completions[j]) for i, j in pairs]
            replayed = self.replay_sample()
            metrics |= self.update(fresh + replayed) if fresh or replayed else {}
            self.remember(fresh)
            c["pairs"], c["correct"] = (
                c["pairs"] + len(pairs),
                c["correct"] + sum(scores[i] > scores[j] for i, j in pairs),
            )
            metrics["rm_online/pairs"] = float(len(pairs))
        self._metrics = metrics
        if p.policy_reward == "integrated":
            return [integrated.get(i) for i in range(n)]
        return list(scores)

    def consistency_update(self, batch: list[tuple[str, str, float]]) -> dict[str, float]:
        """`updates_per_step` AdamW steps on the judge's consistency feedback: the log-likelihood of the verdict
        that agrees with each sample's outcome O = ±1, with p(S = +1) = σ(s),
            L(θ) = −(1/n) Σ log σ(O_i · s_i),
        the last step's rm_online/ metrics. Not the expected reward (1/n) Σ R_i (2σ(s_i) − 1) of RL on the verdict,
        R = O + λ S̄: its gradient vanishes for a saturated judge, and with λ = 1 a judge that says −1
        everywhere makes R = 0 on every success (measured on tests/rewards/test_rlanything.py's batch: the
        judge collapsed to all −1 within one step, or stopped at 0.58 agreement)."""
        metrics: dict[str, float] = {}
        mb = self.micro_batch_size
        device = self.rm.head.weight.device
        self.rm.train()
        for _ in range(self.params.updates_per_step):
            self.optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for at in range(0, len(batch), mb):
                micro = batch[at : at + mb]
                ids, mask = encode(self.tokenizer, [x for x, _, _ in micro], [y for _, y, _ in micro], self.max_length)
                s = self.rm(ids.to(device), mask.to(device))  # (m,)
                r = torch.tensor([w for _, _, w in micro], dtype=s.dtype, device=device)
                loss = -torch.nn.functional.logsigmoid(r * s).sum() / len(batch)
                loss.backward()
                total += float(loss.detach())
            params = [w for w in self.rm.parameters() if w.requires_grad]
            norm = torch.nn.utils.clip_grad_norm_(params, self.params.grad_clip or float("inf"))
            if torch.isfinite(norm):
                self.optimizer.step()
            metrics = {"rm_online/consistency_loss": total, "rm_online/grad_norm": float(norm)}
        self.rm.eval()
        return metrics

    def label_pairs(
        self, prompts: list[str], completions: list[str], fields: dict[str, Any]
    ) -> tuple[list[tuple[int, int]], int]:
        """(right index, wrong index) pairs, one per group with both, groups in a seeded random order until
        `pairs_per_step`; and how many completions the labeller judged."""
        keys = group_keys(prompts, fields.get("group"))
        members: dict[Any, list[int]] = {}
        for i, key in enumerate(keys):
            members.setdefault(key, []).append(i)
        order = list(members)
        self.rng.shuffle(order)
        pairs, labels, cap = [], 0, self.params.max_labels or len(prompts)
        for at in range(0, len(order), self.params.pairs_per_step):  # judge chunks of groups until enough pairs
            shown = []
            for key in order[at : at + self.params.pairs_per_step]:  # whole groups, within the label budget
                if labels + sum(len(members[k]) for k in shown) + len(members[key]) <= cap:
                    shown.append(key)
            if not shown:
                break
            chunk = [i for key in shown for i in members[key]]
            verdicts = self.judge(prompts, completions, fields, chunk)
            labels += len(chunk)
            for key in shown:
                right = [i for i in members[key] if verdicts.get(i) is True]
                wrong = [i for i in members[key] if verdicts.get(i) is False]
                if right and wrong and len(pairs) < self.params.pairs_per_step:
                    pairs.append((self.rng.choice(right), self.rng.choice(wrong)))
            if len(pairs) >= self.params.pairs_per_step:
                break
        return pairs, labels

    def judge(self, prompts: list[str], completions: list[str], fields: dict[str, Any], idx: list[int]) -> dict:
        """{sample index: right (True) / wrong (False)} by the labeller; samples it has no opinion on are left out."""
        sub = {k: [v[i] for i in idx] for k, v in fields.items() if isinstance(v, list) and len(v) == len(prompts)}
        values = self.labeller([prompts[i] for i in idx], [completions[i] for i in idx], **sub)
        if not isinstance(values, (list, tuple)) or len(values) != len(idx):
            raise ValueError(f"rm_online: labeller {self.params.labeller!r} returned {values!r} for {len(idx)} samples")
        return {i: float(v) > self.params.threshold for i, v in zip(idx, values) if v is not None}

    def replay_sample(self) -> list[tuple[str, str, str]]:
        """Up to `replay_pairs` earlier pairs drawn (without replacement) from the buffer."""
        k = min(self.params.replay_pairs, len(self.buffer))
        return [self.buffer[i] for i in self.rng.sample(range(len(self.buffer)), k)] if k else []

    def remember(self, pairs: list[tuple[str, str, str]]) -> None:
        """Keep the newest `buffer_size` pairs."""
        if self.params.buffer_size:
            self.buffer = (self.buffer + pairs)[-self.params.buffer_size :]

    def update(self, pairs: list[tuple[str, str, str]]) -> dict[str, float]:
        """`updates_per_step` Bradley–Terry steps on (prompt, chosen, rejected) pairs; the last step's rm_online/
        loss metrics."""
        metrics: dict[str, float] = {}
        mb = max(self.micro_batch_size // 2, 1)  # a pair is two sequences
        device = self.rm.head.weight.device
        self.rm.train()
        for _ in range(self.params.updates_per_step):
            self.optimizer.zero_grad(set_to_none=True)
            sums: dict[str, float] = {}
            for at in range(0, len(pairs), mb):
                micro = pairs[at : at + mb]
                texts = [p for p, _, _ in micro] * 2
                outs = [c for _, c, _ in micro] + [r for _, _, r in micro]
                ids, mask = encode(self.tokenizer, texts, outs, self.max_length)  # (2P, T)
                scores = self.rm(ids.to(device), mask.to(device))  # (2P,)
                loss, m = bt_loss(scores[: len(micro)], scores[len(micro) :])
                (loss * len(micro) / len(pairs)).backward()
                sums = {k: sums.get(k, 0.0) + v * len(micro) / len(pairs) for k, v in m.items()}
            params = [w for w in self.rm.parameters() if w.requires_grad]
            norm = torch.nn.utils.clip_grad_norm_(params, self.params.grad_clip or float("inf"))
            if torch.isfinite(norm):
                self.optimizer.step()
            metrics = {f"rm_online/{k.split('/')[-1]}": v for k, v in sums.items()} | {
                "rm_online/grad_norm": float(norm)
            }
        self.rm.eval()
        return metrics


def _as_tuple(state: Any) -> tuple:
    """random.Random state after a round trip that may have turned its tuples into lists."""
    return (
        tuple(_as_tuple(s) if isinstance(s, list) else s for s in state) if isinstance(state, (list, tuple)) else state
    )


def check_online_spec(spec: str) -> None:
    """At config load: an `rm_online(...)` spec's parameters and folder, checked without loading weights
    (ConfigError otherwise)."""
    from ascent.rewards.runner import parse_spec_args

    name, kwargs = parse_spec_args(spec)
    if name == "rm_online":
        read_meta(Path(build(OnlineRMParams, kwargs, "rm_online").path))
