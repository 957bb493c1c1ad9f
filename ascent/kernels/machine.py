"""What this machine is: CPU model, the instruction-set features ascent's paths depend on, threads, load.

The rollout engine and the learner choose their paths from `features()` (e.g. bf16 only where the CPU
multiplies bf16 natively), and every benchmark prints `describe()`, so that a figure always says where it
was measured. Standard library only; read once per process.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

ISA_FLAGS = {
    "avx2": ("avx2",),
    "fma": ("fma",),
    "avx512f": ("avx512f",),
    "avx512_bf16": ("avx512_bf16",),
    "avx512_vnni": ("avx512_vnni", "avx512vnni"),
    "amx_tile": ("amx_tile",),
    "amx_bf16": ("amx_bf16",),
    "neon": ("asimd", "neon"),
    "arm_bf16": ("bf16",),
}
"""The features ascent looks for, by name, and the /proc/cpuinfo flags (x86 `flags`, Arm `Features`) that
report each."""


@functools.cache
def cpuinfo_text(path: str = "/proc/cpuinfo") -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The CPU's feature flags, or None when unknown (no /proc/cpuinfo)."""
    text = cpuinfo_text(path)
    if text is None:
        return None
    return {
        f
        for line in text.splitlines()
        if line.split(":")[0].strip() in ("flags", "Features")
        for f in line.split(":", 1)[1].split()
    }


def features(path: str = "/proc/cpuinfo") -> dict[str, bool] | None:
    """`ISA_FLAGS` name -> present, or None when unknown."""
    have = flags(path)
    if have is None:
        return None
    return {name: any(f in have for f in names) for name, names in ISA_FLAGS.items()}


def native_bf16(path: str = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU multiplies bf16 natively (x86 AVX512-BF16 or AMX-BF16, Arm BF16); None when unknown.
    Without it oneDNN emulates bf16 products, slower than fp32."""
    f = features(path)
    return None if f is None else bool(f["avx512_bf16"] or f["amx_bf16"] or f["arm_bf16"])


def amx_bf16(path: str = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU has AMX-BF16 tile units (Intel Sapphire Rapids and later); None when unknown."""
    f = features(path)
    return None if f is None else bool(f["amx_bf16"])


MICROARCHITECTURES = {
    ("AuthenticAMD", 23, range(0, 0x30)): "Zen/Zen+",
    ("AuthenticAMD", 23, range(0x30, 0x100)): "Zen 2",
    ("AuthenticAMD", 25, range(0, 0x10)): "Zen 3",
    ("AuthenticAMD", 25, range(0x10, 0x20)): "Zen 4",
    ("AuthenticAMD", 25, range(0x20, 0x60)): "Zen 3",
    ("AuthenticAMD", 25, range(0x60, 0x80)): "Zen 4",
    ("AuthenticAMD", 25, range(0xA0, 0x100)): "Zen 4",
    ("AuthenticAMD", 26, range(0, 0x100)): "Zen 5",
    ("GenuineIntel", 6, range(0x8F, 0x90)): "Sapphire Rapids",
    ("GenuineIntel", 6, range(0xCF, 0xD0)): "Emerald Rapids",
    ("GenuineIntel", 6, range(0x6A, 0x6D)): "Ice Lake",
    ("GenuineIntel", 6, range(0x55, 0x56)): "Skylake/Cascade Lake",
}
"""(vendor, CPU family, model range) -> microarchitecture; a VM often names its CPU only "AMD EPYC"."""


def cpu_model(path: str = "/proc/cpuinfo") -> str:
    """The CPU's model name with its family / model and, where known, microarchitecture, e.g.
    "AMD EPYC (family 25 model 17, Zen 4)"."""
    text = cpuinfo_text(path) or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key = line.split(":")[0].strip()
        if ":" in line and key not in fields:
            fields[key] = line.split(":", 1)[1].strip()
    name = next((fields[k] for k in ("model name", "Model", "Hardware") if k in fields), None)
    if name is None:
        return platform.processor() or platform.machine()
    try:
        family, model = int(fields["cpu family"]), int(fields["model"])
    except (KeyError, ValueError):
        return name
    arch = next(
        (
            a
            for (v, f, models), a in MICROARCHITECTURES.items()
            if v == fields.get("vendor_id") and f == family and model in models
        ),
        None,
    )
    return f"{name} (family {family} model {model}{', ' + arch if arch else ''})"


def isa_summary(path: str = "/proc/cpuinfo") -> str:
    """The present features, e.g. "avx2 fma avx512f avx512_bf16 amx_bf16" ("unknown" without cpuinfo)."""
    f = features(path)
    return "unknown" if f is None else " ".join(k for k, v in f.items() if v) or "none of " + " ".join(ISA_FLAGS)


def describe() -> dict[str, object]:
    """The machine, for a benchmark's output: CPU model, ISA features, CPUs, torch threads, load, versions."""
    import torch

    out: dict[str, object] = {
        "cpu": cpu_model(),
        "isa": isa_summary(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load": [round(x, 2) for x in os.getloadavg()],
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def describe_line() -> str:
    """`describe()` as one human-readable line."""
    d = describe()
    gpu = f", GPU {d['gpu']}" if "gpu" in d else ""
    return (
        f"{d['cpu']} ({d['cpus']} CPUs; {d['isa']}), torch {d['torch']} on {d['torch_threads']} threads{gpu}, "
        f"load {' '.join(str(x) for x in d['load'])}"
    )
