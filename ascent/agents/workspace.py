"""Workspace reconstruction and adaptive downsampling (IterResearch, Chen et al., 2025, arXiv:2511.07327).

With `agent.context=workspace` an episode is a Markov chain of rounds instead of one growing conversation: the
context of round t is rebuilt from scratch as

    user:       the question + "\\n<report>" + M_t + "</report>"     (M_1 = "": the first round's report is empty)
    assistant:  a_{t-1}, the previous turn's action (its text minus its report block)
    tool:       o_{t-1}, the environment's observation of that action

(round 1: the user message only). In each turn the policy writes the updated report M_{t+1} inside
`<report>...</report>` followed by its action; a turn without a report block keeps M_t (ascent's reading: the paper's
policy always writes one). Every round is its own token sequence (`Trajectory.rounds`), so the context stays the
size of one question + one report + one exchange however long the episode runs, and each round is one training
sample (`ascent.agents.collector.pack_rounds`).

Adaptive downsampling: the number of round samples per batch varies with the episodes' lengths; EAPO drops a
random few so the count is a multiple of the data-parallel size (every worker gets equal micro-batches). On one
process ascent uses `agent.round_multiple` (default: the micro-batch size) in its place: `downsample` keeps
floor(N / m) * m of the N samples, chosen uniformly without replacement (all of them when N < m).

>>> split_report("<report>Kalo works for Vey Labs.</report><answer>Vey Labs</answer>", "")
('Kalo works for Vey Labs.', '<answer>Vey Labs</answer>')
>>> split_report("<answer>x</answer>", "old")
('old', '<answer>x</answer>')
>>> [m["content"] for m in workspace_messages([{"role": "user", "content": "Q: a?"}], "r", "act", "obs")]
['Q: a?\\n<report>r</report>', 'act', 'obs']
>>> len(downsample(37, 16, None)), len(downsample(7, 16, None))
(32, 7)
"""

from __future__ import annotations

import re
from typing import Optional

import torch

from ascent.envs.tools import REPORT_CLOSE, REPORT_OPEN

_REPORT = re.compile(re.escape(REPORT_OPEN) + r"(.*?)" + re.escape(REPORT_CLOSE), re.DOTALL)


def split_report(text: str, previous: str) -> tuple[str, str]:
    """A turn's text -> (the report it writes, its action): the report is the last `<report>...</report>` block's
    content (stripped), or `previous` when the turn writes none; the action is the text without the blocks."""
    blocks = _REPORT.findall(text)
    report = blocks[-1].strip() if blocks else previous
    return report, _REPORT.sub("", text).strip()


def with_report(head: list[dict[str, str]], report: str) -> list[dict[str, str]]:
    """The first round's messages (system?, user question) with the report appended to the user message."""
    out = [dict(m) for m in head]
    user = max(i for i, m in enumerate(out) if m["role"] == "user")
    out[user]["content"] = f"{out[user]['content']}\n{REPORT_OPEN}{report}{REPORT_CLOSE}"
    return out


def workspace_messages(
    head: list[dict[str, str]], report: str, action: str, observation: str, observation_role: str = "tool"
) -> list[dict[str, str]]:
    """Round t's reconstructed context: question + report M_t, the last action, its observation."""
    return with_report(head, report) + [
        {"role": "assistant", "content": action},
        {"role": observation_role, "content": observation},
    ]


def downsample(n: int, multiple: int, generator: Optional[torch.Generator]) -> list[int]:
    """Indices (ascending) of the round samples kept: floor(n / multiple) * multiple of range(n) drawn uniformly
    without replacement; all n when n < multiple (a batch is never emptied)."""
    if multiple < 1:
        raise ValueError(f"round_multiple must be >= 1, got {multiple}")
    keep = n - n % multiple if n >= multiple else n
    if keep == n:
        return list(range(n))
    return sorted(torch.randperm(n, generator=generator)[:keep].tolist())
