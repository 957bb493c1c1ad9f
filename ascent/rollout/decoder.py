"""ascent's own decoder for Llama-family models (Llama, SmolLM2, Qwen2): a lean functional forward over a
KV cache preallocated once per call, so a decode step is ~12 tensor ops per layer instead of a stack of
`nn.Module` calls, cache objects and mask builders.

Reads the weights of a Hugging Face `LlamaForCausalLM` / `Qwen2ForCausalLM` (no copy except fused
q|k|v and gate|up projections, rebuilt each call so the engine always samples from the current weights),
peft LoRA adapters on its projections merged in at each call.
`supports(model)` says whether a model fits; other models use the HF-forward engine.

Precision. By default the decoder computes in the model's own dtype, so sampled log-probs match the
learner's teacher-forced ones to float rounding. `Decoder(model, compute_dtype=torch.bfloat16)` samples
from a bfloat16 copy of the matrix weights while the residual stream, the norms and the output layer stay
in the model's dtype: the rollout precision most RL stacks use (vLLM in bf16, an fp32 learner). On a CPU
with AVX512-BF16 (or AMX) bf16 matmuls run 2-3x faster than fp32. Rope, the KV cache and attention stay
in the model's dtype too: on the CPU, bf16 batched matmuls over strided cache slices are slower than fp32.
The sampling policy then differs slightly from the learner's (measured as `rollout/logprob_mismatch`);
`algorithm.tis_cap` corrects for it with truncated importance sampling (Yao et al. 2025, "Your efficient
RL framework secretly brings you off-policy RL training").

Native decode step. On the CPU, a one-token step of an fp32 model on one intra-op thread (each shard of a
sharded rollout, or a one-thread process) runs by default as one C call (`forward_native`,
`ascent/kernels/decode_step.c`, compiled at first use): embedding, norms, the block matrices (packed
once per decoder into column panels and multiplied by a register-tiled kernel), rope, cache writes,
attention, SiLU, residuals and the output layer, with the GIL released, so the shards run in parallel and
no step pays ~70 op dispatches. `decode_step="torch"` (`rollout.decode_step=torch`) keeps the torch forward;
"auto" uses it where the step does not apply (GPU, bf16 matrices, attention forced to torch ops, no C
compiler). Prefill (several tokens per row) always runs the torch forward.

Decode attention in the torch forward. A one-token step's attention over an fp32 cache on the CPU runs,
by default, in ascent's native kernel (`ascent.kernels`): scores, mask, softmax and the weighted
sum of values in one pass per (row, kv head) instead of two batched matrix-vector products and four
element-wise ops per layer (the native step calls the same kernel). `attention="torch"`
(`rollout.attention=torch`) keeps the torch ops; "auto" falls back to them where the kernel cannot be
built (no C compiler) or does not apply (GPU, bf16 cache). The kernel runs on the calling thread only, so
it is used where a step runs with one intra-op thread; a one-batch decode on several threads keeps
torch's matmuls, which split across them. Both compute the same fp32 attention up to summation order
(~1e-7).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import torch
import torch.nn.functional as F

SUPPORTED = {"llama", "qwen2"}
ATTENTION = ("auto", "native", "torch")
DECODE_STEP = ("auto", "native", "torch")
STEP_ERRORS = {
    1: "bad sizes",
    2: "out of memory",
    3: "a position outside the rope table",
    4: "a cache column outside the cache",
    5: "a token outside the vocabulary",
}


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside a peft wrapper (LoRA layers still in place), else the model itself."""
    return (
        model.get_base_model()
        if type(model).__module__.startswith("peft") and hasattr(model, "get_base_model")
        else model
    )


def is_lora(layer: torch.nn.Module) -> bool:
    return hasattr(layer, "base_layer") and hasattr(layer, "lora_A") and hasattr(layer, "get_delta_weight")


def linear_weight(layer: torch.nn.Module) -> torch.Tensor:
    """The effective weight of a linear layer: a plain `nn.Linear`'s own, or a peft LoRA layer's base weight
    plus the deltas (scaling x B A) of its active adapters, unless they are disabled or already merged."""
    if not is_lora(layer):
        return layer.weight
    w = layer.get_base_layer().weight
    if getattr(layer, "disable_adapters", False) or getattr(layer, "merged", False):
        return w
    for name in layer.active_adapters:
        if name in layer.lora_A:
            w = w + layer.get_delta_weight(name)
    return w


def linear_bias(layer: torch.nn.Module) -> torch.Tensor | None:
    return (layer.get_base_layer() if is_lora(layer) else layer).bias


def plain_linear(layer: torch.nn.Module | None) -> bool:
    """True for an `nn.Linear`, or a subclass that declares `plain_linear = True`: same parameters, same product
    x W^T + b, only computed in another precision (the bf16 learner's fp32 output layer,
    `ascent.trainer.precision.Fp32Linear`), so the decoder, which reads the weight, samples the same."""
    return type(layer) is torch.nn.Linear or (
        isinstance(layer, torch.nn.Linear) and getattr(type(layer), "plain_linear", False) is True
    )


def _plain_or_lora(layer: torch.nn.Module) -> bool:
    if is_lora(layer):
        dora = getattr(layer, "use_dora", {})
        return isinstance(layer.get_base_layer(), torch.nn.Linear) and not any(
            dora.get(a, False) for a in layer.active_adapters
        )
    return isinstance(layer, torch.nn.Linear)


def supports(model: torch.nn.Module) -> bool:
    """True for a Llama/Qwen2 causal LM with SiLU MLP and full attention, plain or with peft LoRA adapters
    on its block projections (merged into the decoder's weights at each call; DoRA and adapted embeddings
    or output layers are not supported)."""
    model = unwrap(model)
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) not in SUPPORTED or not hasattr(model, "model"):
        return False
    if (
        getattr(cfg, "hidden_act", "silu") != "silu"
        or getattr(cfg, "mlp_bias", False)
        or getattr(cfg, "use_sliding_window", False)
    ):
        return False
    if type(model.model.embed_tokens) is not torch.nn.Embedding or not plain_linear(getattr(model, "lm_head", None)):
        return False
    for block in model.model.layers:
        a, m = getattr(block, "self_attn", None), getattr(block, "mlp", None)
        if (
            a is None
            or m is None
            or not all(
                hasattr(x, name)
                for x, names in (
                    (a, ("q_proj", "k_proj", "v_proj", "o_proj")),
                    (m, ("gate_proj", "up_proj", "down_proj")),
                )
                for name in names
            )
        ):
            return False
        if not all(
            _plain_or_lora(x) for x in (a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj)
        ):
            return False
    return True


@dataclass
class LayerWeights:
    ln_in: torch.Tensor  # (H,)
    qkv: torch.Tensor  # ((nh + 2 nkv) d, H)
    qkv_bias: torch.Tensor | None
    o: torch.Tensor  # (H, nh d)
    ln_post: torch.Tensor  # (H,)
    gate_up: torch.Tensor  # (2 I, H)
    down: torch.Tensor  # (H, I)


class Decoder:
    """The weights of one model snapshot plus a functional forward with an external KV cache."""

    def __init__(
        self,
        model: torch.nn.Module,
        compute_dtype: torch.dtype | None = None,
        attention: str = "auto",
        decode_step: str = "auto",
    ) -> None:
        model = unwrap(model)
        cfg = model.config
        self.model = model
        self.dtype = (
            model.model.embed_tokens.weight.dtype
        )  # residual stream, norms, rope, KV cache, attention, output layer
        self.compute_dtype = compute_dtype or self.dtype  # the matrices of every block (q|k|v, o, gate|up, down)
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.embed = model.model.embed_tokens.weight  # (V, H)
        self.norm = model.model.norm.weight
        self.lm_head = model.lm_head.weight  # (V, H)
        self.rotary = model.model.rotary_emb
        self.layers = [self._layer(block, self.compute_dtype) for block in model.model.layers]
        self._cos = self._sin = None
        self.native = self._native_kernel(attention)
        """The native kernels when this decoder uses them (decode attention), else None (torch ops)."""
        self.native_step = self._native_step(decode_step, attention)
        """Whether one-token steps on one thread run the native whole-step kernel (`forward_native`)."""
        self._step_model = None  # its `kernels.Model` record, built (weights packed) at the first such step
        self._step_lock = threading.Lock()

    def _native_kernel(self, attention: str):
        if attention not in ATTENTION:
            raise ValueError(f"rollout.attention must be one of {ATTENTION}, got {attention!r}")
        if attention == "torch":
            return None
        if self.embed.device.type != "cpu" or self.dtype != torch.float32:
            if attention == "native":
                raise ValueError(
                    "rollout.attention=native needs an fp32 model on the CPU, "
                    f"got {self.dtype} on {self.embed.device.type}; use auto or torch"
                )
            return None
        from ascent import kernels

        native = kernels.load()
        if native is None and attention == "native":
            raise RuntimeError(
                f"rollout.attention=native: the native kernel is unavailable ({kernels.unavailable()}); "
                "use auto or torch"
            )
        return native

    def _native_step(self, decode_step: str, attention: str) -> bool:
        """Whether the native whole-step kernel applies; False where the torch forward runs the step:
        `decode_step="torch"`, attention forced to torch ops, no kernels, a non-fp32 or non-CPU model, or
        bf16 block matrices (`decode_step="native"` makes those an error)."""
        if decode_step not in DECODE_STEP:
            raise ValueError(f"rollout.decode_step must be one of {DECODE_STEP}, got {decode_step!r}")
        if decode_step == "torch":
            return False
        why = None
        if attention == "torch":
            why = "rollout.attention=torch keeps torch ops"
        elif self.native is None:
            from ascent import kernels

            why = f"the native kernels are unavailable ({kernels.unavailable() or 'not an fp32 CPU model'})"
        elif self.compute_dtype != torch.float32:
            why = f"the block matrices are {self.compute_dtype} (rollout.precision), the native step is fp32"
        if why is not None and decode_step == "native":
            raise ValueError(f"rollout.decode_step=native: {why}; use auto or torch")
        return why is None

    def step_model(self):
        """The native step's model record (`kernels.Model`: sizes and weight addresses), built at the first
        native step (the shards share it): the block matrices and the output layer packed into column
        panels, a model's worth of memory for the decoder's lifetime. One-batch rollouts on several threads
        never pay for it."""
        with self._step_lock:
            if self._step_model is None:
                self._step_model = self._build_step_model()
                if self._cos is not None:
                    self._step_model.cos, self._step_model.sin, self._step_model.rope_len = (
                        self._cos.data_ptr(),
                        self._sin.data_ptr(),
                        self._cos.shape[0],
                    )
            return self._step_model

    def _build_step_model(self):
        from ascent import kernels

        pack = self.native.pack
        packed = {name: [pack(getattr(w, name)) for w in self.layers] for name in ("qkv", "o", "gate_up", "down")}
        vectors = {name: [getattr(w, name).detach().contiguous() for w in self.layers] for name in ("ln_in", "ln_post")}
        bias = [w.qkv_bias.detach().contiguous() for w in self.layers] if self.layers[0].qkv_bias is not None else None
        embed, norm, lm_head = self.embed.detach().contiguous(), self.norm.detach().contiguous(), pack(self.lm_head)
        self._tables: list = []

        def table(xs: list[torch.Tensor]):  # a C array of the tensors' addresses
            t = (ctypes.c_void_p * len(xs))(*[x.data_ptr() for x in xs])
            self._tables.append((t, xs))  # the array and its tensors live as long as the decoder
            return ctypes.cast(t, ctypes.c_void_p)

        self._tables.append((embed, norm, lm_head))
        self.packed = packed | {"lm_head": lm_head}  # also read by the multi-token verify forward (speculative)
        cfg = self.model.config
        return kernels.Model(
            layers=len(self.layers),
            hidden=cfg.hidden_size,
            inter=cfg.intermediate_size,
            heads=self.heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            vocab=self.lm_head.shape[0],
            rope_len=0,
            eps=self.eps,
            embed=embed.data_ptr(),
            norm=norm.data_ptr(),
            lm_head=lm_head.data_ptr(),
            cos=None,
            sin=None,
            qkv_bias=None if bias is None else table(bias),
            **{name: table(ws) for name, ws in (packed | vectors).items()},
        )

    def rope_table(self, length: int) -> None:
        """cos/sin for positions 0..length-1, computed once per call by the model's own rotary module
        (so every rope variant the model supports is honoured)."""
        pos = torch.arange(length, device=self.embed.device)[None]
        cos, sin = self.rotary(self.embed[:1][None], pos)  # (1, length, d)
        with self._step_lock:  # the native step's record points at the tables
            self._cos, self._sin = cos[0].contiguous(), sin[0].contiguous()
            if self._step_model is not None:
                self._step_model.cos, self._step_model.sin, self._step_model.rope_len = (
                    self._cos.data_ptr(),
                    self._sin.data_ptr(),
                    length,
                )

    @staticmethod
    def _layer(block: torch.nn.Module, dtype: torch.dtype) -> LayerWeights:
        a, m = block.self_attn, block.mlp
        biases = [linear_bias(a.q_proj), linear_bias(a.k_proj), linear_bias(a.v_proj)]
        return LayerWeights(
            ln_in=block.input_layernorm.weight,
            qkv=torch.cat([linear_weight(a.q_proj), linear_weight(a.k_proj), linear_weight(a.v_proj)])
            .detach()
            .to(dtype),
            qkv_bias=None if biases[0] is None else torch.cat(biases).detach().to(dtype),
            o=linear_weight(a.o_proj).detach().to(dtype),
            ln_post=block.post_attention_layernorm.weight,
            gate_up=torch.cat([linear_weight(m.gate_proj), linear_weight(m.up_proj)]).detach().to(dtype),
            down=linear_weight(m.down_proj).detach().to(dtype),
        )

    def new_cache(self, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values, each (layers, B, nkv, S, d): a step's attention reads the first `end` positions
        of a (row, head) as one contiguous block."""
        shape = (len(self.layers), batch, self.kv_heads, length, self.head_dim)
        return torch.zeros(shape, dtype=self.dtype, device=self.embed.device), torch.zeros(
            shape, dtype=self.dtype, device=self.embed.device
        )

    def rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """RMSNorm in the model's dtype, handed to the next matmul in the compute dtype."""
        return F.rms_norm(x, w.shape, w, self.eps).to(self.compute_dtype)

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Attention of q (B, nq, t, d) over keys and values (B, nkv, S, d).

        Prefill (t > 1) uses SDPA with the boolean mask (B, 1, t, S). A one-token decode step takes an
        additive mask (B, 1, 1, S) and two batched matmuls with grouped heads (no K/V repeat)."""
        b, nq, t, d = q.shape
        nkv = keys.shape[1]
        if t > 1:
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=nq != nkv)
        qg = q.reshape(b, nkv, nq // nkv, d)  # (B, nkv, g, d)
        scores = torch.matmul(qg, keys.transpose(-1, -2)).mul_(d**-0.5).add_(mask)  # (B, nkv, g, S)
        out = torch.matmul(torch.softmax(scores, dim=-1), values)  # (B, nkv, g, d)
        return out.reshape(b, nq, 1, d)

    def attend_native(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, valid: torch.Tensor, scratch: torch.Tensor
    ) -> torch.Tensor:
        """`attend` for a one-token step through the native kernel: q (B, nq, 1, d); one layer's whole
        cache, keys and values (cap, nkv, S, d), of which rows < B and positions < end are
        read; valid (B, end) bool, a view with unit stride along keys; scratch: (nq/nkv) * end floats."""
        b, nq, _, d = q.shape
        nkv, end = keys.shape[1], valid.shape[1]
        if end > keys.shape[-2] or end > values.shape[-2] or b > keys.shape[0] or valid.shape[0] != b:
            raise ValueError(f"attend_native: {b} rows x {end} positions exceed the cache {tuple(keys.shape)}")
        if (
            q.stride(-1) != 1
            or q.stride(1) != d
            or keys.stride(-1) != 1
            or values.stride(-1) != 1
            or valid.stride(-1) != 1
            or valid.dtype != torch.bool
        ):
            raise ValueError("attend_native: unexpected memory layout of q, the cache or the mask")
        if (
            any(x.dtype != torch.float32 for x in (q, keys, values, scratch))
            or not scratch.is_contiguous()
            or scratch.numel() < nq // nkv * end
        ):
            raise ValueError(
                "attend_native: q, the cache and the scratch must be float32, "
                "the scratch (nq/nkv) * end contiguous floats"
            )
        out = torch.empty((b, nq, 1, d), dtype=torch.float32)
        ks, vs = keys.stride(), values.stride()
        rc = self.native.attention(
            q.data_ptr(),
            keys.data_ptr(),
            values.data_ptr(),
            valid.data_ptr(),
            out.data_ptr(),
            scratch.data_ptr(),
            b,
            nq // nkv,
            nkv,
            d,
            end,
            q.stride(0),
            ks[0],
            ks[1],
            ks[2],
            vs[0],
            vs[1],
            vs[2],
            valid.stride(0),
            d**-0.5,
        )
        if rc != 0:
            raise RuntimeError(f"native decode attention rejected its arguments (code {rc})")
        return out

    def forward_native(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor],
        start: int | torch.Tensor,
        attn_mask: torch.Tensor,
    ) -> torch.Tensor:
        """`forward` of a one-token step through the native whole-step kernel (`decode_step.c`): the same
        computation in one call. ids, positions (B, 1); start an int or (B,) per-row columns."""
        keys, values = cache
        b = ids.shape[0]
        end = attn_mask.shape[-1]
        valid = attn_mask[:, 0, 0]  # (B, end) bool
        if (
            keys.dtype != torch.float32
            or values.dtype != torch.float32
            or keys.stride(-1) != 1
            or values.stride(-1) != 1
            or keys.shape[1] < b
            or values.shape != keys.shape
        ):
            raise ValueError(
                "forward_native: the cache must be two fp32 tensors (layers, rows, nkv, S, d) with room for the batch"
            )
        if valid.dtype != torch.bool or valid.stride(-1) != 1 or valid.shape[0] != b:
            raise ValueError("forward_native: the mask must be (B, 1, 1, end) bool with unit stride along keys")
        per_row = isinstance(start, torch.Tensor)
        if not per_row and start != end - 1:
            raise ValueError(f"forward_native: a lockstep step writes column end - 1 = {end - 1}, got start={start}")
        ids, positions = (x.reshape(b).to(torch.long).contiguous() for x in (ids, positions))
        cols = start.reshape(b).to(torch.long).contiguous() if per_row else None
        logits = torch.empty((b, self.lm_head.shape[0]), dtype=torch.float32)
        strides = [(ctypes.c_int64 * 4)(*x.stride()[:4]) for x in (keys, values)]
        record = self.step_model()
        for attempt in range(2):
            rc = self.native.step(
                ctypes.byref(record),
                b,
                ids.data_ptr(),
                positions.data_ptr(),
                None if cols is None else cols.data_ptr(),
                keys.data_ptr(),
                values.data_ptr(),
                strides[0],
                strides[1],
                keys.shape[-2],
                valid.data_ptr(),
                valid.stride(0),
                end,
                logits.data_ptr(),
            )
            if (
                rc == 3 and attempt == 0
            ):  # a position past the rope table (checked in C, not per step here): grow it once
                self.rope_table(max(int(positions.max()) + 1, 2 * (end + 1)))
                continue
            break
        if rc != 0:
            raise RuntimeError(f"native decode step rejected its arguments: {STEP_ERRORS.get(rc, f'code {rc}')}")
        return logits

    def forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor],
        start: int | torch.Tensor,
        attn_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Run tokens ids (B, t) at cache slots start..start+t; attn_mask (B, 1, t, end) bool, where end =
        start+t. `start` may also be a (B,) tensor of per-row slots for a one-token step (rows at different
        steps, as under continuous batching); attention then spans the mask's width.
        Returns the last position's logits (B, V)."""
        keys, values = cache
        b, t = ids.shape
        per_row = isinstance(start, torch.Tensor)
        if per_row and t != 1:
            raise ValueError("per-row cache slots need a one-token step")
        if self.native_step and t == 1 and torch.get_num_threads() == 1:  # the kernel runs on one thread
            return self.forward_native(ids, positions, cache, start, attn_mask)
        end = attn_mask.shape[-1] if per_row else start + t
        rows = torch.arange(b, device=ids.device) if per_row else None
        native = self.native is not None and t == 1 and torch.get_num_threads() == 1  # the kernel runs on one thread
        if native:  # the kernel reads the boolean mask (B, end) itself
            valid, scratch = attn_mask[:, 0, 0], torch.empty(self.heads // self.kv_heads * end, dtype=torch.float32)
        elif t == 1:  # additive mask, built once for all layers
            attn_mask = torch.zeros(attn_mask.shape, dtype=self.dtype, device=attn_mask.device).masked_fill_(
                ~attn_mask, float("-inf")
            )
        x = F.embedding(ids, self.embed)  # (B, t, H)
        if self._cos is None or int(positions.max()) >= self._cos.shape[0]:
            self.rope_table(max(int(positions.max()) + 1, 2 * (end + 1)))
        cos, sin = self._cos[positions][:, None], self._sin[positions][:, None]  # (B, 1, t, d)
        nq, nkv, d = self.heads, self.kv_heads, self.head_dim
        for i, w in enumerate(self.layers):
            h = self.rms(x, w.ln_in)
            qkv = (
                F.linear(h, w.qkv, w.qkv_bias).to(self.dtype).view(b, t, nq + 2 * nkv, d).transpose(1, 2)
            )  # (B, nq+2nkv, t, d)
            qk, v = qkv[:, : nq + nkv], qkv[:, nq + nkv :]
            q, k = (qk * cos + rotate_half(qk) * sin).split([nq, nkv], dim=1)  # rope on q and k in one pass
            if per_row:  # (B, nkv, d) at each row's own slot
                keys[i, rows, :, start] = k[:, :, 0]
                values[i, rows, :, start] = v[:, :, 0]
            else:
                keys[i, :b, :, start:end] = k
                values[i, :b, :, start:end] = v
            if native:
                att = self.attend_native(q, keys[i], values[i], valid, scratch)
            else:
                att = self.attend(q, keys[i, :b, :, :end], values[i, :b, :, :end], attn_mask)  # (B, nq, t, d)
            x = x + F.linear(att.transpose(1, 2).reshape(b, t, nq * d).to(self.compute_dtype), w.o)
            gate, up = F.linear(self.rms(x, w.ln_post), w.gate_up).chunk(2, dim=-1)  # (B, t, I) each
            x = x + F.linear(F.silu(gate) * up, w.down)
        return F.linear(F.rms_norm(x[:, -1], self.norm.shape, self.norm, self.eps), self.lm_head)  # (B, V)


def prefill_prompts(
    dec: Decoder, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the P (left-padded) prompts ids (P, L) once into their own cache (P rows); the engines copy it into
    their samples' slots."""
    p, width = ids.shape
    cache = dec.new_cache(p, width)
    causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
    eye = torch.eye(width, dtype=torch.bool, device=ids.device)
    attn = (causal[None, None] & mask.bool()[:, None, None, :]) | eye[None, None]  # pads see themselves: no NaN rows
    dec.forward(ids, positions, cache, 0, attn)
    return cache


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
