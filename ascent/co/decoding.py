"""Building solutions with the policy: sampled (training), greedy, multi-start greedy and 8-fold augmented.

One function, `rollout`, runs the environment and the policy together for B instances and S solutions each and
returns a `Solutions` record. With `starts=True`, solution s of every instance has its first action forced to the
environment's start node s (POMO, Kwon et al. 2020, arXiv:2010.16011, section 4.1: TSP, every node; CVRP, every
customer), and that forced action's probability is not part of the log-likelihood.

Evaluation modes (`evaluate`):
- `greedy`: one greedy solution (TSP from node 0; CVRP from the depot, the first customer chosen by the policy);
- `multistart`: greedy from every start node, the best kept (POMO's inference, section 4.3);
- `multistart_aug8`: `multistart` on the 8 symmetric copies of each instance, the best kept (section 4.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import torch

from ascent.co.envs import make_env
from ascent.co.model import AttentionModel
from ascent.co.problems import Instances, augment

Mode = Literal["greedy", "multistart", "multistart_aug8"]
MODES: tuple[str, ...] = ("greedy", "multistart", "multistart_aug8")


@dataclass(frozen=True)
class Solutions:
    """S solutions of each of B instances."""

    actions: torch.Tensor
    """(B, S, T) int64 action sequences (CVRP: padded with the depot once complete)."""
    log_likelihood: torch.Tensor
    """(B, S) sum of log p of the chosen actions (forced first actions excluded); grad flows when sampling."""
    reward: torch.Tensor
    """(B, S) minus the tour length."""
    entropy: torch.Tensor
    """(B, S) mean entropy of the policy over the steps it chose freely (a diagnostic)."""
    agents: int = 1
    """Policies the S solutions are split over, agent-major (a population: `ascent.co.population`)."""


def rollout(
    policy: AttentionModel,
    inst: Instances,
    samples: int,
    starts: bool,
    greedy: bool,
    generator: Optional[torch.Generator] = None,
) -> Solutions:
    """`samples` solutions per instance (with `starts`: one per start node, `samples` = their number, or fewer: the
    first ones); greedy (argmax) or sampled from the policy with `generator`."""
    env = make_env(inst)
    demand = getattr(env, "demand", None)
    enc = policy.encode(inst.locs, demand)
    state = env.reset(samples)
    B, S = state.current.shape
    agents = getattr(policy, "agents", 1)
    if S % agents:
        raise ValueError(f"{S} solutions do not split over {agents} agents")
    nodes = env.start_nodes()
    if starts and S // agents > len(nodes):
        raise ValueError(f"{S // agents} solutions per agent but only {len(nodes)} start nodes")
    per_agent = torch.arange(S) % (S // agents)  # solution s: agent s // (S / K), start s % (S / K)
    forced = nodes[per_agent].expand(B, S) if starts else None
    actions: list[torch.Tensor] = []
    free_steps = 0
    ll = torch.zeros(B, S)
    ent = torch.zeros(B, S)
    while not state.done.all() and state.steps < env.max_steps:
        if forced is not None and state.steps == 0:
            action = forced
        else:
            logp = policy.log_probs(enc, state)  # (B, S, N)
            if greedy:
                action = logp.argmax(dim=-1)
            else:
                probs = logp.exp()
                action = torch.multinomial(probs.view(B * S, -1), 1, generator=generator).view(B, S)
            ll = ll + logp.gather(2, action.unsqueeze(-1)).squeeze(-1)
            p = logp.exp().detach()
            ent = ent - (p * logp.detach().masked_fill(p == 0, 0.0)).sum(-1)
            free_steps += 1
        actions.append(action)
        state = env.step(state, action).state
    return Solutions(torch.stack(actions, dim=-1), ll, -state.length, ent / max(free_steps, 1), agents)


@torch.no_grad()
def evaluate_modes(
    policy: AttentionModel, inst: Instances, modes: list[str], batch_size: int = 64
) -> dict[str, torch.Tensor]:
    """{mode: (B,) tour lengths of the best solution per instance} for each decoding mode (policy in eval mode).
    `multistart` is read off `multistart_aug8`'s identity fold when both are asked for (the same rollouts)."""
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown decoding mode {bad[0]!r}; valid: {', '.join(MODES)}")
    was_training = policy.training
    policy.eval()
    agents = getattr(policy, "agents", 1)
    out: dict[str, list[torch.Tensor]] = {m: [] for m in modes}
    for lo in range(0, inst.size, batch_size):
        part = inst[lo : lo + batch_size]
        b = part.size
        if "greedy" in modes:  # one solution per agent
            sol = rollout(policy, part, agents, starts=part.problem == "tsp", greedy=True)
            out["greedy"].append((-sol.reward).min(dim=1).values)
        multi = [m for m in modes if m != "greedy"]
        if multi:
            folds = 8 if "multistart_aug8" in multi else 1
            aug = augment(part, folds)
            n_starts = len(make_env(aug).start_nodes())
            sol = rollout(policy, aug, agents * n_starts, starts=True, greedy=True)
            best = (-sol.reward).min(dim=1).values.view(folds, b)  # fold 0: the identity
            if "multistart" in multi:
                out["multistart"].append(best[0])
            if "multistart_aug8" in multi:
                out["multistart_aug8"].append(best.min(dim=0).values)
    policy.train(was_training)
    return {m: torch.cat(v) for m, v in out.items()}


def evaluate(policy: AttentionModel, inst: Instances, mode: Mode, batch_size: int = 64) -> torch.Tensor:
    """(B,) tour lengths of the best solution per instance under decoding `mode` (policy in eval mode)."""
    return evaluate_modes(policy, inst, [mode], batch_size)[mode]
