"""ascent's native CPU kernels (the rollout engine's decode step, the learner's fused RMSNorm), compiled at
first use and loaded with ctypes. A package of its own, below `ascent.policy` and `ascent.rollout`, which both
use it.

Three sources; the first two are called by `ascent.rollout.decoder.Decoder` for a one-token step on one thread:
- `decode_attention.c`: a decode step's attention over the engine's fp32 KV cache in one pass (scores,
  mask, softmax and the weighted sum of values) in place of two batched matrix-vector products and four
  element-wise ops per layer;
- `decode_step.c`: the whole one-token forward of a Llama/Qwen2 model (embedding, norms, projections,
  rope, cache writes, that attention, SiLU, residuals, output layer) in one call, its matrix products
  through a register-tiled kernel over weights packed once per rollout into column panels (`pack`); its
  `ascent_decode_step_rows` takes several token rows per cache row: the verify forward of speculative
  decoding (`ascent.rollout.speculative`), a sequence's last token and its draft in one call;
- `rms_norm.c`: RMSNorm forward and backward for the learner (`ascent.policy.fused`);
- `token_logprob.c`: the log-prob of chosen tokens and its gradient for the learner (`ascent.policy.logprob`).

Build: the system C compiler (`$CC`, else `cc`) with `-O3 -march=native`, multiply-adds fused, IEEE
arithmetic otherwise (no fast-math: it would reassociate the kernels' exp, `vexp` in kernels.h, out of its
1-ulp accuracy, and at link time pull in crtfastmath, which flushes denormals for all of torch); sources
compiled, then linked. The object lands in `$ASCENT_CACHE/kernels` (default `~/.cache/ascent/kernels`)
under a hash of the source, the flags, the compiler's version and this CPU's feature flags, written to a
temporary name and renamed into place, so concurrent first uses and machines sharing a home folder are
safe. Nothing is built at install time; with no compiler (or `ASCENT_NATIVE=0`) `load()` returns None with
the reason and the engine keeps its torch path.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SOURCES = [HERE / "decode_attention.c", HERE / "decode_step.c", HERE / "rms_norm.c", HERE / "token_logprob.c"]
HEADERS = [HERE / "kernels.h"]
COMPILE_FLAGS = ["-O3", "-march=native", "-fPIC", "-fno-math-errno", "-ffp-contract=fast", "-std=gnu99"]
LINK_FLAGS = ["-shared", "-lm"]
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p


class Model(ctypes.Structure):
    """`ascent_model` of decode_step.c: a model's sizes and weight pointers (built by `Decoder`)."""

    _fields_ = [
        (name, _I64) for name in ("layers", "hidden", "inter", "heads", "kv_heads", "head_dim", "vocab", "rope_len")
    ] + [
        ("eps", ctypes.c_float),
        *[
            (name, _PTR)
            for name in (
                "embed",
                "norm",
                "lm_head",
                "cos",
                "sin",
                "ln_in",
                "qkv",
                "qkv_bias",
                "o",
                "ln_post",
                "gate_up",
                "down",
            )
        ],
    ]


@dataclass(frozen=True)
class Native:
    """The loaded kernels (ctypes functions) and where the shared object lives."""

    attention: ctypes._CFuncPtr
    step: ctypes._CFuncPtr
    packed_floats: ctypes._CFuncPtr
    pack_fn: ctypes._CFuncPtr
    linear_fn: ctypes._CFuncPtr
    rms_forward: ctypes._CFuncPtr
    rms_backward: ctypes._CFuncPtr
    logprob_forward: ctypes._CFuncPtr
    logprob_backward: ctypes._CFuncPtr
    path: Path
    step_rows: ctypes._CFuncPtr | None = None
    """`ascent_decode_step_rows`: the step with several token rows per cache row (speculative verification)."""

    def pack(self, w: "torch.Tensor") -> "torch.Tensor":
        """A linear layer's weight (N, K), fp32 on the CPU, packed into the column panels `linear` and the
        decode step read: a new 1-D tensor of `ascent_packed_floats(N, K)` floats."""
        import torch

        if w.dim() != 2 or w.dtype != torch.float32 or w.device.type != "cpu":
            raise ValueError(f"pack: a 2-D float32 CPU weight, got {tuple(w.shape)} {w.dtype} on {w.device}")
        w = w.detach().contiguous()
        out = torch.empty(self.packed_floats(*w.shape), dtype=torch.float32)
        self.pack_fn(w.data_ptr(), *w.shape, out.data_ptr())
        return out

    def linear(
        self, x: "torch.Tensor", packed: "torch.Tensor", n: int, bias: "torch.Tensor | None" = None
    ) -> "torch.Tensor":
        """x (M, K) @ w.T (+ bias) through the step's matrix kernel, w given `pack`ed with N = n rows."""
        import torch

        x = x.contiguous()
        m, k = x.shape
        if (
            x.dtype != torch.float32
            or packed.numel() != self.packed_floats(n, k)
            or (bias is not None and bias.shape != (n,))
        ):
            raise ValueError("linear: x must be float32 and the packed weight (and bias) must match its width")
        y = torch.empty((m, n), dtype=torch.float32)
        self.linear_fn(
            x.data_ptr(),
            m,
            k,
            packed.data_ptr(),
            n,
            None if bias is None else bias.contiguous().data_ptr(),
            0,
            y.data_ptr(),
        )
        return y


@dataclass(frozen=True)
class Unavailable:
    reason: str


_lock = threading.Lock()
_loaded: Native | Unavailable | None = None


def cache_dir() -> Path:
    root = os.environ.get("ASCENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ascent"
    )
    return Path(root) / "kernels"


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> str:
    """This CPU's feature flags (what -march=native compiles for), or the platform's name elsewhere."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def build(cc: str, out_dir: Path) -> Path:
    """Compile the kernels with `cc` into `out_dir` (once per source/flags/compiler/CPU); return the .so."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    key = hashlib.sha256(
        "\0".join(
            [
                *(f.read_text() for f in SOURCES + HEADERS),
                *COMPILE_FLAGS,
                *LINK_FLAGS,
                version,
                cpu_flags(),
                platform.machine(),
            ]
        ).encode()
    ).hexdigest()[:16]
    target = out_dir / f"ascent_kernels-{key}.so"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=out_dir) as tmp:
        objs, lib = [Path(tmp) / f"{src.stem}.o" for src in SOURCES], Path(tmp) / "kernels.so"
        compile_ = [
            [cc, *COMPILE_FLAGS, f"-I{HERE}", "-c", str(src), "-o", str(obj)] for src, obj in zip(SOURCES, objs)
        ]
        for cmd in [*compile_, [cc, *map(str, objs), "-o", str(lib), *LINK_FLAGS]]:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"`{' '.join(cmd)}` failed: {(done.stderr or done.stdout).strip()[-400:]}")
        os.replace(lib, target)  # atomic: a concurrent builder's rename wins or loses whole
    return target


def _bind(path: Path) -> Native:
    lib = ctypes.CDLL(str(path))
    attention = lib.ascent_decode_attention
    attention.restype = ctypes.c_int
    attention.argtypes = [_PTR] * 6 + [_I64] * 13 + [ctypes.c_float]
    step = lib.ascent_decode_step
    step.restype = ctypes.c_int
    step.argtypes = [
        ctypes.POINTER(Model),
        _I64,
        _PTR,
        _PTR,
        _PTR,
        _PTR,
        _PTR,
        _PTR,
        _PTR,
        _I64,
        _PTR,
        _I64,
        _I64,
        _PTR,
    ]
    step_rows = lib.ascent_decode_step_rows  # several token rows per cache row (speculative verification)
    step_rows.restype = ctypes.c_int
    step_rows.argtypes = [*step.argtypes, _PTR, _I64]
    packed_floats = lib.ascent_packed_floats
    packed_floats.restype, packed_floats.argtypes = _I64, [_I64, _I64]
    pack = lib.ascent_pack
    pack.restype, pack.argtypes = None, [_PTR, _I64, _I64, _PTR]
    linear = lib.ascent_linear
    linear.restype, linear.argtypes = None, [_PTR, _I64, _I64, _PTR, _I64, _PTR, ctypes.c_int, _PTR]
    rms_forward = lib.ascent_rms_norm_forward
    rms_forward.restype, rms_forward.argtypes = None, [_PTR] * 4 + [_I64, _I64, ctypes.c_float]
    rms_backward = lib.ascent_rms_norm_backward
    rms_backward.restype, rms_backward.argtypes = None, [_PTR] * 6 + [_I64, _I64]
    logprob_forward = lib.ascent_logprob_forward
    logprob_forward.restype = None
    logprob_forward.argtypes = [_PTR, _PTR, _I64, _I64, ctypes.c_float, _PTR, _PTR]
    logprob_backward = lib.ascent_logprob_backward
    logprob_backward.restype = None
    logprob_backward.argtypes = [_PTR, _PTR, _PTR, _PTR, _I64, _I64, ctypes.c_float, _PTR]
    return Native(
        attention,
        step,
        packed_floats,
        pack,
        linear,
        rms_forward,
        rms_backward,
        logprob_forward,
        logprob_backward,
        path,
        step_rows,
    )


def load() -> Native | None:
    """The native kernels, built on first call; None when they cannot be had here (see `unavailable()`)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
            if isinstance(_loaded, Unavailable):
                log.warning(
                    "ascent native CPU kernels unavailable (%s); the decode step and its attention use torch ops",
                    _loaded.reason,
                )
    return _loaded if isinstance(_loaded, Native) else None


def unavailable() -> str | None:
    """Why `load()` returned None (None when it did not, or has not been called)."""
    return _loaded.reason if isinstance(_loaded, Unavailable) else None


def _load() -> Native | Unavailable:
    if os.environ.get("ASCENT_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
        return Unavailable("disabled by ASCENT_NATIVE=0")
    if platform.system() == "Windows":
        return Unavailable("not built on Windows")
    cc = compiler()
    if cc is None:
        return Unavailable("no C compiler found (set CC, or install cc/gcc/clang)")
    try:
        return _bind(build(cc, cache_dir()))
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return Unavailable(f"build with {cc} failed: {e}")


def reset() -> None:
    """Forget the loaded state (tests)."""
    global _loaded
    with _lock:
        _loaded = None
