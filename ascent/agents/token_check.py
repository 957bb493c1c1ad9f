"""Token checker: does rendering a trajectory's conversation with the chat template reproduce its ids?

A trainer that rebuilds multi-turn conversations as text and re-tokenises them trains on ids the policy
never sampled whenever the re-tokenisation differs (a stray BOS, a stripped message, a merge across a
boundary, a non-canonical tokenisation the model chose). The agent loop keeps the sampled ids; this
checker renders the conversation (user prompt, assistant turns as decoded text, observations in the tool
role) with the tokenizer's chat template, tokenises it, and reports the first position where it differs
from the trajectory's ids, with the tokens on both sides and what the trajectory holds there.

`same_text` separates the two kinds of divergence: True means the trajectory decodes to the rendered text
but tokenises it differently (typically a non-canonical tokenisation sampled by the model; the ids are
still the right ones to train on), False means the trajectory's text itself departs from the template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ascent.agents.chat import encode, render
from ascent.agents.trajectory import Trajectory


@dataclass(frozen=True)
class TokenCheck:
    """The result of checking one trajectory."""

    ok: bool
    """The rendered conversation tokenises to exactly the trajectory's ids."""
    index: Optional[int]
    """First position where they differ (None when ok); may equal the shorter length."""
    expected: list[int]
    """Rendered (template) ids from `index` on, a few."""
    got: list[int]
    """Trajectory ids from `index` on, a few."""
    expected_text: str
    got_text: str
    kind: Optional[str]
    """What the trajectory holds at `index`: prompt | sampled | template | observation | end (past its end)."""
    same_text: bool
    """The trajectory decodes to the rendered text."""
    rendered_len: int
    trajectory_len: int

    def describe(self) -> str:
        """One line for logs."""
        if self.ok:
            return f"ok ({self.trajectory_len} tokens)"
        return (
            f"diverges at token {self.index} "
            f"({self.kind}; {'same text, different tokenisation' if self.same_text else 'different text'}): "
            f"template {self.expected} {self.expected_text!r}, trajectory {self.got} {self.got_text!r} "
            f"(lengths {self.rendered_len} vs {self.trajectory_len})"
        )


def render_ids(traj: Trajectory, tokenizer: Any) -> tuple[str, list[int]]:
    """The trajectory's conversation rendered by the chat template: (text, ids). A conversation that
    does not end with an assistant message ends with the generation prompt, as the loop left it."""
    text = render(tokenizer, traj.messages, add_generation_prompt=traj.messages[-1]["role"] != "assistant")
    return text, encode(tokenizer, text)


def check_trajectory(traj: Trajectory, tokenizer: Any, window: int = 4) -> TokenCheck:
    """Compare a trajectory's ids with its conversation rendered by `tokenizer`'s chat template."""
    text, expected = render_ids(traj, tokenizer)
    got = traj.ids
    index = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), None)
    if index is None and len(expected) != len(got):
        index = min(len(expected), len(got))
    same = tokenizer.decode(got, skip_special_tokens=False) == text
    if index is None:
        return TokenCheck(True, None, [], [], "", "", None, same, len(expected), len(got))
    kinds = traj.token_kinds()
    exp, gt = expected[index : index + window], got[index : index + window]
    return TokenCheck(
        ok=False,
        index=index,
        expected=exp,
        got=gt,
        expected_text=tokenizer.decode(exp, skip_special_tokens=False),
        got_text=tokenizer.decode(gt, skip_special_tokens=False),
        kind=kinds[index] if index < len(kinds) else "end",
        same_text=same,
        rendered_len=len(expected),
        trajectory_len=len(got),
    )


def check_trajectories(trajs: list[Trajectory], tokenizer: Any, show: int = 3) -> dict[str, Any]:
    """Check every trajectory (every round of a workspace episode): counts, the matching fraction and the first
    `show` divergences described."""
    checks = [check_trajectory(r, tokenizer) for t in trajs for r in (t.rounds or [t])]  # workspace: each round
    bad = [(i, c) for i, c in enumerate(checks) if not c.ok]
    return {
        "checked": len(checks),
        "matched": len(checks) - len(bad),
        "match_frac": (len(checks) - len(bad)) / max(len(checks), 1),
        "same_text_mismatches": sum(c.same_text for _, c in bad),
        "divergences": [f"trajectory {i}: {c.describe()}" for i, c in bad[:show]],
    }
