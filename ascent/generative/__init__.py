"""RL for generators without tokens (issue 42's multimodal rows): CM-GRPO, GRPO on a consistency model's Gaussian
sampling steps (RAVEN, Lu, Zuo & Deng 2026, arXiv:2605.15190), on a toy 2-D consistency model
(`consistency`; Song et al. 2023, arXiv:2303.01469). Pieces register in `GENERATIVE` with their provenance."""

from ascent.generative.cm_grpo import GENERATIVE

__all__ = ["GENERATIVE"]
