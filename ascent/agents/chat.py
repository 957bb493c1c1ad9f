"""The chat template's fixed pieces as tokens, so the agent loop can build token-exact conversations.

A conversation rendered by a chat template is: the prompt (system + user message + generation prompt),
then per model turn the assistant's content followed by the template's end-of-turn text (e.g.
"<|im_end|>\\n"), then per observation a tool message with its role header and the next generation prompt.
`ChatFormat` finds these pieces once by rendering the template around sentinel strings, checks that the
template is prefix-stable (rendering a longer conversation only appends), and tokenises them. The loop
then never re-tokenises history: sampled ids are kept as sampled, observations are tokenised once.

`CHAR_CHAT_TEMPLATE` is a chat template for ascent's character tokenizers (which ship without one).

>>> from ascent.policy.tokenizer import char_tokenizer
>>> tok = with_chat_template(char_tokenizer("abcdefghijklmnopqrstuvwxyz[]<>/_ :\\n"))
>>> fmt = ChatFormat.from_tokenizer(tok)
>>> tok.decode(fmt.prompt_ids([{"role": "user", "content": "hi"}]))
'<bos>[user]\\nhi<eos>\\n[assistant]\\n'
>>> tok.decode(fmt.assistant_end_ids), tok.decode(fmt.observation_ids("ok"))
('<eos>\\n', '[tool]\\nok<eos>\\n[assistant]\\n')
>>> fmt.turn_end_id == tok.eos_token_id
True
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

CHAR_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '[' + m['role'] + ']\n' + m['content'] + eos_token + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '[assistant]\n' }}{% endif %}"
)
"""`<bos>[role]\\ncontent<eos>\\n` per message, then `[assistant]\\n`: the characters "[]" and the role
names must be in the tokenizer's alphabet, as well as "\\n"."""

_USER, _ASSISTANT, _OBSERVATION = "@@ASCENT_USER@@", "@@ASCENT_ASSISTANT@@", "@@ASCENT_OBSERVATION@@"


def with_chat_template(tokenizer: Any, template: str = CHAR_CHAT_TEMPLATE) -> Any:
    """A copy of `tokenizer` with `template` as its chat template."""
    out = copy.deepcopy(tokenizer)
    out.chat_template = template
    return out


def render(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
    """The chat template applied to `messages`, as text."""
    return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of rendered text (no special tokens added: the template wrote them)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class ChatFormat:
    """The template pieces the agent loop splices around sampled tokens."""

    tokenizer: Any
    assistant_end_ids: tuple[int, ...]
    """What the template writes after an assistant message's content (e.g. <|im_end|> \\n)."""
    observation_head: str
    """Text before an observation: end of the previous turn's extras + the observation's role header."""
    observation_tail: str
    """Text after an observation: its end of message + the generation prompt of the next assistant turn."""
    turn_end_id: int
    """The token that ends a model turn (the engine stops on it): the first token of `assistant_end_ids`
    when that is a special token, else the tokenizer's EOS."""
    observation_role: str = "tool"

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, observation_role: str = "tool") -> "ChatFormat":
        """Find the pieces by rendering the tokenizer's chat template around sentinels."""
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; give it one (ascent.agents.chat.with_chat_template)")
        user = [{"role": "user", "content": _USER}]
        asked = render(tokenizer, user, True)
        answered = render(tokenizer, user + [{"role": "assistant", "content": _ASSISTANT}], False)
        if not answered.startswith(asked + _ASSISTANT):
            raise ValueError(
                "the chat template does not render an assistant message as <generation prompt> + content + <end>; "
                "the agent loop needs a prefix-stable template (no rewriting of earlier turns)"
            )
        observed = render(
            tokenizer,
            user + [{"role": "assistant", "content": _ASSISTANT}, {"role": observation_role, "content": _OBSERVATION}],
            True,
        )
        if not observed.startswith(answered) or _OBSERVATION not in observed[len(answered) :]:
            raise ValueError(
                f"the chat template rewrites earlier turns when a {observation_role!r} message follows an "
                f"assistant message (or drops the {observation_role!r} message); "
                "choose another observation_role or template"
            )
        head, _, tail = observed[len(answered) :].partition(_OBSERVATION)
        end = encode(tokenizer, answered[len(asked) + len(_ASSISTANT) :])
        special = set(getattr(tokenizer, "all_special_ids", []))
        turn_end = end[0] if end and end[0] in special else int(tokenizer.eos_token_id)
        return cls(tokenizer, tuple(end), head, tail, turn_end, observation_role)

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The conversation so far (system/user messages) + the generation prompt, as ids."""
        return encode(self.tokenizer, render(self.tokenizer, messages, True))

    def observation_ids(self, text: str) -> list[int]:
        """An observation message (role header, `text`, end) + the next generation prompt, tokenised once."""
        return encode(self.tokenizer, self.observation_head + text + self.observation_tail)

    def end_ids(self, sampled_turn_end: bool) -> list[int]:
        """The template tokens to append after a model turn; the first is dropped when the model sampled it."""
        ids = list(self.assistant_end_ids)
        return ids[1:] if sampled_turn_end and ids and ids[0] == self.turn_end_id else ids

    @property
    def stop_ids(self) -> frozenset[int]:
        """Tokens that end a model turn: the turn end and the tokenizer's EOS."""
        return frozenset({self.turn_end_id, int(self.tokenizer.eos_token_id)})
