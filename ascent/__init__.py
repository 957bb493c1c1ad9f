"""ascent: reinforcement-learning post-training of language models and LLM agents.

Data flows one way: data -> rollout -> rewards -> algorithms -> trainer, carried by typed records
(`ascent.rollout.types.RolloutBatch`). Algorithm pieces live in registries (`ascent.registry`).
"""

__version__ = "0.1.0"
