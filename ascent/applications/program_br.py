"""PIBR: programmatic iterated best response, policies as source code that read each other (Lin, Zhu, Li, Li, Qiao,
Poupart, Zha & Wang 2025, "Policy-Conditioned Policies for Multi-Agent Task Solving", arXiv:2512.21024).

A policy is a Python program `policy(opponent_source) -> action`: it is given the opponent's source code, so it
can condition on what the opponent will do (Tennenholtz's program equilibrium). PIBR alternates the players; on
its turn the ego's program is rewritten by a best-response operator that sees the game, the opponent's code, its
own code and structured feedback (the "textual gradient"): the utility its code got against the opponent and the
failures of runtime unit tests (the program must define `policy`, run, and return a legal action). A candidate
replaces the current program only if it passes the tests and earns at least as much against the current opponent.

Best-response operators (`BR_ORACLES`; each one maps a `BRRequest` to a list of candidate sources):
- `lm`: the paper's operator, a language model writing the code (here SmolLM2-135M-Instruct, the model ascent
  loads offline; the paper uses large LLMs).
- `scripted`: ascent's upper bound for the small model: it enumerates a template class of programs (the code-reading
  ones "play x if the opponent's code returns y, else b" for the ego's favourite outcome (x, y), then the constant
  programs); the loop keeps the best, so this is an exact best response within the class.
- `actions`: classic iterated best response over plain actions (constant programs only), the no-code-reading
  control.

Every program, written by a model or not, runs only in `ascent.rewards.sandbox.run_code` (bubblewrap; no network,
no host files), one call per program with all its inputs. The games are common-payoff or symmetric coordination
matrix games (`GAMES`) where iterating best responses over plain actions stays at a poor equilibrium and
code-reading programs can reach the best one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ascent import papers
from ascent.registry import Registry
from ascent.rewards.sandbox import Limits, run_code
from ascent.typed import ConfigError

BR_ORACLES: Registry = Registry("best-response oracle")
"""Code-writing best-response operators, callables `request: BRRequest -> list[str]` of candidate sources: the
template ones are plain functions (`BR_ORACLES.resolve("scripted")`), `lm` a class that loads its model once
(`BR_ORACLES.get("lm")(LMParams())`)."""

LIMITS = Limits(cpu_s=2.0, call_s=1.0, wall_s=8.0, memory_mb=256)


@dataclass(frozen=True)
class MatrixGame:
    """A two-player matrix game: payoffs[p][a0][a1] is player p's payoff when player 0 plays a0 and player 1 a1."""

    name: str
    payoffs: tuple
    actions: tuple[str, ...]

    def __post_init__(self) -> None:
        p = np.asarray(self.payoffs, dtype=float)
        n = len(self.actions)
        if p.shape != (2, n, n):
            raise ConfigError(f"game {self.name}: payoffs must be (2, {n}, {n}), got {p.shape}")

    def u(self, player: int, a0: int, a1: int) -> float:
        return float(self.payoffs[player][a0][a1])

    def welfare_range(self) -> tuple[float, float]:
        w = np.asarray(self.payoffs, dtype=float).sum(0)
        return float(w.min()), float(w.max())


def _common(name: str, m: list[list[float]], actions: tuple[str, ...]) -> MatrixGame:
    return MatrixGame(name, (tuple(map(tuple, m)), tuple(map(tuple, m))), actions)


GAMES: dict[str, MatrixGame] = {
    # Claus & Boutilier 1998: the optimum (0, 0) is guarded by -30 miscoordination penalties
    "climbing": _common("climbing", [[11, -30, 0], [-30, 7, 6], [0, 0, 5]], ("a", "b", "c")),
    # Claus & Boutilier 1998 with k = -10: two optimal equilibria and a safe middling one
    "penalty": _common("penalty", [[10, 0, -10], [0, 2, 0], [-10, 0, 10]], ("a", "b", "c")),
    "stag_hunt": MatrixGame("stag_hunt", (((4, 0), (3, 3)), ((4, 3), (0, 3))), ("stag", "hare")),
    "coordination": _common("coordination", [[1, 0, 0], [0, 2, 0], [0, 0, 4]], ("a", "b", "c")),
}


@dataclass(frozen=True)
class BRRequest:
    """What a best-response operator is given on the ego's turn."""

    game: MatrixGame
    player: int
    """The ego (0 = row player, 1 = column player)."""
    own_source: str
    opponent_source: str
    feedback: str
    """The textual gradient: utility got, actions played, unit-test failures."""


@dataclass(frozen=True)
class Evaluation:
    """One program against the opponent's, both run in the sandbox."""

    ok: bool
    """The program passed the unit tests (defines policy, runs, returns a legal action on every probe)."""
    utility: float
    """The ego's payoff against the opponent (the game's minimum if not ok)."""
    actions: tuple[int, int] | None
    failures: tuple[str, ...] = ()


def _action(out: dict, n: int) -> tuple[int | None, str | None]:
    if "ok" not in out:
        return None, out.get("error", "no result")
    a = out["ok"]
    if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < n:
        return None, f"returned {a!r}, not an action in 0..{n - 1}"
    return a, None


def evaluate(game: MatrixGame, player: int, sources: list[str], opponent: str) -> list[Evaluation]:
    """Play each candidate source against `opponent` (the opponent program sees each candidate's source): one
    sandbox call per candidate (probes: the opponent's source, its own source, an empty string) and one for the
    opponent over all candidates."""
    n = len(game.actions)
    opp = run_code(opponent, "policy", [[s] for s in sources], LIMITS)
    worst = float(np.asarray(game.payoffs[player]).min())
    out = []
    for i, src in enumerate(sources):
        res = run_code(src, "policy", [[opponent], [src], [""]], LIMITS)
        failures = [] if res.status == "ok" else [f"the program did not finish ({res.status})"]
        acts = []
        for probe, o in zip(("the opponent's code", "your own code", "an empty string"), res.outputs):
            a, err = _action(o, n)
            acts.append(a)
            if err:
                failures.append(f"on {probe}: {err}")
        if len(res.outputs) < 3 and not failures:
            failures.append("the program returned no result")
        b, err = _action(opp.outputs[i], n) if i < len(opp.outputs) else (None, "opponent crashed")
        if failures or b is None:
            out.append(Evaluation(False, worst, None, tuple(failures or [f"opponent: {err}"])))
            continue
        a0, a1 = (acts[0], b) if player == 0 else (b, acts[0])
        out.append(Evaluation(True, game.u(player, a0, a1), (a0, a1)))
    return out


_FIRST_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|$)", re.S)


def first_code_block(completion: str) -> str:
    """The completion's first fenced code block (a small model often keeps writing after it; an unclosed block
    runs to the end), or the whole completion without one.

    >>> first_code_block("```python\\ndef policy(o):\\n    return 1\\n```\\nAnd another:\\n```python\\nx\\n```")
    'def policy(o):\\n    return 1\\n'
    >>> first_code_block("```python\\ndef policy(o):\\n    return 2")
    'def policy(o):\\n    return 2'
    """
    m = _FIRST_FENCE.search(completion)
    return m.group(1) if m else completion


def constant(a: int) -> str:
    return f"def policy(opponent_source):\n    return {a}\n"


def feedback(game: MatrixGame, player: int, ev: Evaluation) -> str:
    """The textual gradient given to the operator on the ego's next turn."""
    if not ev.ok:
        return "Your current code failed the unit tests: " + "; ".join(ev.failures)
    a0, a1 = ev.actions
    mine, theirs = (a0, a1) if player == 0 else (a1, a0)
    best = float(np.asarray(game.payoffs[player]).max())
    return (
        f"Your code played {mine} ({game.actions[mine]}), the opponent played {theirs} ({game.actions[theirs]}); "
        f"you got {ev.utility:g}. The best payoff in the table is {best:g}. Unit tests passed."
    )


@dataclass
class PIBRResult:
    """The programs and utilities after every turn."""

    sources: list[str]
    welfare: list[float] = field(default_factory=list)
    """Sum of both players' payoffs after each turn (index 0: the initial programs)."""
    accepted: int = 0
    """Turns whose best candidate replaced the current program with a different one (a tie counts)."""
    valid: int = 0
    """Candidates that passed the unit tests."""
    candidates: int = 0


def play(game: MatrixGame, sources: list[str]) -> Evaluation:
    """Player 0's evaluation of the current pair."""
    return evaluate(game, 0, [sources[0]], sources[1])[0]


def pibr(game: MatrixGame, oracle: Callable[[BRRequest], list[str]], init: tuple[int, int], rounds: int) -> PIBRResult:
    """Programmatic iterated best response from the constant programs `init`: `rounds` rounds of a turn each for
    player 0 then player 1; a turn keeps the first of the best candidates that pass the unit tests if it earns at
    least as much as the current program (a best response is weakly better; ties let code-reading programs in)."""
    sources = [constant(init[0]), constant(init[1])]
    res = PIBRResult(list(sources))
    ev = play(game, sources)
    res.welfare.append(_welfare(game, ev))
    for _ in range(rounds):
        for p in (0, 1):
            current = evaluate(game, p, [sources[p]], sources[1 - p])[0]
            request = BRRequest(game, p, sources[p], sources[1 - p], feedback(game, p, current))
            cands = [first_code_block(c) for c in oracle(request)]
            evs = evaluate(game, p, cands, sources[1 - p]) if cands else []
            res.candidates += len(cands)
            res.valid += sum(e.ok for e in evs)
            best = max(range(len(evs)), key=lambda i: (evs[i].ok, evs[i].utility, -i), default=None)
            better = best is not None and evs[best].ok and evs[best].utility >= current.utility
            if better and cands[best].strip() != sources[p].strip():
                sources[p] = cands[best]
                res.accepted += 1
            res.welfare.append(_welfare(game, play(game, sources)))
    res.sources = sources
    return res


def _welfare(game: MatrixGame, ev: Evaluation) -> float:
    if not ev.ok:
        return game.welfare_range()[0]
    return game.u(0, *ev.actions) + game.u(1, *ev.actions)


def best_cell(game: MatrixGame, player: int) -> tuple[int, int]:
    """The ego's favourite joint outcome as (own action, opponent action)."""
    n = len(game.actions)
    cells = [(x, y) for x in range(n) for y in range(n)]
    return max(cells, key=lambda c: game.u(player, *((c[0], c[1]) if player == 0 else (c[1], c[0]))))


def reading(x: int, y: int, b: int) -> str:
    """The code-reading program: play x if the opponent's code contains 'return y', else b."""
    return (
        f"def policy(opponent_source):\n    if 'return {y}' in opponent_source:\n        return {x}\n    return {b}\n"
    )


@BR_ORACLES.register("scripted", paper=None, fidelity="ascent")
def scripted(request: BRRequest, params=None) -> list[str]:
    """The upper bound: the code-reading programs 'play x if the opponent's code returns y, else b' for the ego's
    favourite outcome (x, y) and every fallback b, then every constant program; the loop keeps the first of the
    best (an exact best response within this class, preferring code that invites the favourite outcome)."""
    n = len(request.game.actions)
    x, y = best_cell(request.game, request.player)
    return [reading(x, y, b) for b in range(n)] + [constant(a) for a in range(n)]


@BR_ORACLES.register("actions", paper=None, fidelity="ascent")
def actions(request: BRRequest, params=None) -> list[str]:
    """Classic iterated best response over plain actions: the constant programs only (no code reading)."""
    return [constant(a) for a in range(len(request.game.actions))]


@dataclass(frozen=True)
class LMParams:
    samples: int = 3
    """Candidates sampled per turn."""
    max_new_tokens: int = 80
    """Tokens per candidate."""
    temperature: float = 0.7
    """Sampling temperature."""

    def __post_init__(self) -> None:
        if self.samples < 1 or self.max_new_tokens < 8 or not self.temperature > 0:
            raise ConfigError("need samples >= 1, max_new_tokens >= 8, temperature > 0")


def prompt(request: BRRequest) -> str:
    """The operator's instruction: the game, both programs and the feedback."""
    g, p = request.game, request.player
    rows = []
    for a in range(len(g.actions)):
        for b in range(len(g.actions)):
            a0, a1 = (a, b) if p == 0 else (b, a)
            rows.append(
                f"you play {a}, opponent plays {b}: you get {g.u(p, a0, a1):g}, opponent gets {g.u(1 - p, a0, a1):g}"
            )
    return (
        "You write a Python function for a two-player game. Actions are numbers "
        f"0 to {len(g.actions) - 1}. Payoffs:\n" + "\n".join(rows) + "\n\n"
        "Your function `policy(opponent_source)` receives the opponent's Python code as a string and returns your "
        "action. The opponent's code also reads yours.\n\nOpponent's code:\n```python\n"
        f"{request.opponent_source}```\n\nYour current code:\n```python\n{request.own_source}```\n\n"
        f"Feedback: {request.feedback}\n\nWrite an improved `policy(opponent_source)` that gets you a higher payoff. "
        "Reply with one ```python code block only."
    )


@BR_ORACLES.register(
    "lm",
    params=LMParams,
    paper=papers.PIBR,
    fidelity="reduced",
    departures=(
        "SmolLM2-135M-Instruct (offline) instead of the paper's large LLMs; one prompt per turn with the game, "
        "both programs and the feedback, several samples, the best valid one kept",
        "matrix games only (no Level-Based Foraging); the runtime unit tests are fixed probes (defines policy, "
        "returns a legal action on the opponent's code, its own code and an empty string)",
    ),
)
class LMOracle:
    """A language model writing the ego's program: sample `samples` completions of `prompt(request)` (chat
    template) and return them; the PIBR loop extracts the code and tests it in the sandbox."""

    def __init__(self, params: LMParams = LMParams(), model=None, tokenizer=None) -> None:
        if model is None:
            from ascent.policy.model import load_hf
            from ascent.policy.pretrained import smollm2_path

            policy = load_hf(smollm2_path())
            model, tokenizer = policy.model, policy.tokenizer
        self.params, self.model, self.tokenizer = params, model.eval(), tokenizer

    def __call__(self, request: BRRequest) -> list[str]:
        return self.write(prompt(request))

    def write(self, instruction: str) -> list[str]:
        """`samples` completions of one user message (chat template), decoded without the prompt."""
        import torch

        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": instruction}], tokenize=False, add_generation_prompt=True
        )
        ids = self.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            out = self.model.generate(
                **ids,
                do_sample=True,
                temperature=self.params.temperature,
                max_new_tokens=self.params.max_new_tokens,
                num_return_sequences=self.params.samples,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        n = ids["input_ids"].shape[1]
        return [self.tokenizer.decode(o[n:], skip_special_tokens=True) for o in out]
