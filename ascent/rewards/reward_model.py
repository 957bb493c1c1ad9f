"""A Bradley–Terry reward model: a causal LM's trunk with a scalar head, its loss, its folder format, and the
reward that scores completions with it (`reward=rm:PATH`, or `reward_model(path=PATH, micro_batch_size=64)`).

A pair (prompt x, chosen y_c, rejected y_r) is scored as r(x, y) = w·h_last + b, where h_last is the trunk's
final hidden state at the last real token of `prompt + completion + EOS` (`encode`: the same text layout in
training and scoring). Training (`ascent train-rm`, ascent/app/train_rm.py) minimises the Bradley–Terry loss

    L = -log σ(r(x, y_c) - r(x, y_r) - m)        (m: the pair's margin, 0 without one)

(Bradley & Terry 1952; the RLHF reward model of Ouyang et al. 2022, arXiv:2203.02155, with the margin of
Touvron et al. 2023, arXiv:2307.09288). A saved reward model is a folder:

    config.json, model.safetensors    the trunk's causal LM, `save_pretrained` (LoRA adapters merged)
    tokenizer files                   loadable with AutoTokenizer.from_pretrained
    reward_head.safetensors           the head: weight (1, H), bias (1,)
    reward_model.json                 format, version, hidden size, max_length, held-out pair accuracy, ...
    manifest.json                     every file's size and SHA-256 (written atomically with the folder)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import torch
from transformers import PreTrainedModel

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.typed import ConfigError

HEAD_FILE = "reward_head.safetensors"
META_FILE = "reward_model.json"
FORMAT = "ascent-reward-model"
VERSION = 1


class RewardModel(torch.nn.Module):
    """A causal LM's transformer trunk with a scalar head read at each sequence's last real token.

    The whole causal LM is kept (`lm`) so that the saved trunk is an ordinary HF causal-LM folder (it loads as a
    policy too); only its trunk (`lm.base_model`, or `trunk` when LoRA adapters wrap it) runs.
    """

    def __init__(self, lm: PreTrainedModel, trunk: Optional[torch.nn.Module] = None) -> None:
        super().__init__()
        self.lm = lm
        self.trunk = trunk if trunk is not None else lm.base_model
        hidden = int(lm.config.hidden_size)
        self.head = torch.nn.Linear(hidden, 1).to(next(lm.parameters()).device)
        torch.nn.init.normal_(self.head.weight, std=1.0 / (hidden + 1) ** 0.5)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(N,) float32 scores of (N, T) token rows (left or right padding)."""
        hidden = self.trunk(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        last = attention_mask.long().cumsum(-1).argmax(-1)  # (N,) column of each row's last real token
        h = hidden[torch.arange(len(last), device=hidden.device), last]  # (N, H)
        return self.head(h.to(self.head.weight.dtype)).squeeze(-1).float()  # (N,)


def bt_loss(
    chosen: torch.Tensor, rejected: torch.Tensor, margin: Optional[torch.Tensor] = None
) -> tuple[torch.Tensor, dict[str, float]]:
    """Bradley–Terry loss mean(-log σ(r_c - r_r - m)) over (P,) pair scores, and rm/ metrics: accuracy (the share
    with r_c > r_r), the mean score difference and the mean score.

    >>> loss, m = bt_loss(torch.tensor([1.0]), torch.tensor([1.0]))
    >>> round(float(loss), 4), m["rm/accuracy"]
    (0.6931, 0.0)
    """
    diff = chosen - rejected  # (P,)
    shifted = diff - margin if margin is not None else diff
    loss = -torch.nn.functional.logsigmoid(shifted).mean()
    metrics = {
        "rm/loss": float(loss.detach()),
        "rm/accuracy": float((diff > 0).float().mean()),
        "rm/score_diff": float(diff.detach().mean()),
        "rm/score_mean": float(torch.cat([chosen, rejected]).detach().mean()),
    }
    return loss, metrics


def encode(
    tokenizer: Any, prompts: list[str], completions: list[str], max_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, T) right-padded ids and attention mask of `prompt + completion` followed by EOS, the layout a reward
    model trains and scores on; a row longer than `max_length` keeps its last `max_length` tokens (the end,
    where the score is read)."""
    texts = [p + c for p, c in zip(prompts, completions)]
    rows = [list(ids)[-(max_length - 1) :] + [int(tokenizer.eos_token_id)] for ids in tokenizer(texts)["input_ids"]]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), int(pad), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


@torch.no_grad()
def score(
    rm: RewardModel, tokenizer: Any, prompts: list[str], completions: list[str], micro_batch_size: int, max_length: int
) -> list[float]:
    """The reward model's score of each (prompt, completion), `micro_batch_size` at a time on the model's device."""
    was_training = rm.training
    rm.eval()
    device = rm.head.weight.device
    out: list[float] = []
    for i in range(0, len(prompts), micro_batch_size):
        ids, mask = encode(
            tokenizer, prompts[i : i + micro_batch_size], completions[i : i + micro_batch_size], max_length
        )
        out += rm(ids.to(device), mask.to(device)).tolist()
    rm.train(was_training)
    return out


def load_reward_model(path: str | Path, device: str = "cpu") -> tuple[RewardModel, Any, dict[str, Any]]:
    """(reward model, tokenizer, reward_model.json) of a folder written by `ascent train-rm`, on `device`.
    Raises ConfigError saying what is wrong with a folder that is missing, not a reward model, or damaged."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from ascent.policy.model import load_tokenizer

    folder = Path(path)
    meta = read_meta(folder)
    try:
        lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = load_tokenizer(folder)
        head = load_file(folder / HEAD_FILE)
        rm = RewardModel(lm)
        rm.head.load_state_dict(head)
    except (OSError, ValueError, RuntimeError, KeyError, SafetensorError) as err:
        raise ConfigError(
            f"reward model {str(folder)!r} is damaged: {type(err).__name__}: {str(err).strip().splitlines()[0]}; "
            "train it again with `ascent train-rm`"
        ) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return rm.to(device).eval(), tokenizer, meta


def read_meta(folder: Path) -> dict[str, Any]:
    """reward_model.json of a reward-model folder, checked (ConfigError otherwise)."""
    if not folder.is_dir():
        raise ConfigError(f"reward model {str(folder)!r} does not exist; train one with `ascent train-rm`")
    meta_path = folder / META_FILE
    if not meta_path.exists():
        raise ConfigError(f"{str(folder)!r} is not a reward model (no {META_FILE}); train one with `ascent train-rm`")
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError as err:
        raise ConfigError(f"reward model {str(folder)!r}: {META_FILE} is not valid JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ConfigError(f"reward model {str(folder)!r}: {META_FILE} is not an {FORMAT} v{VERSION} manifest")
    return meta


@REWARDS.register(
    "reward_model",
    paper=papers.INSTRUCTGPT,
    fidelity="faithful",
    departures=(
        "the reward model is any `ascent train-rm` folder: a Bradley-Terry head on the last token, trained on pairs",
    ),
)
class RewardModelReward:
    """A trained Bradley–Terry reward model as a reward: r(x, y) = w·h_last + b of `prompt + completion + EOS`
    (Ouyang et al. 2022, arXiv:2203.02155). `reward=rm:PATH` is short for `reward_model(path=PATH)`.

    Loaded once when the run starts (a missing or damaged folder is a ConfigError then); scores each batch
    `micro_batch_size` sequences at a time (None: the one `rm.score_micro_batch_size` recorded in the folder),
    without gradients, on `device` (None: the learner's device,
    `model.device`, set by the run through `place`). Every sample gets a float: a learned reward always has an
    opinion.
    """

    def __init__(self, path: str, micro_batch_size: Optional[int] = None, device: Optional[str] = None) -> None:
        if micro_batch_size is not None and micro_batch_size < 1:
            raise ConfigError(f"reward_model: micro_batch_size must be >= 1, got {micro_batch_size}")
        self.path, self.fixed_device = str(path), device
        if read_meta(Path(path)).get("kind") == "process":
            raise ConfigError(
                f"reward model {str(path)!r} is a process reward model (it scores each turn of an agent's trajectory); "
                f"use it as step credit: algorithm.advantage=prm(path={path})"
            )
        self.rm, self.tokenizer, self.meta = load_reward_model(path, device or "cpu")
        self.micro_batch_size = micro_batch_size or int(self.meta.get("micro_batch_size") or 64)
        self.max_length = int(self.meta.get("max_length") or 1024)
        self.__name__ = f"rm:{self.path}"

    def place(self, device: str) -> None:
        """Move the model to the learner's device, unless the spec fixed one."""
        if self.fixed_device is None:
            self.rm.to(device)

    def summary_fields(self) -> dict[str, Any]:
        """The model's held-out pair accuracy from its training (`rm_pair_accuracy` in summary.json)."""
        return {"rm_pair_accuracy": self.meta.get("pair_accuracy")}

    def __call__(self, prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        return score(self.rm, self.tokenizer, prompts, completions, self.micro_batch_size, self.max_length)
