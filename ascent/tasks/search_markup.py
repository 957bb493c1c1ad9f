"""The search world's warm-start oracle with a markup (`search_world(oracle_markup=cite|meta|soar)`): the scripted
demonstrations write the tags a reward or an advantage reads, so that a warm start which imitates them gives RL a
policy whose markup can be rewarded. Each markup is deliberately imperfect: at the rate `oracle_markup_error` the
oracle makes that markup's own mistake, so a reward on the markup has something to improve.

- `cite` (CaRR, `citation_rubric` / `c_grpo`): an answer found by searching is preceded by
  `<cite>doc-i, ...</cite>`, the documents of every hop; a mistake cites one other document of the world instead
  of the last hop's (never shown to the agent) or drops the citation (half each). A guess cites nothing.
- `meta` (RLVMR, `meta_tags`): the first turn starts with `<plan>search</plan>` (or `<plan>guess</plan>` before a
  guess), every tool call with `<explore></explore>`; a mistake drops a tag (each tag on its own coin). A repeated
  search keeps its `<explore>` tag: RLVMR scores an exploration that only repeats a call -1 (ascent's rule), so the
  oracle's redundant searches (`oracle_p_redundant`) are marked mistakes too. The oracle never fails a step, so it
  writes no `<reflect>` (scored only right after a failed step).
- `soar` (SOAR, `source_consistency` and `algorithm.advantage=soar`): an answer found by searching is preceded by
  `<external>SENTENCE</external><source>external</source>`, the sentence of the hit that states it; a guess by
  `<internal>ANSWER</internal><source>internal</source>`. A mistake on a searched answer swaps the answer in the
  quoted sentence for a fabricated one (the external stream then holds words the agent was never shown) or tags it
  internal (half each); a mistake on a guess dresses it as evidence: `<external>SUBJECT ... GUESS</external>`
  (fabricated, nothing was shown) with `<source>external</source>`.

The markup stands before `<answer>` (the agent loop stops a turn at `</answer>`), and every tag is a whole token of
the task's tokenizer (`MARKUP_PIECES`). Coin flips come from the oracle's random stream, so demonstrations stay
reproducible.
"""

from __future__ import annotations

import random
from typing import Optional

from ascent.envs.search_world import OracleAgent, Question, evidence_sentence
from ascent.envs.tools import ToolCall, parse_tool_calls

MARKUPS = ("cite", "meta", "soar")
"""The oracle's markups (`search_world(oracle_markup=...)`); empty string: none."""

MARKUP_PIECES = {
    "cite": ["<cite>", "</cite>", "doc-"],
    "meta": ["<plan>", "</plan>", "<explore>", "</explore>", "<reflect>", "</reflect>", "search", "guess"],
    "soar": ["<external>", "</external>", "<internal>", "</internal>", "<source>", "</source>", "external", "internal"],
}
"""The tokenizer's whole tokens for each markup (the tags, and the words the oracle writes inside them)."""


def mark(oracle: OracleAgent, markup: str, error: float, context: str, reply: str) -> str:
    """`reply`, the oracle's next reply after `context`, with `markup`'s tags (module docstring); a mistake at
    rate `error`, drawn from the oracle's random stream."""
    q = oracle.question(context)
    if not markup or q is None:
        return reply
    rng = oracle.rng
    searched = any(isinstance(c, ToolCall) for c in parse_tool_calls(context))
    answer_at = reply.find("<answer>")
    if markup == "meta":
        if answer_at < 0 or not searched:  # a tool call, or a first-turn answer (a guess)
            explore = "" if answer_at >= 0 or rng.random() < error else "<explore></explore>"
            reply = explore + reply
        if not searched:
            plan = "" if rng.random() < error else f"<plan>{'guess' if answer_at >= 0 else 'search'}</plan>"
            reply = plan + reply
        return reply
    if answer_at < 0:
        return reply
    head, tail = reply[:answer_at], reply[answer_at:]
    given = tail[len("<answer>") : tail.find("</answer>")]
    if markup == "cite":
        return head + (cite(oracle, q, rng, error) if searched else "") + tail
    return head + sources(oracle, q, given, searched, rng, error) + tail


def cite(oracle: OracleAgent, q: Question, rng: random.Random, error: float) -> str:
    """The citation of a searched answer: every hop's document; a mistake cites a wrong last document or none."""
    docs = list(q.evidence)
    if rng.random() < error:
        if rng.random() < 0.5:
            return ""
        others = sorted(d for d in oracle.world.docs if d not in q.evidence)
        docs[-1] = rng.choice(others)
    return f"<cite>{', '.join(docs)}</cite>"


def sources(oracle: OracleAgent, q: Question, given: str, searched: bool, rng: random.Random, error: float) -> str:
    """SOAR's streams and source tag before an answer (module docstring)."""
    world = oracle.world
    if not searched:
        if rng.random() < error:  # a guess passed off as evidence
            return f"<external>{world.docs[q.subject].title} {given}.</external><source>external</source>"
        return f"<internal>{given}</internal><source>internal</source>"
    sentence = evidence_sentence(world.docs[q.evidence[-1]].text, q.answer)
    if rng.random() < error:
        if rng.random() < 0.5:
            return f"<external>{sentence}</external><source>internal</source>"
        fake = fabricated(oracle, q, rng)
        if fake is not None:
            sentence = sentence.replace(q.answer, fake)
    return f"<external>{sentence}</external><source>external</source>"


def fabricated(oracle: OracleAgent, q: Question, rng: random.Random) -> Optional[str]:
    """Another answer of the question's kind (the oracle's guess pool), or None when there is none."""
    for _ in range(8):
        guess = oracle.guess(q)[len("<answer>") : -len("</answer>")]
        if guess != q.answer:
            return guess
    return None
