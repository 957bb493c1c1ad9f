"""The papers ascent's pieces cite, one `Paper` record each, in the order docs/references.md lists them.

A piece names its paper at registration (`@ADVANTAGES.register("grpo", paper=GRPO, fidelity="faithful")`);
a paper cited by one piece only may also be written inline there. Papers used outside registered pieces
(a command, a config key, a benchmark) or named to tell methods apart carry that use in `note`.
docs/references.md is generated from these records and the registries (`ascent references --write`).
"""

from __future__ import annotations

from ascent.registry import Paper

GRPO = Paper(
    "GRPO",
    "Shao et al.",
    2024,
    "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    "arXiv:2402.03300",
    section="baselines",
)
DR_GRPO = Paper(
    "Dr. GRPO",
    "Liu et al.",
    2025,
    "Understanding R1-Zero-Like Training: A Critical Perspective",
    "arXiv:2503.20783",
    section="baselines",
)
RLOO = Paper(
    "RLOO",
    "Ahmadian et al.",
    2024,
    "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs",
    "arXiv:2402.14740",
    section="baselines",
)
