"""Rewards for agents: outcome exact match / F1, TRACE tool cost (HyperEyes), source consistency (SOAR),
citation rubric (CaRR), evidence recall (DAVID-GRPO), IGPO information gain and the geometric discount by rounds
(IterResearch); RLVMR's meta-reasoning tags are in `ascent.rewards.meta_tags`; the papers are in docs/references.md.

They have the registry signature `fn(prompts, completions, **fields) -> list[float | None]`. Agent
batches (`ascent.agents.collector.pack_episodes`) give every reward, per episode, the row's fields
(e.g. `answer`, `evidence`, `evidence_titles`) and:

- `agent_info`: the last environment step's info (for search_world: `answer`, `correct`, `supported`,
  `num_tool_calls`, `docs_retrieved`, `docs_opened`, `evidence_recall`, ...);
- `agent_turn_texts`: each model turn's text; `agent_turn_infos`: each step's info;
- `agent_turns`: each turn's sampled span; `agent_finish_reason`: done | max_turns | max_tokens;
- `agent_answer_probs` (with `agent.turn_rewards=igpo` or `eapo`): the policy's probability of the gold answer
  after the prompt and after each observation (`ascent.agents.collector.answer_probs`).

A final answer is `agent_info["answer"]` when the environment reports it, else the `<answer>...</answer>`
of the last turn (of the completion for single-turn rows). Answers compare after SQuAD normalisation.
Rewards with knobs take them as keywords: `trace(floor=2)`, `round_discount(gamma=0.8)`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Optional, Sequence

from ascent import papers
from ascent.envs.search_world import normalize
from ascent.envs.tool_env import parse_answer
from ascent.rewards.builtin import REWARDS
from ascent.rewards.shaping import Matcher, call_reward

Values = list[Optional[float]]
_SOURCE = re.compile(r"<source>\s*(external|internal)\s*</source>", re.IGNORECASE)
_CITE = re.compile(r"<cite>(.*?)</cite>", re.DOTALL)
"""Meta-reasoning tags of `meta_tags`: a turn is tagged when it contains `<plan>`, `<explore>` or `<reflect>`."""


def _col(values: Optional[Sequence[Any]], n: int) -> list[Any]:
    return list(values) if values is not None else [None] * n


def final_answer(completion: str, info: Optional[dict[str, Any]], turn_texts: Optional[list[str]]) -> Optional[str]:
    """The episode's final answer: the environment's `answer`, else the last turn's (or the completion's) `<answer>`.

    >>> final_answer("", {"answer": "Velmor"}, None), final_answer("x <answer>7</answer>", None, None)
    ('Velmor', '7')
    """
    if isinstance(info, dict) and info.get("answer") is not None:
        return str(info["answer"])
    return parse_answer(turn_texts[-1] if turn_texts else completion)


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 of two answers after `normalize`.

    >>> token_f1("Silthar Labs", "the Silthar Works"), token_f1("", "x")
    (0.5, 0.0)
    """
    p, g = normalize(prediction).split(), normalize(gold).split()
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or common == 0:
        return float(p == g)
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def _answers(completions: Sequence[str], agent_info, agent_turn_texts) -> list[Optional[str]]:
    n = len(completions)
    return [final_answer(c, i, t) for c, i, t in zip(completions, _col(agent_info, n), _col(agent_turn_texts, n))]


@REWARDS.register("answer_em", paper=None, fidelity="ascent")
def answer_em(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    agent_info=None,
    agent_turn_texts=None,
    **_: Any,
) -> Values:
    """1 if the final answer equals the gold `answer` after normalisation, 0 otherwise (no answer: 0; no gold: None)."""
    gold = _col(answer, len(completions))
    return [
        None if g is None else float(p is not None and normalize(p) == normalize(str(g)))
        for p, g in zip(_answers(completions, agent_info, agent_turn_texts), gold)
    ]


@REWARDS.register("answer_f1", paper=papers.SQUAD, fidelity="faithful")
def answer_f1(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    agent_info=None,
    agent_turn_texts=None,
    **_: Any,
) -> Values:
    """SQuAD token F1 of the final answer against the gold `answer` (no answer: 0; no gold: None)."""
    gold = _col(answer, len(completions))
    return [
        None if g is None else (0.0 if p is None else token_f1(p, str(g)))
        for p, g in zip(_answers(completions, agent_info, agent_turn_texts), gold)
    ]


@REWARDS.register(
    "trace",
    paper=papers.HYPEREYES,
    fidelity="reduced",
    departures=(
        (
            "the ratio form min(1, (ref + 1)/(calls + 1)) and the EMA tightening of the reference count are ascent's "
            "own (not in the abstract)"
        ),
        "counts every tool call, not search rounds (parallel calls in one turn each count)",
    ),
)
class Trace:
    """TRACE tool-cost reward (HyperEyes, Li et al., 2026, arXiv:2605.07177): a correct episode with c tool
    calls scores

        r = min(1, (ref + 1) / (c + 1)),   0 when wrong (correctness from `matcher`, default answer_em),

    against a reference tool-call count `ref` that only tightens during training: after each scored
    batch, ref <- max(floor, min(ref, (1 - rate) ref + rate m)), m = the mean tool calls of the batch's
    correct episodes. `ref=None` starts it at the first batch's m. Episodes at or under the reference get
    the full outcome; costlier ones get less, so the policy is pushed below the reference, which then
    follows it down (to `floor`). This form (the ratio, the tightening rule) is ascent's; the paper's exact
    formula is not in its abstract. Every tool call counts (parallel calls in one turn each count). Use it
    beside the outcome (`reward=[answer_em,trace]`) or alone.

    `warmup` batches are scored by correctness alone before the reference starts (first solve, then save
    calls): a tool-cost penalty from the first step also teaches an agent that searches too rarely to
    search even less — on search-agent, penalising the repeated search pushed the first search down too
    and kept a blind spot unsearched in 2 of 3 seeds (docs/results.md).

    Its state (`ref`, batches scored) is saved in the trainer's checkpoint (`RewardRunner.state_dict`), so
    a resumed run continues with the same reference; evaluation uses its own runner and never moves it.
    """

    def __init__(
        self,
        ref: Optional[float] = None,
        floor: float = 1.0,
        rate: float = 0.5,
        matcher: Matcher = "answer_em",
        warmup: int = 0,
    ) -> None:
        if floor < 0 or not 0 < rate <= 1 or (ref is not None and ref < 0) or warmup < 0:
            raise ValueError(
                "trace needs floor >= 0, 0 < rate <= 1, ref >= 0 (or None) and warmup >= 0, "
                f"got floor={floor}, rate={rate}, ref={ref}, warmup={warmup}"
            )
        self.ref, self.floor, self.rate, self.matcher, self.warmup = ref, floor, rate, matcher, int(warmup)
        self.batches = 0
        self.__name__ = "trace"

    def __call__(self, prompts: list[str], completions: list[str], agent_info=None, **fields: Any) -> Values:
        correct = call_reward(self.matcher, prompts, completions, {"agent_info": agent_info, **fields})
        self.batches += 1
        if self.batches <= self.warmup:
            return [None if y is None else float(y >= 0.5) for y in correct]
        calls = [float((i or {}).get("num_tool_calls", 0)) for i in _col(agent_info, len(completions))]
        good = [c for c, y in zip(calls, correct) if y is not None and y >= 0.5]
        if self.ref is None and good:
            self.ref = max(self.floor, sum(good) / len(good))
        ref = self.ref if self.ref is not None else math.inf
        out = [None if y is None else (y >= 0.5) * min(1.0, (ref + 1.0) / (c + 1.0)) for c, y in zip(calls, correct)]
        if good and self.ref is not None:
            self.ref = max(self.floor, min(self.ref, (1 - self.rate) * self.ref + self.rate * sum(good) / len(good)))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "batches": self.batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ref, self.batches = state["ref"], state.get("batches", 0)


def declared_source(turn_texts: Optional[list[str]], completion: str) -> Optional[str]:
    """The last `<source>external|internal</source>` the agent wrote (lower case), or None.

    >>> declared_source(["<tool_call>...", "<answer>X</answer><source>External</source>"], "")
    'external'
    """
    found = _SOURCE.findall("\n".join(turn_texts) if turn_texts else completion)
    return found[-1].lower() if found else None


@REWARDS.register(
    "source_consistency",
    paper=papers.SOAR,
    fidelity="reduced",
    departures=(
        (
            "SOAR's formula is not published: an agreement indicator of the last `<source>` tag with the "
            "environment's `supported` flag"
        ),
        (
            "one source tag per answer; the two tagged streams with per-stream credit are the advantage `soar` "
            "(ascent/algorithms/soar.py), with this reward as (part of) the run's sequence reward"
        ),
    ),
)
def source_consistency(
    prompts: list[str], completions: list[str], agent_info=None, agent_turn_texts=None, missing: float = 0.0, **_: Any
) -> Values:
    """SOAR source-consistent reward (SOurce-Aware Reinforcement learning; arXiv preprint, authors and id not
    found: docs/references.md): the agent tags its answer's source, `<source>external</source>`
    (retrieved evidence) or `<source>internal</source>` (its own knowledge). r = 1 when the tag agrees with the
    evidence: external and the answer appears in a retrieved document (the environment's `supported`), or
    internal and it does not; else 0. No answer: 0; no tag: `missing`; no `supported` in the info: None.
    The exact SOAR formula is not published; this is the agreement indicator. Mix it with the outcome."""
    n = len(completions)
    out: Values = []
    for c, info, texts in zip(completions, _col(agent_info, n), _col(agent_turn_texts, n)):
        if not isinstance(info, dict) or "supported" not in info:
            out.append(None)
            continue
        source = declared_source(texts, c)
        if final_answer(c, info, texts) is None:
            out.append(0.0)
        elif source is None:
            out.append(float(missing))
        else:
            out.append(float((source == "external") == bool(info["supported"])))
    return out


def _seen(info: Optional[dict[str, Any]]) -> set[str]:
    info = info or {}
    return set(info.get("docs_retrieved", [])) | set(info.get("docs_opened", []))


def citations(turn_texts: Optional[list[str]], completion: str) -> set[str]:
    """Ids the agent cited: the comma/space-separated contents of every `<cite>...</cite>`.

    >>> sorted(citations(["<answer>X</answer> <cite>doc-001, doc-004</cite>"], ""))
    ['doc-001', 'doc-004']
    """
    text = "\n".join(turn_texts) if turn_texts else completion
    return {c for body in _CITE.findall(text) for c in re.split(r"[,\s]+", body.strip()) if c}


def rubric_score(
    completion: str,
    gold: Any,
    evidence: list[str],
    titles: Optional[list[str]],
    info: Optional[dict[str, Any]],
    texts: Optional[list[str]],
) -> float:
    """CaRR's rubric reward of one episode (see `citation_rubric`): the share of the k hop items that are
    satisfied and connected to the answer."""
    k = len(evidence)
    titles = list(titles or [])
    cited, seen = citations(texts, completion), _seen(info)
    spoken = f" {normalize(' '.join(texts) if texts else completion)} "
    named = lambda t: f" {normalize(t)} " in spoken  # noqa: E731
    pred = final_answer(completion, info, texts)
    right = gold is not None and pred is not None and normalize(pred) == normalize(str(gold))
    satisfied = []
    for i, doc in enumerate(evidence):
        entities = [named(titles[i])] if 1 <= i < len(titles) else []  # hop 0's subject is in the question
        entities.append(named(titles[i + 1]) if i + 1 < k and i + 1 < len(titles) else pred is not None)
        supported = doc in cited and doc in seen and (i + 1 < k or right)  # the last hop's object is E0
        satisfied.append(all(entities) and supported)
    connected = 0  # BFS from the answer E0 over a chain: the unbroken run of satisfied items from the last hop
    for ok in reversed(satisfied):
        if not ok:
            break
        connected += 1
    return connected / k


@REWARDS.register(
    "citation_rubric",
    paper=papers.CARR,
    fidelity="reduced",
    departures=(
        "rubrics are the gold hop documents and titles matched as strings; CaRR has an LLM identify the "
        "entities and judge each filled statement against the cited pages (no judge model at CPU scale)",
    ),
)
def citation_rubric(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    evidence=None,
    evidence_titles=None,
    agent_info=None,
    agent_turn_texts=None,
    **_: Any,
) -> Values:
    """CaRR citation rubric (Zhang et al., 2026, arXiv:2601.06021; authors' reward server
    github.com/THUDM/CaRR): one rubric item per hop i, the single-hop statement "entity_i -> entity_{i+1}"
    (the last hop's object is the answer, CaRR's E0). Item i counts (score 1) only when all three hold:
    its hidden entities are identified (bridge entities `evidence_titles[1:]` named in the agent's turns;
    E0: a final answer given), it is supported (its document e_i is cited, `<cite>e_i</cite>`, and was
    retrieved or opened; for the last hop the filled statement holds only if the answer is the gold one),
    and it is connected to the answer (reachable from E0 through satisfied items; on a chain: every later
    hop is satisfied too). r = counted items / k, in [0, 1]; correctness is not a separate item. No
    `evidence`: None. Reduction: the rubrics are the gold hop documents and titles matched as strings,
    where CaRR has an LLM identify the entities and judge each filled statement against the cited pages.
    C-GRPO's combination with the outcome is the `c_grpo` reward."""
    n = len(completions)
    out: Values = []
    rows = zip(
        completions,
        _col(answer, n),
        _col(evidence, n),
        _col(evidence_titles, n),
        _col(agent_info, n),
        _col(agent_turn_texts, n),
    )
    for c, gold, ev, titles, info, texts in rows:
        out.append(None if not ev else rubric_score(c, gold, list(ev), titles, info, texts))
    return out


@REWARDS.register(
    "c_grpo",
    paper=papers.CARR,
    fidelity="reduced",
    departures=(
        "the rubric is `citation_rubric`'s string-matched one; the optional normalisation of the rubric by the "
        "group's best correct rollout is not applied (rewards are per rollout)",
    ),
)
def c_grpo(
    prompts: list[str],
    completions: list[str],
    answer: Optional[list[Any]] = None,
    evidence=None,
    evidence_titles=None,
    agent_info=None,
    agent_turn_texts=None,
    alpha: float = 0.3,
    **_: Any,
) -> Values:
    """C-GRPO's reward (CaRR, Zhang et al., 2026, arXiv:2601.06021): r = (1 - alpha) o + alpha o R_rubric,
    o = 1 for an exactly right answer (normalised), R_rubric = `citation_rubric`: the rubric counts for
    correct rollouts only, so a wrong answer gets 0 however well it cites. alpha = 0.3 as in the CaRR
    scripts' rubric_reward_ratio. No answer: None. Reduction: the paper's optional normalisation of the rubric
    by the group's best correct rollout is not applied (rewards are per rollout here)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"c_grpo: alpha must be in [0, 1], got {alpha}")
    n = len(completions)
    out: Values = []
    rows = zip(
        completions,
        _col(answer, n),
        _col(evidence, n),
        _col(evidence_titles, n),
        _col(agent_info, n),
        _col(agent_turn_texts, n),
    )
    for c, gold, ev, titles, info, texts in rows:
        if gold is None:
            out.append(None)
            continue
        pred = final_answer(c, info, texts)
        o = float(pred is not None and normalize(pred) == normalize(str(gold)))
        rubric = rubric_score(c, gold, list(ev), titles, info, texts) if ev else 0.0
        out.append((1.0 - alpha) * o + alpha * o * rubric)
    return out


@REWARDS.register(
    "evidence_recall",
    paper=papers.DAVID_GRPO,
    fidelity="reduced",
    departures=(
        (
            "DAVID-GRPO's retrieval credit only (share of gold evidence documents shown or opened); its near-miss "
            "resampling from truncated trajectories is the explorer `near_miss`, its expert warm start is not built"
        ),
    ),
)
def evidence_recall(prompts: list[str], completions: list[str], evidence=None, agent_info=None, **_: Any) -> Values:
    """DAVID-GRPO retrieval credit (Han et al., 2026, arXiv:2601.21699): the share of the gold evidence
    documents (`evidence`) the agent retrieved (shown by search) or opened. No evidence: None."""
    n = len(completions)
    return [
        None if not ev else sum(d in _seen(info) for d in ev) / len(ev)
        for ev, info in zip(_col(evidence, n), _col(agent_info, n))
    ]


def igpo_turn_rewards(probs: list[Optional[float]], step_rewards: list[float]) -> list[float]:
    """IGPO turn rewards (Wang et al., 2025, arXiv:2510.14967) of one episode: turn t's information gain
    p_{t+1} - p_t, with p_t the policy's probability of the gold answer before turn t (`answer_probs`: after
    the prompt, then after each observation); a turn no observation followed (the final answer) keeps its
    step reward (the outcome).

    >>> igpo_turn_rewards([0.1, 0.4, 0.3, None], [0.0, 0.0, 1.0])
    [0.30000000000000004, -0.10000000000000003, 1.0]
    """
    return [
        probs[t + 1] - probs[t] if probs[t] is not None and probs[t + 1] is not None else float(r)
        for t, r in enumerate(step_rewards)
    ]


EAPO_FLOOR = 1e-6
"""`eapo_turn_rewards`: probabilities are floored here before the log, so a gain is finite (at most -log floor)."""


def eapo_turn_rewards(probs: list[Optional[float]], kinds: list[int], floor: float = EAPO_FLOOR) -> list[float]:
    """Exploration-Aware PO's exploration reward (Hua et al., 2026, arXiv:2605.08978) of one episode, ascent's
    reading of the paper's variational-inference reward: an exploratory turn t (kind 1: a tool call) followed by an
    observation earns the variational estimate of the information its observation o_t carries about the
    task-completion action a* (the gold answer), with the policy itself as the variational posterior q:

        I(a*; o_t | h_t) >= H(a* | h_t) + E log q(a* | h_t, a_t, o_t)      (Barber-Agakov bound)
        r_t = log q(a* | h_{t+1}) - log q(a* | h_t)                         (H estimated by -log q(a* | h_t))

    q(a* | h) = `probs` (`ascent.agents.collector.answer_probs`: the geometric mean per token of the policy's
    probability of the gold answer after history h; entries: after the prompt, then after each observation), floored
    at `floor`. r_t <= -log q(a* | h_t): exploring pays only as much as the policy is still uncertain, so a turn that
    explores when the answer is already clear earns at most ~0 (the paper's "explore only when uncertainty is high"),
    and one that makes the answer less likely is negative. Task turns (kind 0) and turns no observation followed
    get 0 (their credit is the outcome, which `explore_group` adds to every turn's return).

    >>> [round(x, 4) for x in eapo_turn_rewards([0.1, 0.4, 0.5, None], [1, 1, 0])]
    [1.3863, 0.2231, 0.0]
    """
    if len(probs) != len(kinds) + 1:
        raise ValueError(f"eapo_turn_rewards: {len(probs)} probabilities for {len(kinds)} turns (need turns + 1)")
    out = []
    for t, k in enumerate(kinds):
        a, b = probs[t], probs[t + 1]
        gain = k == 1 and a is not None and b is not None
        out.append(math.log(max(b, floor)) - math.log(max(a, floor)) if gain else 0.0)
    return out


@REWARDS.register(
    "igpo",
    paper=papers.IGPO,
    fidelity="reduced",
    departures=(
        (
            "as a sequence reward: the total information gain without the outcome; the per-turn gains reach "
            "turn-level estimators through `agent.turn_rewards=igpo`"
        ),
        "IGPO's own turn advantage (group-normalised turn rewards, discounted sum) is not a named estimator",
    ),
)
def igpo(prompts: list[str], completions: list[str], agent_answer_probs=None, **_: Any) -> Values:
    """IGPO's total information gain (Wang et al., 2025, arXiv:2510.14967) as a sequence reward: sum over turns of
    p_{t+1} - p_t (`igpo_turn_rewards` without the outcome), i.e. how much the episode's observations
    raised the policy's probability of the gold answer. Turn-level use: `agent.turn_rewards=igpo` puts
    the per-turn gains in extras['turn_rewards']; this reward needs that too (it fills agent_answer_probs)."""
    if agent_answer_probs is None:
        raise ValueError(
            "the igpo reward needs the gold answer's probabilities: set agent.turn_rewards=igpo (agent tasks only)"
        )
    out: Values = []
    for probs in agent_answer_probs:
        gains = [b - a for a, b in zip(probs[:-1], probs[1:]) if a is not None and b is not None] if probs else []
        out.append(float(sum(gains)))
    return out


@REWARDS.register(
    "round_discount",
    paper=papers.ITERRESEARCH,
    fidelity="reduced",
    departures=(
        (
            "round samples (agent.context=workspace): r_t = gamma^(T-t) R_T is ascent's reading of EAPO's geometric "
            "discount; a whole-history episode gets gamma^rounds x base, ascent's own form for one sample per episode"
        ),
        "R_T is any registered reward (default answer_em), not only the paper's 0/1 judge verdict",
    ),
)
def round_discount(
    prompts: list[str], completions: list[str], gamma: float = 0.9, reward: Matcher = "answer_em", **fields: Any
) -> Values:
    """Efficiency-aware discount by rounds (IterResearch / EAPO, Chen et al., 2025, arXiv:2511.07327).
    A round sample of a workspace episode (`agent.context=workspace`: fields `agent_round` t, 1-based, and
    `agent_rounds` T): r_t = gamma ** (T - t) * R, R = the episode's reward `reward` (default answer_em), so the
    last round keeps R and a round k rounds before the end gets gamma^k R; shorter episodes give every round
    more. A whole-history episode (one sample): r = gamma ** rounds * R, rounds = the model turns an observation
    followed (turns - 1 for a finished episode, all of them for a cut one; 0 for single-turn rows)."""
    if not 0 < gamma <= 1:
        raise ValueError(f"round_discount needs 0 < gamma <= 1, got {gamma}")
    base = call_reward(reward, prompts, completions, fields)
    n = len(completions)
    turns, finish = _col(fields.get("agent_turns"), n), _col(fields.get("agent_finish_reason"), n)
    rounds = [0 if t is None else max(0, len(t) - (f == "done")) for t, f in zip(turns, finish)]
    at, total = _col(fields.get("agent_round"), n), _col(fields.get("agent_rounds"), n)
    rounds = [k if t is None or m is None else m - t for k, t, m in zip(rounds, at, total)]
    return [None if b is None else gamma**k * b for b, k in zip(base, rounds)]
