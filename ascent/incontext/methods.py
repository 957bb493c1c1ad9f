"""The in-context and meta-RL methods that are experiments rather than history sources or task families: each is
registered in `META_METHODS` as `run(params, seed) -> dict` (one seed of its experiment: the method and its control
from the same initial weights at the same budget, the figures it reports) with its parameters as a frozen
dataclass and its provenance (`ascent list meta_methods --params`). `run_seeds` runs several seeds and pairs the
method with its control (mean, sd and a 95% t-interval of the per-seed difference); `python -m ascent.incontext.meta
NAME key=value ...` is the command (ascent/incontext/meta.py, which imports every method module).

- `lhf`: learning history filtering (Chen et al. 2025, arXiv:2505.15143), ascent/incontext/lhf.py
- `relic`: in-context RL with partial PPO updates and sink key/values (Elawady et al. 2024, arXiv:2410.02751),
  ascent/incontext/relic.py
- `meta_rtl`: reinforcement-based meta-transfer learning (Fu et al. 2024, arXiv:2409.19075),
  ascent/incontext/meta_rtl.py
- `loss_graph_search`: evolving RL loss graphs (Co-Reyes et al. 2021, arXiv:2101.03958),
  ascent/incontext/evolve.py
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ascent.registry import Registry

META_METHODS: Registry = Registry("meta-RL method")
"""name -> run(params, seed) -> dict of figures for one seed (`ascent list meta_methods --params`)."""


def paired(a: list[float], b: list[float]) -> dict[str, Any]:
    """Per-seed difference a - b: mean, sd and a 95% t-interval (None with one seed).

    >>> d = paired([3.0, 4.0, 5.0], [1.0, 1.0, 1.0])
    >>> d["mean"], d["sd"], [round(x, 2) for x in d["ci95"]]
    (3.0, 1.0, [0.52, 5.48])
    """
    from scipy import stats

    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    m = float(diff.mean())
    if len(diff) < 2:
        return {"mean": m, "sd": None, "ci95": None, "per_seed": diff.tolist()}
    sd = float(diff.std(ddof=1))
    half = float(stats.t.ppf(0.975, len(diff) - 1) * sd / np.sqrt(len(diff)))
    return {"mean": m, "sd": sd, "ci95": [m - half, m + half], "per_seed": diff.tolist()}


def run_seeds(
    name: str, params: Any, seeds: list[int], pairs: list[tuple[str, str]], log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Every seed of method `name`, then for each (method key, control key) in `pairs` the paired difference."""
    run = META_METHODS.get(name)
    per_seed = []
    for seed in seeds:
        out = run(seed, params=params)
        log(f"{name} seed {seed}: " + ", ".join(f"{k} {v:.4g}" for k, v in out.items() if isinstance(v, float)))
        per_seed.append(out)
    summary: dict[str, Any] = {"method": name, "seeds": list(seeds), "per_seed": per_seed}
    for key in {k for out in per_seed for k, v in out.items() if isinstance(v, float)}:
        summary[f"mean_{key}"] = float(np.mean([out[key] for out in per_seed]))
    for a, b in pairs:
        summary[f"diff_{a}_minus_{b}"] = paired([o[a] for o in per_seed], [o[b] for o in per_seed])
    return summary


PAIRS: dict[str, list[tuple[str, str]]] = {}
"""name -> the (method, control) figure pairs `main` reports; each method module fills its own entry."""
