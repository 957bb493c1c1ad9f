"""Tree-structured evidence sampling: `rollout.explorer=evidence_tree(root_share=0.5)`.

EAPO (Guan et al. 2026, "Evidence-Augmented Policy Optimization with Reward Co-Evolution for Long-Context
Reasoning", arXiv:2601.10306) samples reasoning as a tree whose first level is the extracted evidence and whose
second level is the answers built on each piece of evidence, which both shows how much the answer depends on the
evidence and gives each evidence node several outcomes. Here, for a drawn prompt with group size n:

    r = max(1, round(root_share · n)) roots are sampled from the prompt;
    each root's evidence-extraction point c is the token after its first `close` tag (`</evidence>`), found by
    decoding its tokens one by one; a root without one has c = 0;
    the n − r branches are spread round-robin over the roots; a branch keeps its root's tokens before c (forced:
    `completion_mask` 0, already in the loss through the root) and samples the answer on-policy from there.

So the roots of a group share nothing, and every branch shares its root's evidence: an evidence node holds the root
and its branches. `evidence_rm` then scores each node's evidence once per member (the same score, normalised within
the group), and its co-evolution (`outcome=`) labels each node with its members' outcomes, keeping the
outcome-consistent ones. A root without evidence branches from the prompt (a fresh sample). One branching level;
roots and branches share the group's baseline (the `branch` explorer's machinery, `ascent/rollout/explorers.py`).
Logged: `explore/branches`, `explore/branch_point_mean`, `explore/evidence_roots` (share of roots with evidence).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascent import papers
from ascent.rollout.explorers import EXPLORERS, BranchExplorer, ExplorerContext, Piece


@dataclass(frozen=True)
class EvidenceTreeParams:
    """Tree-structured evidence sampling: roots, then answers branched after each root's evidence."""

    root_share: float = 0.5
    """Share of each group sampled as roots: r = max(1, round(root_share · n)); the other n − r branch; in [0, 1]."""
    close: str = "</evidence>"
    """The tag that ends the evidence: branches resample everything after its first occurrence."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.root_share <= 1.0:
            raise ValueError(f"root_share must be in [0, 1], got {self.root_share}")
        if not self.close:
            raise ValueError("close must be the tag that ends the evidence, e.g. </evidence>")


def evidence_point(pieces: list[str], close: str) -> int:
    """The number of tokens up to and including the first `close` tag, given each token's decoded text; 0 without.

    >>> evidence_point(["<evidence>", "f", "9", "</evidence>", "<answer>", "9"], "</evidence>")
    4
    >>> evidence_point(["</", "evidence>", "x"], "</evidence>"), evidence_point(["f", "9"], "</evidence>")
    (2, 0)
    """
    text = ""
    for j, piece in enumerate(pieces):
        text += piece
        if close in text:
            return j + 1
    return 0


@EXPLORERS.register(
    "evidence_tree",
    params=EvidenceTreeParams,
    paper=papers.EAPO_EVIDENCE,
    fidelity="reduced",
    departures=(
        "one branching level (evidence, then answers) with the group size as the budget; the paper's tree widths "
        "are not reproduced",
        "roots and branches share one group baseline: the learner sees a plain group",
    ),
)
class EvidenceTreeExplorer(BranchExplorer):
    """EAPO's Tree-Structured Evidence Sampling (Guan et al. 2026, arXiv:2601.10306): r roots per group, and the
    other samples branch from a root right after its evidence (`close`), resampling only the answer."""

    def __init__(self, ctx: ExplorerContext, params: EvidenceTreeParams = EvidenceTreeParams()) -> None:
        super().__init__(ctx)
        self.params = params  # type: ignore[assignment]  # root_share is all `collect` reads

    def branch_points(self, prompt_ids: list[list[int]], root_pieces: list[Piece]) -> list[list[int]]:
        tok, close = self.ctx.policy.tokenizer, self.params.close
        points, roots, with_evidence = [], 0, 0
        for tokens, _, n, _ in root_pieces:
            row = []
            for j in range(len(n)):
                ids = tokens[j, : int(n[j])].tolist()
                c = evidence_point([tok.decode([t]) for t in ids], close)
                row.append(c)
                roots, with_evidence = roots + 1, with_evidence + (c > 0)
            points.append(row)
        self.last["evidence_roots"] = with_evidence / max(roots, 1)
        return points
