"""In-context and meta reinforcement learning: task families sampled per task, multi-episode learning histories, and
sequence models that improve inside their context with frozen weights (docs/in_context.md)."""
