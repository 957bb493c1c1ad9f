"""`ScriptedEngine`: a rollout engine that "samples" text written by a Python function.

It follows the engine protocol (`generate(model, prompt_ids, n, settings, generator) -> Generation`), so
the agent loop runs unchanged over it: control-flow tests, and demonstrations from a scripted agent (warm
starts). `respond(context)` receives the decoded context (the rendered conversation so far, special
tokens included) and returns the reply; the reply's canonical tokenisation is emitted, followed by the
end-of-turn token unless `end_turn=False`, with log-prob `logprob` for every token.

>>> from ascent.policy.tokenizer import char_tokenizer
>>> from ascent.rollout.types import SamplingSettings
>>> tok = char_tokenizer("abc")
>>> engine = ScriptedEngine(tok, lambda context: "cab")
>>> gen = engine.generate(
...     None, [[tok.bos_token_id]], 1,
...     SamplingSettings(max_new_tokens=8, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id), None
... )
>>> tok.decode(gen.tokens[0, : int(gen.lengths[0])]), bool(gen.finished[0])
('cab<eos>', True)
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ascent.rollout.types import Generation, SamplingSettings


class ScriptedEngine:
    """An engine whose samples are `respond(context)`, tokenised canonically."""

    def __init__(
        self, tokenizer: Any, respond: Callable[[str], str], end_turn: bool = True, logprob: float = 0.0
    ) -> None:
        self.tokenizer, self.respond, self.end_turn, self.logprob = tokenizer, respond, end_turn, logprob
        self.contexts: list[str] = []
        """Every context it was asked to continue, in order."""

    def generate(
        self, model: Any, prompt_ids: list[list[int]], n: int, s: SamplingSettings, generator: Optional[torch.Generator]
    ) -> Generation:
        rows = []
        for p in prompt_ids:
            context = self.tokenizer.decode(p, skip_special_tokens=False)
            for _ in range(n):
                self.contexts.append(context)
                ids = list(self.tokenizer(self.respond(context), add_special_tokens=False)["input_ids"])
                rows.append((ids + [s.eos_id] if self.end_turn else ids)[: s.max_new_tokens])
        tokens = torch.full((len(rows), s.max_new_tokens), s.pad_id, dtype=torch.long)  # (N, max_new)
        for i, ids in enumerate(rows):
            tokens[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)  # (N,)
        logprobs = torch.where(
            torch.arange(s.max_new_tokens)[None, :] < lengths[:, None], self.logprob, 0.0
        ).float()  # (N, max_new)
        finished = torch.tensor([bool(r) and r[-1] == s.eos_id for r in rows], dtype=torch.bool)
        return Generation(tokens=tokens, logprobs=logprobs, lengths=lengths, finished=finished)
