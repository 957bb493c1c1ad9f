"""Prompt text -> token ids, with the chat template when the recipe asks for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class PromptEncoder:
    """Encodes prompts the same way for rollouts, the warm start and evaluation."""

    tokenizer: Any
    chat_template: bool = False
    system_prompt: Optional[str] = None
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __call__(self, prompt: str) -> list[int]:
        """Token ids of a prompt (memoised: prompts repeat across epochs and groups)."""
        if prompt not in self._cache:
            self._cache[prompt] = self._encode(prompt)
        return list(self._cache[prompt])

    def _encode(self, prompt: str) -> list[int]:
        if not self.chat_template:
            return list(self.tokenizer(prompt)["input_ids"])
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                "data.chat_template=true but the tokenizer has no chat template; set data.chat_template=false"
            )
        messages = ([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []) + [
            {"role": "user", "content": prompt}
        ]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def completion(self, text: str) -> list[int]:
        """Ids of a demonstration completion followed by EOS (memoised)."""
        key = ("completion", text)
        if key not in self._cache:
            self._cache[key] = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + [
                int(self.tokenizer.eos_token_id)
            ]
        return list(self._cache[key])
