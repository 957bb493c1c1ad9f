"""`rollout.backend=vllm`: sampling through vLLM (optional extra `ascent[vllm]`, CUDA GPUs only).

`VLLMEngine` implements the engines' protocol, `generate(model, prompt_ids, n, settings, generator) ->
Generation`:

- On the first call it saves the policy (`save_pretrained`) to a temporary folder and builds a `vllm.LLM`
  from it (no tokenizer: prompts go in as token ids, `TokensPrompt`, and EOS is passed as a stop token).
- Before every later call it checks whether the policy's parameters changed since the last push (the
  optimizer and `load_state_dict` update them in place, which bumps each tensor's version counter) and if
  so loads them into vLLM's model with its `load_weights` (through `LLM.apply_model`, or the executor's
  driver worker on vLLM versions without it) and clears vLLM's prefix cache, whose keys/values belong to
  the old weights. vLLM runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so weights are handed
  over without serialisation.
- It samples with `SamplingParams(n, temperature, top_p, top_k, max_tokens, logprobs=0, seed)` and returns
  the sampled tokens and their log-probs.

Log-probs: ascent's convention (the learner's recompute) is the log-prob under the temperature-scaled,
untruncated distribution, and at temperature 0 the temperature-1 log-prob. vLLM V1 by default reports
*raw* log-probs (before temperature); with `logprobs_mode="processed_logprobs"` (vLLM >= 0.10.2, asked for
here) they are taken after temperature scaling and, when top-k/top-p are set, after that truncation too. So
with top_k = 0 and top_p = 1 (the default) they follow ascent's convention; with truncation they are
log-probs of the truncated, renormalised distribution (a warning says so once). On vLLM without
`logprobs_mode` the raw log-probs are right only at temperature 1 (or greedy); other temperatures raise.
vLLM's kernels (and bf16, if the policy is bf16) differ from the learner's forward by rounding, so the
sampled log-probs match the learner's recompute to a tolerance, not bit for bit; the seed makes a call
reproducible on the same vLLM build, not identical to the `ascent` engine's samples.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import warnings
from typing import Any

import torch

from ascent.rollout.types import Generation, SamplingSettings
from ascent.typed import ConfigError

INSTALL_HINT = "install ascent[vllm] on a GPU machine (pip install -e '.[vllm]')"


class VLLMUnavailableError(ConfigError):
    """rollout.backend=vllm was asked for where vLLM cannot run (a config error: the CLI prints it in one line)."""


def unavailable_reason() -> str | None:
    """Why the vllm backend cannot run here, or None when it can (vllm importable and a CUDA GPU present)."""
    if importlib.util.find_spec("vllm") is None:
        return "the vllm package is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to torch"
    return None


def make_vllm_engine(max_active_sequences: int = 0) -> "VLLMEngine":
    """The `vllm` backend's factory: a `VLLMEngine`, or a clear error where vLLM cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        raise VLLMUnavailableError(f"rollout.backend=vllm: {reason}; {INSTALL_HINT}, or use rollout.backend=ascent")
    return VLLMEngine(max_active_sequences=max_active_sequences)


def vllm_version() -> str:
    try:
        import vllm

        return str(getattr(vllm, "__version__", "unknown"))
    except ImportError:
        return "not installed"


def _param_versions(model: torch.nn.Module) -> tuple:
    """A fingerprint that changes whenever any parameter is modified in place (optimizer step, load)."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


class VLLMEngine:
    """Rollouts through vLLM; see the module docstring."""

    def __init__(
        self, max_active_sequences: int = 0, gpu_memory_utilization: float | None = None, **llm_kwargs: Any
    ) -> None:
        self.max_active_sequences = max_active_sequences
        """vLLM's `max_num_seqs` (0: vLLM's default)."""
        self.gpu_memory_utilization = (
            gpu_memory_utilization
            if gpu_memory_utilization is not None
            else float(os.environ.get("ASCENT_VLLM_GPU_MEMORY_UTILIZATION", "0.3"))
        )
        """Share of the GPU vLLM may take (weights + KV cache); the learner needs the rest."""
        self.llm_kwargs = llm_kwargs
        """Extra `vllm.LLM` arguments (e.g. enforce_eager=True)."""
        self.llm: Any = None
        self.processed_logprobs = False
        """Whether vLLM reports log-probs after temperature (logprobs_mode available)."""
        self._synced: tuple | None = None
        self._model_id: int | None = None
        self._warned_truncation = False

    # -- building and syncing -------------------------------------------------------------------------

    def _build(self, model: torch.nn.Module) -> None:
        if type(model).__module__.startswith("peft"):
            raise NotImplementedError(
                "rollout.backend=vllm does not support LoRA (peft) policies yet; use rollout.backend=ascent"
            )
        os.environ.setdefault(
            "VLLM_ENABLE_V1_MULTIPROCESSING", "0"
        )  # the model lives in this process: weights load without serialising
        from vllm import LLM

        dtype = next(model.parameters()).dtype
        kwargs: dict[str, Any] = {
            "skip_tokenizer_init": True,
            "dtype": {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(
                dtype, "auto"
            ),
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "seed": 0,
            "logprobs_mode": "processed_logprobs",
        }
        if self.max_active_sequences:
            kwargs["max_num_seqs"] = self.max_active_sequences
        kwargs.update(self.llm_kwargs)
        with tempfile.TemporaryDirectory(prefix="ascent-vllm-") as folder:
            model.save_pretrained(folder, safe_serialization=True)
            try:
                self.llm = LLM(model=folder, **kwargs)
                self.processed_logprobs = kwargs.get("logprobs_mode") == "processed_logprobs"
            except TypeError as err:  # vLLM < 0.10.2: no logprobs_mode (V1 then reports raw log-probs)
                if "logprobs_mode" not in str(err):
                    raise
                kwargs.pop("logprobs_mode")
                self.llm = LLM(model=folder, **kwargs)
                self.processed_logprobs = False
        self._synced, self._model_id = _param_versions(model), id(model)

    def _push_weights(self, model: torch.nn.Module) -> None:
        """Load the policy's current weights into vLLM's model (HF parameter names; vLLM's `load_weights`
        maps them onto its fused q|k|v and gate|up layers)."""
        weights = [(name, t.detach()) for name, t in model.state_dict().items()]
        load = lambda m: (m.load_weights(iter(weights)), None)[1]  # noqa: E731  (return nothing across the RPC)
        if hasattr(self.llm, "apply_model"):
            self.llm.apply_model(load)
        else:
            runner_model = self._driver_model()
            load(runner_model)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()
        self._synced, self._model_id = _param_versions(model), id(model)

    def _driver_model(self) -> Any:
        """vLLM's model through the executor's driver worker (the path of vLLM versions before `apply_model`)."""
        executor = getattr(getattr(self.llm, "llm_engine", None), "model_executor", None)
        worker = getattr(executor, "driver_worker", None)
        for path in (("model_runner", "model"), ("worker", "model_runner", "model")):
            obj = worker
            for attr in path:
                obj = getattr(obj, attr, None)
            if obj is not None and hasattr(obj, "load_weights"):
                return obj
        raise RuntimeError(
            f"vLLM {vllm_version()}: found no way to load new weights into the running model "
            "(neither LLM.apply_model nor llm.llm_engine.model_executor.driver_worker.model_runner.model); "
            "use vllm>=0.8 with VLLM_ENABLE_V1_MULTIPROCESSING=0"
        )

    def sync(self, model: torch.nn.Module) -> None:
        """Build vLLM on first use; afterwards push the policy's weights when they changed."""
        if self.llm is None:
            self._build(model)
        elif id(model) != self._model_id or _param_versions(model) != self._synced:
            self._push_weights(model)

    # -- sampling ---------------------------------------------------------------------------------------

    def _check_logprobs(self, s: SamplingSettings) -> None:
        if s.temperature not in (0.0, 1.0) and not self.processed_logprobs:
            raise RuntimeError(
                f"vLLM {vllm_version()} reports log-probs before temperature scaling (no logprobs_mode), "
                "so at temperature "
                f"{s.temperature} they would not be the learner's; upgrade to vllm>=0.10.2 or sample at temperature 1"
            )
        if (s.top_k or s.top_p < 1.0) and s.temperature != 0 and not self._warned_truncation:
            self._warned_truncation = True
            warnings.warn(
                "rollout.backend=vllm with top_k/top_p: vLLM's sampled log-probs are those of the truncated "
                "distribution, not ascent's untruncated convention",
                stacklevel=3,
            )

    @torch.no_grad()
    def generate(
        self,
        model: torch.nn.Module,
        prompt_ids: list[list[int]],
        n: int,
        s: SamplingSettings,
        generator: torch.Generator | None,
    ) -> Generation:
        from vllm import SamplingParams

        try:
            from vllm.inputs import TokensPrompt
        except ImportError:  # very old vLLM: a plain dict is the same thing
            TokensPrompt = dict  # noqa: N806
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("every prompt needs at least one token")
        self.sync(model)
        self._check_logprobs(s)
        greedy = s.temperature == 0
        base = (
            int(torch.randint(0, 2**31 - n * len(prompt_ids) - 1, (1,), generator=generator))
            if generator is not None
            else None
        )
        # greedy: one request per sample (n identical greedy samples); sampled: n children per prompt request
        # (vLLM seeds child i with seed + i, so seeds are spaced n apart)
        per_request = 1 if greedy else n
        prompts = [p for p in prompt_ids for _ in range(n)] if greedy else prompt_ids
        params = [
            SamplingParams(
                n=per_request,
                temperature=s.temperature,
                top_p=s.top_p if not greedy else 1.0,
                top_k=s.top_k if (s.top_k > 0 and not greedy) else -1,
                max_tokens=s.max_new_tokens,
                logprobs=0,
                seed=None if base is None else base + i * per_request,
                ignore_eos=s.ignore_eos,
                stop_token_ids=[] if s.ignore_eos else [s.eos_id],
                detokenize=False,
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False)
        return self.to_generation(outputs, len(prompt_ids) * n, per_request, s)

    @staticmethod
    def to_generation(outputs: list[Any], total: int, per_request: int, s: SamplingSettings) -> Generation:
        """vLLM's `RequestOutput`s (in request order, `per_request` completions each) as a `Generation`."""
        tokens = torch.full((total, s.max_new_tokens), s.pad_id, dtype=torch.long)
        logps = torch.zeros((total, s.max_new_tokens), dtype=torch.float32)
        lengths = torch.zeros(total, dtype=torch.long)
        finished = torch.zeros(total, dtype=torch.bool)
        for r, out in enumerate(outputs):
            for c in out.outputs:
                row = r * per_request + int(c.index)
                ids = list(c.token_ids)[: s.max_new_tokens]
                if not s.ignore_eos and s.eos_id in ids:  # vLLM keeps the stop token in token_ids; cut just after it
                    ids = ids[: ids.index(s.eos_id) + 1]
                    finished[row] = True
                if c.logprobs is None or len(c.logprobs) < len(ids):
                    raise RuntimeError(
                        f"vLLM {vllm_version()} returned no log-prob for some sampled tokens (asked logprobs=0)"
                    )
                lps = [_logprob_of(c.logprobs[t], tok) for t, tok in enumerate(ids)]
                lengths[row] = len(ids)
                if ids:
                    tokens[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                    logps[row, : len(ids)] = torch.tensor(lps, dtype=torch.float32)
        return Generation(tokens=tokens, logprobs=logps, lengths=lengths, finished=finished)


def _logprob_of(entry: Any, token: int) -> float:
    """The sampled token's log-prob from one position of vLLM's logprobs ({token id: Logprob} or a float)."""
    item = entry[token] if isinstance(entry, dict) else entry
    return float(getattr(item, "logprob", item))
