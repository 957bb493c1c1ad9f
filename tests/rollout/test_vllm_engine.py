"""rollout.backend=vllm: the clear error where vLLM cannot run (always), the engine's plumbing against a fake
`vllm` module (always, CPU), and real vLLM checks where vllm and a CUDA GPU exist."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
import torch

from ascent.policy.model import token_logprobs
from ascent.rollout import SamplingSettings, assemble, make_engine
from ascent.rollout.vllm_engine import VLLMEngine, VLLMUnavailableError, unavailable_reason

PROMPTS = ["12+34=", "7+8=", "99+1=", "5="]


def ids_of(tokenizer):
    return [tokenizer(p)["input_ids"] for p in PROMPTS]


def settings(tokenizer, **kw):
    return SamplingSettings(
        max_new_tokens=kw.pop("max_new_tokens", 12), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw
    )


def test_make_engine_vllm_is_clear_about_what_is_missing():
    reason = unavailable_reason()
    if reason is None:  # a GPU machine with vllm: the factory builds an engine (vLLM itself starts lazily)
        assert isinstance(make_engine("vllm"), VLLMEngine)
        return
    with pytest.raises(VLLMUnavailableError, match=r"ascent\[vllm\] on a GPU machine") as err:
        make_engine("vllm")
    assert reason in str(err.value)


# -- a fake vllm: samples with ascent's own engine from a private copy of the weights ------------------


@dataclass
class FakeLogprob:
    logprob: float


@dataclass
class FakeCompletion:
    index: int
    token_ids: list[int]
    logprobs: list[dict[int, FakeLogprob]]
    finish_reason: str


@dataclass
class FakeRequestOutput:
    outputs: list[FakeCompletion]


class FakeSamplingParams:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeLLM:
    """Loads the saved folder like vLLM would; `apply_model` gives `load_weights(iter of (name, tensor))`."""

    instances: list["FakeLLM"] = []

    def __init__(self, model: str, **kwargs):
        from transformers import AutoModelForCausalLM

        self.kwargs, self.loads, self.cache_resets = kwargs, 0, 0
        self.model = AutoModelForCausalLM.from_pretrained(model).eval()
        self.model.load_weights = self._load_weights
        FakeLLM.instances.append(self)

    def _load_weights(self, weights):
        self.loads += 1
        state = self.model.state_dict()
        for name, t in weights:
            state[name].copy_(t)
        return set(state)

    def apply_model(self, fn):
        return [fn(self.model)]

    def reset_prefix_cache(self):
        self.cache_resets += 1

    def generate(self, prompts, params, use_tqdm=False):
        from ascent.rollout.ascent_engine import FastEngine

        out = []
        for prompt, p in zip(prompts, params):
            s = SamplingSettings(
                p.max_tokens,
                p.stop_token_ids[0] if p.stop_token_ids else -1,
                0,
                p.temperature,
                p.top_p,
                max(p.top_k, 0),
                p.ignore_eos,
            )
            gen = FastEngine().generate(
                self.model, [prompt["prompt_token_ids"]], p.n, s, torch.Generator().manual_seed(p.seed or 0)
            )
            comps = []
            for i in range(p.n):
                n = int(gen.lengths[i])
                ids, lps = gen.tokens[i, :n].tolist(), gen.logprobs[i, :n].tolist()
                comps.append(
                    FakeCompletion(
                        i,
                        ids,
                        [{t: FakeLogprob(lp)} for t, lp in zip(ids, lps)],
                        "stop" if bool(gen.finished[i]) else "length",
                    )
                )
            out.append(FakeRequestOutput(comps[::-1]))  # vLLM may return completions in any order: rows follow .index
        return out


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.__version__ = "0.0-fake"
    mod.LLM, mod.SamplingParams = FakeLLM, FakeSamplingParams
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = dict
    mod.inputs = inputs
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    FakeLLM.instances.clear()
    return mod


def test_fake_vllm_generation_matches_teacher_forced(fake_vllm, tiny_policy, tokenizer):
    engine, ids = VLLMEngine(max_active_sequences=6), ids_of(tokenizer)
    s = settings(tokenizer, temperature=0.7)
    gen = engine.generate(tiny_policy.model, ids, 4, s, torch.Generator().manual_seed(0))
    llm = FakeLLM.instances[0]
    assert (
        llm.kwargs["skip_tokenizer_init"]
        and llm.kwargs["max_num_seqs"] == 6
        and llm.kwargs["logprobs_mode"] == "processed_logprobs"
    )
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 4, tokenizer)
    with torch.no_grad():
        lp = token_logprobs(tiny_policy.model, batch.input_ids, batch.attention_mask, 0.7)
    assert float(((lp - batch.sampled_logprobs).abs() * batch.completion_mask).max()) <= 1e-4
    for i in range(gen.tokens.shape[0]):
        n = int(gen.lengths[i])
        assert bool(gen.finished[i]) == (int(gen.tokens[i, n - 1]) == tokenizer.eos_token_id)
        assert torch.all(gen.tokens[i, n:] == tokenizer.pad_token_id) and torch.all(gen.logprobs[i, n:] == 0)
    again = engine.generate(tiny_policy.model, ids, 4, s, torch.Generator().manual_seed(0))
    assert torch.equal(gen.tokens, again.tokens)


def test_fake_vllm_weights_pushed_only_after_an_update(fake_vllm, tiny_policy, tokenizer):
    model, ids, s = tiny_policy.model, ids_of(tokenizer), settings(tokenizer, temperature=0.0)
    engine = VLLMEngine()
    first = engine.generate(model, ids, 2, s, None)
    llm = FakeLLM.instances[0]
    engine.generate(model, ids, 2, s, None)
    assert llm.loads == 0  # built from the saved policy; unchanged since
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    with torch.enable_grad():
        model.train()
        model(input_ids=torch.tensor([ids[0]]), labels=torch.tensor([ids[0]])).loss.backward()
        opt.step()
        model.eval()
    after = engine.generate(model, ids, 2, s, None)
    assert llm.loads == 1 and llm.cache_resets == 1
    for (name, a), b in zip(model.state_dict().items(), llm.model.state_dict().values()):
        assert torch.equal(a, b), name
    hf = make_engine("hf").generate(model, ids, 2, s, None)
    assert torch.equal(after.tokens, hf.tokens)
    assert first.tokens.shape == after.tokens.shape


def test_fake_vllm_greedy_repeats_requests_and_old_vllm_temperature_error(fake_vllm, tiny_policy, tokenizer):
    engine, ids = VLLMEngine(), ids_of(tokenizer)
    gen = engine.generate(tiny_policy.model, ids, 3, settings(tokenizer, temperature=0.0), None)
    assert torch.equal(gen.tokens[0], gen.tokens[1]) and torch.equal(gen.tokens[0], gen.tokens[2])
    engine.processed_logprobs = False  # as on vLLM < 0.10.2 (no logprobs_mode)
    with pytest.raises(RuntimeError, match="0.0-fake.*temperature"):
        engine.generate(
            tiny_policy.model, ids, 2, settings(tokenizer, temperature=0.7), torch.Generator().manual_seed(0)
        )
    engine.generate(tiny_policy.model, ids, 2, settings(tokenizer, temperature=1.0), torch.Generator().manual_seed(0))


# -- real vLLM (GPU machines with ascent[vllm]) ------------------------------------------------------


def real_vllm():
    pytest.importorskip("vllm", reason="vllm is not installed (pip install -e '.[vllm]' on a GPU machine)")
    if not torch.cuda.is_available():
        pytest.skip("vLLM needs a CUDA GPU")


@pytest.fixture(scope="module")
def gpu_setup():
    """A Qwen2 model with head_dim 64 (what vLLM's attention kernels expect) and well-separated logits
    (large init), on the GPU, plus one VLLMEngine shared by the module's tests (vLLM starts slowly)."""
    real_vllm()
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ascent.policy.tokenizer import char_tokenizer

    tok = char_tokenizer("0123456789+= ")
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        initializer_range=0.2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = Qwen2ForCausalLM(cfg).cuda().eval()
    return tok, model, VLLMEngine(enforce_eager=True)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_vllm_sampled_logprobs_match_teacher_forced(temperature, gpu_setup):
    tok, model, engine = gpu_setup
    ids = ids_of(tok)
    gen = engine.generate(
        model, ids, 8, settings(tok, temperature=temperature, max_new_tokens=24), torch.Generator().manual_seed(0)
    )
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 8, tok)
    with torch.no_grad():
        lp = token_logprobs(model, batch.input_ids.cuda(), batch.attention_mask.cuda(), temperature).cpu()
    gap = (lp - batch.sampled_logprobs).abs() * batch.completion_mask
    assert (
        float(gap.max()) <= 2e-2 and float(gap.sum() / batch.completion_mask.sum()) <= 2e-3
    )  # vLLM kernels vs HF forward
    assert len({tuple(gen.tokens[i].tolist()) for i in range(8)}) > 1  # the group's samples differ (seed + index)


def test_vllm_greedy_equals_hf_and_follows_weight_updates(gpu_setup):
    tok, model, engine = gpu_setup
    ids, s = ids_of(tok), settings(tok, temperature=0.0, max_new_tokens=16)
    ours = engine.generate(model, ids, 1, s, None)
    hf = make_engine("hf").generate(model, ids, 1, s, None)
    assert torch.equal(ours.tokens, hf.tokens) and torch.equal(ours.lengths, hf.lengths)
    with torch.no_grad():  # an in-place update, as an optimizer step does
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    ours = engine.generate(model, ids, 1, s, None)
    hf = make_engine("hf").generate(model, ids, 1, s, None)
    assert torch.equal(ours.tokens, hf.tokens)
