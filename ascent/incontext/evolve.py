"""Evolving RL algorithms as loss graphs (Co-Reyes, Miao, Peng, Real, Levine, Le, Lee & Faust 2021, "Evolving
Reinforcement Learning Algorithms", arXiv:2101.03958).

A value-based RL algorithm is DQN's machinery (replay, target network, epsilon-greedy acting: ascent.classic.dqn)
with its loss replaced by a small computational graph over per-transition inputs

    q   = Q(s_t, a_t)                     (the only input with a gradient)
    qn  = max_a' Q_target(s_{t+1}, a')
    r   = r_t
    g   = gamma (1 - terminated_t)        (the discount, 0 after a terminal step)
    c1  = 1,  c01 = 0.1                   (constants)

and the ops add, sub, mul, max, min (two arguments), square, abs, neg, huber, relu (one argument). A graph is a list
of K nodes, each an op over earlier nodes or inputs; the last node, averaged over the batch, is the loss. Graphs are
written and parsed as expressions: DQN is `huber(sub(q, add(r, mul(g, qn))))`, the paper's DQNReg
`add(square(sub(q, add(r, mul(g, qn)))), mul(c01, q))`.

The search is the paper's regularized evolution (Real et al. 2019): a population of P graphs, each round a tournament
of T drawn at random, the best mutated (one node's op or one of its arguments redrawn, the paper's mutation), the
child evaluated and appended, the oldest removed. Before
training, two of the paper's cheap filters: a graph whose loss has no gradient through q on random inputs scores 0
(it cannot learn), and a graph whose outputs on a fixed random input batch match a graph already scored
(functional equivalence, outputs rounded to 6 decimals) takes that score without training. The score of a graph is
the mean return, over `eval_episodes` greedy episodes, of a short DQN run with that loss on the training environment
(CartPole), divided by the environment's maximum (500).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from ascent.classic.base import CLASSIC, ClassicContext
from ascent.classic.dqn import DQN, DQNParams
from ascent.incontext.methods import META_METHODS, PAIRS
from ascent.registry import Paper

EVOLVING_RL = Paper(
    "Evolving RL",
    "Co-Reyes et al.",
    2021,
    "Evolving Reinforcement Learning Algorithms (ICLR 2021)",
    "arXiv:2101.03958",
)
REG_EVOLUTION = Paper(
    "Regularized evolution",
    "Real, Aggarwal, Huang & Le",
    2019,
    "Regularized Evolution for Image Classifier Architecture Search (AAAI 2019)",
    "arXiv:1802.01548",
    section="related",
)

INPUTS = ("q", "qn", "r", "g", "c1", "c01")
BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "max": torch.maximum,
    "min": torch.minimum,
}
UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "square": torch.square,
    "abs": torch.abs,
    "neg": torch.neg,
    "huber": lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), reduction="none"),
    "relu": torch.relu,
}
OPS = {**{k: 2 for k in BINARY}, **{k: 1 for k in UNARY}}

Node = tuple[str, tuple[int, ...]]
"""(op, argument indices): index i < len(INPUTS) is an input, else node i - len(INPUTS)."""


def parse(expr: str) -> list[Node]:
    """An expression over INPUTS and OPS -> the node list (arguments before their users, no duplicates).

    >>> parse("huber(sub(q, add(r, mul(g, qn))))")
    [('mul', (3, 1)), ('add', (2, 6)), ('sub', (0, 7)), ('huber', (8,))]
    """
    nodes: list[Node] = []
    text = expr.replace(" ", "")
    pos = 0

    def term() -> int:
        nonlocal pos
        j = pos
        while j < len(text) and (text[j].isalnum() or text[j] == "_"):
            j += 1
        name, pos = text[pos:j], j
        if name in INPUTS and (pos >= len(text) or text[pos] != "("):
            return INPUTS.index(name)
        if name not in OPS or pos >= len(text) or text[pos] != "(":
            raise ValueError(f"loss graph {expr!r}: {name!r} is not an input {INPUTS} or an op {sorted(OPS)}")
        pos += 1
        args = [term()]
        while pos < len(text) and text[pos] == ",":
            pos += 1
            args.append(term())
        if pos >= len(text) or text[pos] != ")" or len(args) != OPS[name]:
            raise ValueError(f"loss graph {expr!r}: {name} takes {OPS[name]} argument(s)")
        pos += 1
        node = (name, tuple(args))
        if node not in nodes:
            nodes.append(node)
        return len(INPUTS) + nodes.index(node)

    out = term()
    if pos != len(text) or out < len(INPUTS):
        raise ValueError(f"loss graph {expr!r}: one op expression expected")
    return nodes[: out - len(INPUTS) + 1]


def render(nodes: list[Node], i: Optional[int] = None) -> str:
    """The expression of node i (default: the output), with only the nodes it uses.

    >>> render(parse("add(square(sub(q, add(r, mul(g, qn)))), mul(c01, q))"))
    'add(square(sub(q, add(r, mul(g, qn)))), mul(c01, q))'
    """
    i = len(INPUTS) + len(nodes) - 1 if i is None else i
    if i < len(INPUTS):
        return INPUTS[i]
    op, args = nodes[i - len(INPUTS)]
    return f"{op}({', '.join(render(nodes, a) for a in args)})"


def evaluate_graph(nodes: list[Node], inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The per-transition output (B,) of the graph on INPUTS given as (B,) tensors (constants are filled in)."""
    ref = inputs["q"]
    vals = [inputs[k] if k in inputs else torch.full_like(ref, 1.0 if k == "c1" else 0.1) for k in INPUTS]
    for op, args in nodes:
        vals.append(BINARY[op](vals[args[0]], vals[args[1]]) if len(args) == 2 else UNARY[op](vals[args[0]]))
    return vals[-1]


def probe(nodes: list[Node], seed: int = 0) -> tuple[bool, str]:
    """(whether the loss has a gradient through q, a fingerprint of its outputs) on a fixed random batch."""
    gen = torch.Generator().manual_seed(seed)
    b = {k: torch.randn(64, generator=gen) * 3 for k in ("q", "qn", "r")}
    b["g"] = (torch.rand(64, generator=gen) < 0.9).float() * 0.99
    b["q"].requires_grad_(True)
    out = evaluate_graph(nodes, b)
    grad = torch.autograd.grad(out.mean(), b["q"], allow_unused=True)[0] if out.requires_grad else None
    has_grad = grad is not None and bool(torch.isfinite(grad).all()) and float(grad.abs().sum()) > 1e-8
    finger = ",".join(f"{v:.6g}" for v in out.detach().double().tolist())
    return has_grad, finger


@dataclass(frozen=True)
class LossGraphDQNParams(DQNParams):
    """DQN with its loss a graph (Co-Reyes et al. 2021); the other fields are DQN's."""

    graph: str = "huber(sub(q, add(r, mul(g, qn))))"
    """The loss graph as an expression over q, qn, r, g, c1, c01 (default: DQN's Huber TD loss)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        parse(self.graph)  # raises ValueError naming what is wrong


class LossGraphDQN(DQN):
    """DQN whose gradient step minimises the batch mean of a loss graph."""

    def __init__(self, ctx: ClassicContext, params: LossGraphDQNParams) -> None:
        super().__init__(ctx, params)
        self.nodes = parse(params.graph)

    def gradient_step(self) -> torch.Tensor:
        b = self.buffer.sample(self.p.batch_size, self.rng)
        with torch.no_grad():
            qn = self.q_target(b.next_obs).max(dim=1).values  # (B,)
        q = self.q(b.obs).gather(1, b.actions[:, None]).squeeze(1)  # (B,)
        g = self.p.gamma * (1.0 - b.terminated)
        loss = evaluate_graph(self.nodes, {"q": q, "qn": qn, "r": b.rewards, "g": g}).mean()
        if not torch.isfinite(loss):
            return loss.detach()  # a diverging graph stops learning; its score shows it
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.parameters, self.p.max_grad_norm)
        self.optimizer.step()
        return loss.detach()


@CLASSIC.register(
    "dqn_loss_graph",
    params=LossGraphDQNParams,
    paper=EVOLVING_RL,
    fidelity="faithful",
    departures=(
        "the graph's inputs are per-transition scalars (Q(s,a), max Q_target(s'), r, gamma(1-done), 1, 0.1), "
        "not the paper's Q-value vectors with its max/select ops",
    ),
)
def dqn_loss_graph(ctx: ClassicContext, params: LossGraphDQNParams = LossGraphDQNParams()) -> LossGraphDQN:
    """DQN with a loss graph in place of the Huber TD loss (Co-Reyes et al. 2021, arXiv:2101.03958)."""
    return LossGraphDQN(ctx, params)


dqn_loss_graph.action_spaces = frozenset({"discrete"})


# ------------------------------------------------------------------------------------------------ search


def random_graph(k: int, rng: np.random.Generator) -> list[Node]:
    """K random nodes, each an op over inputs and earlier nodes."""
    nodes: list[Node] = []
    for i in range(k):
        op = str(rng.choice(sorted(OPS)))
        nodes.append((op, tuple(int(rng.integers(0, len(INPUTS) + i)) for _ in range(OPS[op]))))
    return nodes


def mutate(nodes: list[Node], rng: np.random.Generator) -> list[Node]:
    """One node changed: its op redrawn (arguments kept where the arity allows) or one argument redrawn."""
    out = list(nodes)
    i = int(rng.integers(0, len(out)))
    op, args = out[i]
    if rng.random() < 0.5:
        op = str(rng.choice(sorted(OPS)))
        args = tuple(args[j] if j < len(args) else int(rng.integers(0, len(INPUTS) + i)) for j in range(OPS[op]))
    else:
        j = int(rng.integers(0, len(args)))
        args = args[:j] + (int(rng.integers(0, len(INPUTS) + i)),) + args[j + 1 :]
    out[i] = (op, args)
    return out


def dqn_score(
    graph: str, env: str, total_steps: int, seed: int, dqn: dict, eval_episodes: int, num_envs: int = 1
) -> float:
    """Mean greedy return of a DQN run with loss `graph` on `env` for `total_steps` environment steps."""
    from ascent.classic.loop import ClassicTrainer
    from ascent.config.schema import ClassicConfig
    from ascent.typed import format_spec

    algo = format_spec("dqn_loss_graph", {**dqn, "graph": graph})
    cfg = ClassicConfig(
        env=env,
        algorithm=algo,
        num_envs=num_envs,
        total_steps=total_steps,
        eval_episodes=eval_episodes,
        log_every=10**9,
    )
    torch.manual_seed(seed)
    trainer = ClassicTrainer(cfg, seed)
    trainer.fit(lambda *_: None, lambda *_: None)
    return float(np.mean(trainer.evaluate(eval_episodes)))


CARTPOLE_DQN = {
    "lr": 1e-3,
    "buffer_size": 50_000,
    "gamma": 0.99,
    "learning_starts": 500,
    "batch_size": 64,
    "train_freq": 1,
    "target_update_interval": 500,
    "exploration_fraction": 0.3,
    "eps_end": 0.02,
    "hidden": [64, 64],
}
"""A short-run DQN for CartPole and Acrobot (small net, frequent target copies)."""


@dataclass(frozen=True)
class SearchParams:
    population: int = 8
    """P, graphs kept alive."""
    tournament: int = 3
    """T, graphs drawn per tournament."""
    evaluations: int = 40
    """Graphs trained in all (filtered or duplicate graphs do not count), the population's first P included."""
    nodes: int = 5
    """K, nodes per graph."""
    env: str = "CartPole-v1"
    """Training environment of the search."""
    steps: int = 6000
    """Environment steps of each scoring DQN run."""
    num_envs: int = 4
    """Environments stepped together in every DQN run (one gradient step per vector step)."""
    eval_episodes: int = 5
    """Greedy episodes of each score."""
    max_return: float = 500.0
    """The training environment's best return (scores are divided by it)."""
    heldout_env: str = "Acrobot-v1"
    """Held-out environment on which the best graph and DQN are compared."""
    heldout_steps: int = 12000
    """Environment steps of each held-out run."""
    heldout_seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """Seeds of the held-out comparison (each: the best graph and DQN from the same seed)."""
    heldout_episodes: int = 10
    """Greedy episodes of each held-out return."""
    max_proposals: int = 2000
    """Mutations tried in all (filtered ones included) before the search stops."""
    dqn: dict[str, Any] = field(default_factory=lambda: dict(CARTPOLE_DQN))
    """DQN parameters of every run (the graph replaces only the loss)."""

    def __post_init__(self) -> None:
        if self.population < 2 or not 1 <= self.tournament <= self.population or self.nodes < 1:
            raise ValueError("search needs population >= 2, 1 <= tournament <= population, nodes >= 1")
        if self.evaluations < self.population or self.steps < 1 or self.eval_episodes < 1:
            raise ValueError("search needs evaluations >= population, steps >= 1, eval_episodes >= 1")


def search(p: SearchParams, seed: int, log: Callable[[str], None] = lambda m: print(m, flush=True)) -> dict[str, Any]:
    """Regularized evolution over loss graphs scored by short DQN runs (see the module docstring); every scored
    graph with its score, and the best."""
    rng = np.random.default_rng([seed, 41])
    scored: dict[str, float] = {}  # fingerprint -> score
    history: list[tuple[str, float, str]] = []  # (graph, score, how: trained / no-grad / duplicate)
    population: list[tuple[list[Node], float]] = []
    trained, proposals, t0 = 0, 0, time.perf_counter()

    def score(nodes: list[Node]) -> Optional[float]:
        nonlocal trained
        has_grad, finger = probe(nodes)
        expr = render(nodes)
        if not has_grad:
            history.append((expr, 0.0, "no-grad"))
            return 0.0
        if finger in scored:
            history.append((expr, scored[finger], "duplicate"))
            return scored[finger]
        if trained >= p.evaluations:
            return None
        ret = dqn_score(expr, p.env, p.steps, seed, p.dqn, p.eval_episodes, p.num_envs)
        trained += 1
        s = ret / p.max_return if math.isfinite(ret) else 0.0
        scored[finger] = s
        history.append((expr, s, "trained"))
        log(f"[{trained}/{p.evaluations} {time.perf_counter() - t0:.0f}s] {s:.3f} {expr}")
        return s

    while len(population) < p.population and proposals < p.max_proposals:
        proposals += 1
        nodes = random_graph(p.nodes, rng)
        s = score(nodes)
        if s is not None and probe(nodes)[0]:
            population.append((nodes, s))
    while trained < p.evaluations and proposals < p.max_proposals:
        proposals += 1
        pick = rng.choice(len(population), size=p.tournament, replace=False)
        parent = max((population[i] for i in pick), key=lambda x: x[1])[0]
        child = mutate(parent, rng)
        s = score(child)
        if s is None:
            break
        population.append((child, s))
        population.pop(0)
    best = max((h for h in history if h[2] == "trained"), key=lambda h: h[1])
    return {
        "best_graph": best[0],
        "best_score": best[1],
        "trained": trained,
        "proposals": proposals,
        "history": history,
    }


@META_METHODS.register(
    "loss_graph_search",
    params=SearchParams,
    paper=(EVOLVING_RL, REG_EVOLUTION),
    fidelity="reduced",
    departures=(
        "tens of graphs scored by one short CartPole run each, not the paper's 20-40k graphs on 300 CPUs",
        "scalar per-transition inputs and 10 ops, K = 5 nodes; no program-level hurdle environments beyond CartPole",
        "one held-out environment (Acrobot) against DQN at the same hyperparameters, instead of the paper's suite",
    ),
)
def run_search(seed: int, params: SearchParams = SearchParams()) -> dict[str, Any]:
    """One search (seeded by `seed`) on CartPole, then the best graph and DQN's Huber loss trained on the held-out
    environment with the same DQN settings, once per held-out seed; their greedy returns and the paired difference."""
    from ascent.incontext.methods import paired

    p = params
    found = search(p, seed)
    out: dict[str, Any] = dict(found)
    for name, graph in (("best", found["best_graph"]), ("dqn", DQN_GRAPH)):
        out[f"heldout_{name}_per_seed"] = [
            dqn_score(graph, p.heldout_env, p.heldout_steps, s, p.dqn, p.heldout_episodes, p.num_envs)
            for s in p.heldout_seeds
        ]
        out[f"heldout_{name}"] = float(np.mean(out[f"heldout_{name}_per_seed"]))
        print(f"held-out {p.heldout_env} {name} {graph}: {out[f'heldout_{name}_per_seed']}", flush=True)
    out["heldout_diff_best_minus_dqn"] = paired(out["heldout_best_per_seed"], out["heldout_dqn_per_seed"])
    return out


DQN_GRAPH = "huber(sub(q, add(r, mul(g, qn))))"
"""DQN's loss as a graph (Mnih et al. 2015 with Stable-Baselines3's Huber)."""
PAIRS["loss_graph_search"] = []  # one search seed; the paired held-out difference is inside the result
