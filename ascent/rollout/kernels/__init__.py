"""Native CPU kernels of the rollout engine, compiled at first use and loaded with ctypes.

One kernel today: `decode_attention.c`, a decode step's attention over the engine's fp32 KV cache in one
pass (scores, mask, softmax and the weighted sum of values), called by `ascent.rollout.fast.Decoder` in
place of two batched matrix-vector products and four element-wise ops per layer.

Build: the system C compiler (`$CC`, else `cc`) with `-O3 -march=native` and finite math (vectorised
`expf`), compiled and linked in two steps so that the shared object does not switch the process's
floating-point mode (`-ffast-math` at link time would pull in crtfastmath and flush denormals for all of
torch). The object lands in `$ASCENT_CACHE/kernels` (default `~/.cache/ascent/kernels`) under a hash of the
source, the flags, the compiler's version and this CPU's feature flags, written to a temporary name and
renamed into place, so concurrent first uses and machines sharing a home folder are safe. Nothing is built
at install time; with no compiler (or `ASCENT_NATIVE=0`) `load()` returns None with the reason and the
engine keeps its torch path.
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

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("decode_attention.c")
COMPILE_FLAGS = ["-O3", "-march=native", "-fPIC", "-fno-math-errno", "-ffinite-math-only", "-funsafe-math-optimizations", "-std=c99"]
LINK_FLAGS = ["-shared", "-lm"]
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p


@dataclass(frozen=True)
class Native:
    """The loaded kernels (`attention`: the ctypes function) and where the shared object lives."""

    attention: ctypes._CFuncPtr
    path: Path


@dataclass(frozen=True)
class Unavailable:
    reason: str


_lock = threading.Lock()
_loaded: Native | Unavailable | None = None


def cache_dir() -> Path:
    root = os.environ.get("ASCENT_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ascent")
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
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *COMPILE_FLAGS, *LINK_FLAGS, version, cpu_flags(), platform.machine()]).encode()).hexdigest()[:16]
    target = out_dir / f"ascent_kernels-{key}.so"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=out_dir) as tmp:
        obj, lib = Path(tmp) / "kernels.o", Path(tmp) / "kernels.so"
        for cmd in ([cc, *COMPILE_FLAGS, "-c", str(SOURCE), "-o", str(obj)], [cc, str(obj), "-o", str(lib), *LINK_FLAGS]):
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"`{' '.join(cmd)}` failed: {(done.stderr or done.stdout).strip()[-400:]}")
        os.replace(lib, target)  # atomic: a concurrent builder's rename wins or loses whole
    return target


def _bind(path: Path) -> Native:
    lib = ctypes.CDLL(str(path))
    fn = lib.ascent_decode_attention
    fn.restype = ctypes.c_int
    fn.argtypes = [_PTR] * 6 + [_I64] * 13 + [ctypes.c_float]
    return Native(fn, path)


def load() -> Native | None:
    """The native kernels, built on first call; None when they cannot be had here (see `unavailable()`)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
            if isinstance(_loaded, Unavailable):
                log.warning("ascent native CPU kernels unavailable (%s); decode attention uses torch ops", _loaded.reason)
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
