"""CSRO: PSRO whose best responses are programs written by a language model (Hennes, Li, Schultz & Lanctot 2026,
"Code-Space Response Oracles: Generating Interpretable Multi-Agent Policies with Large Language Models",
arXiv:2603.10098; PSRO: Lanctot et al. 2017, arXiv:1711.00832).

PSRO keeps a population of policies, the empirical meta-game (every pair's payoff), and a meta-strategy sigma over
the population (here the meta-game's Nash equilibrium, by linear programming); each iteration an oracle adds a best
response to sigma. CSRO's oracle writes the best response as code: it is shown the game's rules, the population's
programs and their sigma weights, and writes `policy(my_moves, their_moves) -> move`; candidates are scored against
the sigma-mixture and the best valid one joins the population. Exploitability of sigma, the most any program gains
against the mixture, falls as the population covers the game.

The game (`match`): repeated rock-paper-scissors, `rounds` rounds, +1 a round won, -1 lost, averaged; symmetric
zero-sum (value 0), so one population serves both seats. A policy sees both move histories. Exploitability is
measured against `reference_programs()`, a fixed class of 15 programs (constants, functions of the opponent's or
its own last move, counters of the opponent's most frequent move): a lower bound of the true exploitability.

Oracles (`CSRO_ORACLES`, each maps a `CSRORequest` to candidate sources): `lm` (SmolLM2-135M-Instruct, the model
ascent loads offline; the paper uses Gemini models, zero-shot, with refinement or AlphaEvolve) and `scripted`
(ascent's upper bound: the reference class itself, so the best candidate is an exact best response within it).
The control is iterated best response to the latest policy only (`psro(..., meta="last")`), which cycles in
rock-paper-scissors. Every program runs only in `ascent.rewards.sandbox.run_code`: one sandbox call plays a whole
batch of matches, each program `exec`'d in its own namespace inside the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ascent import papers
from ascent.applications.program_br import LMOracle, first_code_block
from ascent.registry import Registry
from ascent.rewards.sandbox import Limits, run_code
from ascent.typed import ConfigError

CSRO_ORACLES: Registry = Registry("CSRO oracle")
"""Code-writing PSRO oracles: callables `request: CSRORequest -> list[str]` of candidate sources (`lm` is a class
that loads its model once: `CSRO_ORACLES.get("lm")()`)."""

LIMITS = Limits(cpu_s=20.0, call_s=1.0, wall_s=60.0, memory_mb=256)
MOVES = ("rock", "paper", "scissors")

_HARNESS = '''
def match(src_a, src_b, rounds):
    """Play program a against program b; a's mean payoff per round, or an error string naming the culprit."""
    players = []
    for tag, src in (("a", src_a), ("b", src_b)):
        env = {}
        try:
            exec(src, env)
            players.append(env["policy"])
        except Exception as e:
            return f"error {tag}: {type(e).__name__}: {e}"
    ha, hb, score = [], [], 0
    for _ in range(rounds):
        moves = []
        for tag, f, mine, theirs in (("a", players[0], ha, hb), ("b", players[1], hb, ha)):
            try:
                m = f(list(mine), list(theirs))
            except Exception as e:
                return f"error {tag}: {type(e).__name__}: {e}"
            if isinstance(m, bool) or m not in (0, 1, 2):
                return f"error {tag}: returned {m!r}, not 0, 1 or 2"
            moves.append(m)
        a, b = moves
        score += (0, 1, -1)[(a - b) % 3]
        ha.append(a)
        hb.append(b)
    return score / rounds
'''


def reference_programs() -> list[str]:
    """The 15 programs exploitability is measured with (and the scripted oracle's candidates)."""
    head = "def policy(my_moves, their_moves):\n"
    progs = [head + f"    return {a}\n" for a in range(3)]
    progs += [head + f"    return (their_moves[-1] + {k}) % 3 if their_moves else 0\n" for k in range(3)]
    progs += [head + f"    return (my_moves[-1] + {k}) % 3 if my_moves else 0\n" for k in range(1, 3)]
    progs += [head + f"    return (len(my_moves) + {k}) % 3\n" for k in range(1, 3)]
    most = "    top = max(range(3), key=their_moves.count) if their_moves else 0\n"
    progs += [head + most + f"    return (top + {k}) % 3\n" for k in range(3)]
    least = "    low = min(range(3), key=their_moves.count) if their_moves else 0\n"
    progs += [head + least + f"    return (low + {k}) % 3\n" for k in range(1, 3)]
    progs += [head + "    return (their_moves[-1] + 1) % 3 if len(their_moves) % 2 else 2\n"]
    return progs


def payoffs(rows: list[str], cols: list[str], rounds: int) -> tuple[np.ndarray, list[str | None]]:
    """(len(rows), len(cols)) mean payoff of each row program against each column program, one sandbox call;
    and per row program the first error it caused (None if it ran everywhere). A pair whose row program failed
    scores -1 (a lost round every round); a pair whose column program failed scores 0."""
    pairs = [[a, b, rounds] for a in rows for b in cols]
    res = run_code(_HARNESS, "match", pairs, LIMITS)
    m, errors = np.zeros((len(rows), len(cols))), [None] * len(rows)
    for k, out in enumerate(res.outputs + [{"error": res.status}] * (len(pairs) - len(res.outputs))):
        i, j = divmod(k, len(cols))
        v = out.get("ok", f"error a: {out.get('error')}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            m[i, j] = float(v)
        elif str(v).startswith("error b"):
            m[i, j] = 0.0
        else:
            m[i, j] = -1.0
            errors[i] = errors[i] or str(v)
    return m, errors


def nash(m: np.ndarray) -> np.ndarray:
    """The row player's maximin mixture of the zero-sum meta-game m (LP: max v s.t. sigma^T m >= v, sum sigma = 1)."""
    from scipy.optimize import linprog

    n, k = m.shape
    c = np.zeros(n + 1)
    c[-1] = -1.0  # maximise v
    a_ub = np.hstack([-m.T, np.ones((k, 1))])  # v - sigma^T m_j <= 0
    res = linprog(
        c, A_ub=a_ub, b_ub=np.zeros(k), A_eq=[[1.0] * n + [0.0]], b_eq=[1.0], bounds=[(0, 1)] * n + [(None, None)]
    )
    if not res.success:
        return np.full(n, 1.0 / n)
    sigma = np.clip(res.x[:n], 0, None)
    return sigma / sigma.sum()


@dataclass(frozen=True)
class CSRORequest:
    """What the oracle is given: the population, its meta-strategy, the game."""

    population: tuple[str, ...]
    sigma: tuple[float, ...]
    rounds: int


@dataclass
class CSROResult:
    population: list[str]
    exploitability: list[float] = field(default_factory=list)
    """Per iteration (index 0: the initial population): max over the reference programs of their payoff against
    the meta-strategy."""
    valid: int = 0
    candidates: int = 0
    added: int = 0


def exploitability(population: list[str], sigma: np.ndarray, rounds: int, refs: list[str]) -> float:
    m, _ = payoffs(refs, population, rounds)
    return float((m @ sigma).max())


def psro(
    oracle: Callable[[CSRORequest], list[str]],
    iterations: int,
    rounds: int = 12,
    meta: str = "nash",
    init: str | None = None,
) -> CSROResult:
    """PSRO from one initial program (always rock): each iteration solves the meta-game (`nash`, or `last`: all
    weight on the newest program, iterated best response), asks the oracle for candidates, scores them against the
    mixture and adds the best valid one. Exploitability is measured against `reference_programs()`."""
    if meta not in ("nash", "last") or iterations < 0 or rounds < 1:
        raise ConfigError(
            f"need meta in (nash, last), iterations >= 0, rounds >= 1; got {meta}, {iterations}, {rounds}"
        )
    refs = reference_programs()
    pop = [init or refs[0]]
    res = CSROResult(pop)

    def meta_strategy() -> np.ndarray:
        if meta == "last":
            return np.eye(len(pop))[-1]
        return nash(payoffs(pop, pop, rounds)[0])

    sigma = meta_strategy()
    res.exploitability.append(exploitability(pop, sigma, rounds, refs))
    for _ in range(iterations):
        cands = [first_code_block(c) for c in oracle(CSRORequest(tuple(pop), tuple(float(s) for s in sigma), rounds))]
        res.candidates += len(cands)
        if cands:
            m, errors = payoffs(cands, pop, rounds)
            value = m @ sigma
            ok = [e is None for e in errors]
            res.valid += sum(ok)
            best = max(range(len(cands)), key=lambda i: (ok[i], value[i], -i))
            if ok[best]:
                pop.append(cands[best])
                res.added += 1
        sigma = meta_strategy()
        res.exploitability.append(exploitability(pop, sigma, rounds, refs))
    res.population = pop
    return res


@CSRO_ORACLES.register("scripted", paper=None, fidelity="ascent")
def scripted(request: CSRORequest, params=None) -> list[str]:
    """The upper bound: every reference program (the loop keeps the best against the mixture: an exact best
    response within the reference class)."""
    return reference_programs()


def csro_prompt(request: CSRORequest) -> str:
    """Zero-shot CSRO prompt: the rules, the opponents' programs with their weights, the function to write."""
    shown = sorted(zip(request.sigma, request.population), key=lambda t: -t[0])[:4]
    opponents = "\n".join(f"Weight {w:.2f}:\n```python\n{src}```" for w, src in shown if w > 0.01)
    return (
        f"We play rock-paper-scissors for {request.rounds} rounds. Moves are numbers: 0 rock, 1 paper, 2 scissors. "
        "Paper beats rock, scissors beats paper, rock beats scissors. You score +1 for a win and -1 for a loss.\n\n"
        "Your opponent is drawn from these programs, with these weights:\n"
        f"{opponents}\n\n"
        "Write a Python function `policy(my_moves, their_moves)` that gets the two lists of past moves and returns "
        "your next move (0, 1 or 2) so that you beat these opponents. Reply with one ```python code block only."
    )


@CSRO_ORACLES.register(
    "lm",
    paper=papers.CSRO,
    fidelity="reduced",
    departures=(
        "SmolLM2-135M-Instruct (offline) instead of the paper's Gemini models; zero-shot prompting only (no "
        "iterative refinement, no AlphaEvolve); several samples per iteration, the best valid one against the "
        "meta-strategy joins the population",
        "repeated rock-paper-scissors only; exploitability measured against a fixed reference class of 15 programs",
    ),
)
class LMCodeOracle:
    """SmolLM2 writing a best response to the meta-strategy: samples of `csro_prompt(request)`."""

    def __init__(self, lm: LMOracle | None = None) -> None:
        self.lm = lm or LMOracle()

    def __call__(self, request: CSRORequest) -> list[str]:
        return self.lm.write(csro_prompt(request))
