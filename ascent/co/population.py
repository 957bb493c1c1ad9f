"""Poppy (Grinsztajn et al. 2022, "Winner Takes It All: Training Performant RL Populations for Combinatorial
Optimization", arXiv:2210.03475): a population of K agents that share one encoder, each with its own decoder.

Solutions are laid out agent-major: with M starts per agent, solution s of an instance belongs to agent s // M and
starts at start node s % M, so one `rollout` of S = K * M solutions rolls out every agent from every start, and
`evaluate`'s multi-start modes keep the best over agents and starts (the population's performance, the paper's
max over agents). The population objective is the `co_loss` `poppy`; K agents trained independently with POMO on
the same model is the `pomo` loss on the same rollouts (its baseline is per agent: `Solutions.agents`).

Training follows the paper's two phases: a single agent (`attention_model`) is trained first, then `clone(model, K)`
copies its encoder and K times its decoder into a population that trains on.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from ascent.co.envs import RouteState, take
from ascent.co.model import CO_POLICIES, AttentionModel, AttentionModelParams, Decoder, Encoded, Encoder
from ascent.papers import POPPY


@dataclass(frozen=True)
class PopulationParams(AttentionModelParams):
    """The attention model's parameters, plus the population size."""

    agents: int = 4
    """K, the agents (decoders) sharing the encoder (the paper: 4 to 32)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.agents < 1:
            raise ValueError(f"agents must be >= 1, got {self.agents}")


class PopulationModel(nn.Module):
    """One encoder, K decoders; `log_probs` routes solution s to decoder s // (S / K)."""

    def __init__(self, problem: str, p: PopulationParams = PopulationParams()) -> None:
        super().__init__()
        self.problem, self.p, self.agents = problem, p, p.agents
        self.encoder = Encoder(problem, p)
        self.decoders = nn.ModuleList(Decoder(problem, p) for _ in range(p.agents))

    def encode(self, locs: torch.Tensor, demand: torch.Tensor | None = None) -> list[Encoded]:
        h = self.encoder(locs, demand)  # (B, N, d), shared
        return [dec.project(h) for dec in self.decoders]

    def log_probs(self, enc: list[Encoded], state: RouteState) -> torch.Tensor:
        S = state.current.shape[1]
        if S % self.agents:
            raise ValueError(f"{S} solutions do not split over {self.agents} agents")
        M = S // self.agents
        parts = [
            dec.log_probs(e, take(state, slice(k * M, (k + 1) * M)))
            for k, (dec, e) in enumerate(zip(self.decoders, enc))
        ]
        return torch.cat(parts, dim=1)  # (B, S, N)


def clone(model: AttentionModel, agents: int) -> PopulationModel:
    """Poppy's phase 2 start: the trained model's encoder, its decoder copied `agents` times."""
    p = PopulationParams(**{f: getattr(model.p, f) for f in model.p.__dataclass_fields__}, agents=agents)
    pop = PopulationModel(model.problem, p)
    pop.encoder.load_state_dict(model.encoder.state_dict())
    for dec in pop.decoders:
        dec.load_state_dict(copy.deepcopy(model.decoder.state_dict()))
    return pop


@CO_POLICIES.register(
    "population",
    params=PopulationParams,
    paper=POPPY,
    fidelity="faithful",
    departures=(
        "decoders are cloned from a trained single agent by `clone` (the paper's phase 1 -> 2); built from a spec they "
        "start from independent random initialisations",
    ),
)
def population(problem: str, params: PopulationParams = PopulationParams()) -> PopulationModel:
    """K attention-model decoders over one shared encoder (Poppy, Grinsztajn et al. 2022, arXiv:2210.03475)."""
    return PopulationModel(problem, params)
