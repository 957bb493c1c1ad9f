"""Generic data plumbing: prompt encoding (`PromptEncoder`) and the resumable row sampler (`RowSampler`).
Tasks and their rows live in `ascent.tasks`."""

from ascent.data.prompts import PromptEncoder
from ascent.data.sampler import RowSampler

__all__ = ["PromptEncoder", "RowSampler"]
