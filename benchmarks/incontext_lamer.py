"""LaMer vs single-attempt GRPO at equal samples on held-out TextWorld games (docs/in_context.md).

    PYTHONPATH=. python benchmarks/incontext_lamer.py --build-cache runs/lamer-cache.pkl   # plays every game once
    PYTHONPATH=. python benchmarks/incontext_lamer.py --cache runs/lamer-cache.pkl --seeds 0 1 2 3 4

Games: `GameSpec(nb_rooms=1, nb_objects=4, quest_length=1, seed=S)` for S in 1000.. (the first --train-games
train, the next --test-games are held out), one command an attempt. Per seed both arms start from the same
weights and train on the same number of episodes; each is evaluated on the held-out games with K attempts and
reflections between them (GRPO also with independent attempts), --trials sampled trials per game. Prints per arm
the fraction won within 1..K attempts and the return summed over the K attempts, and the paired differences.
"""

from __future__ import annotations

import argparse
import json
import pickle
import platform
import time

import numpy as np
import torch
from scipy import stats

from ascent.envs.textworld_env import GameSpec
from ascent.incontext.lamer import GameCache, LaMerParams, admissible, default_env, grpo_single_attempt, lamer


def games(first: int, n: int) -> list[GameSpec]:
    return [GameSpec(nb_rooms=1, nb_objects=4, quest_length=1, seed=first + k) for k in range(n)]


def interval(x: np.ndarray) -> str:
    m = float(np.mean(x))
    h = float(stats.t.ppf(0.975, len(x) - 1) * np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0
    return f"{m:+.3f} [{m - h:+.3f}, {m + h:+.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--train-games", type=int, default=36)
    ap.add_argument("--test-games", type=int, default=20)
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--cache", default=None, help="a pickled GameCache memo (--build-cache writes one)")
    ap.add_argument("--build-cache", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"cpu: {platform.processor() or platform.machine()}; load: {open('/proc/loadavg').read().split()[:3]}")
    train, test = games(1000, a.train_games), games(1000 + a.train_games, a.test_games)
    cache = GameCache(default_env())
    if a.build_cache:
        for g in train + test:
            for c in admissible(cache.outcome(g, ())[0]):
                cache.outcome(g, (c,))
        with open(a.build_cache, "wb") as f:
            pickle.dump(cache.memo, f)
        print(f"{len(cache.memo)} outcomes -> {a.build_cache}")
        return
    if a.cache:
        with open(a.cache, "rb") as f:
            cache.memo = pickle.load(f)
    p = LaMerParams(updates=a.updates)
    res: dict = {}
    for seed in a.seeds:
        t0 = time.perf_counter()
        row = {}
        for name, make in (("lamer", lamer), ("grpo", grpo_single_attempt)):
            agent = make(p, seed=seed)
            curve = agent.train(cache, train)
            ev = agent.evaluate(cache, test, a.trials, seed + 1000)
            row[name] = {
                "won_by": ev["won_by"].mean(0).tolist(),
                "summed": float(ev["summed_return"].mean()),
                "episodes": agent.episodes,
                "train_return_last10": float(np.mean(curve[-10:])),
            }
            if name == "grpo":
                ind = agent.evaluate(cache, test, a.trials, seed + 1000, reflect_between=False)
                row["grpo_independent"] = {
                    "won_by": ind["won_by"].mean(0).tolist(),
                    "summed": float(ind["summed_return"].mean()),
                }
        res[seed] = row
        print(
            f"seed {seed} ({time.perf_counter() - t0:.0f}s): "
            + "; ".join(
                f"{k} won_by {np.round(v['won_by'], 3).tolist()} summed {v['summed']:.3f}" for k, v in row.items()
            )
        )
    arms = list(res[a.seeds[0]])
    for k in arms:
        wb = np.array([res[s][k]["won_by"] for s in a.seeds])
        sm = np.array([res[s][k]["summed"] for s in a.seeds])
        print(f"{k}: won within 1 {interval(wb[:, 0])}, within K {interval(wb[:, -1])}, summed {interval(sm)}")
    for other in arms[1:]:
        d1 = np.array([res[s]["lamer"]["won_by"][0] - res[s][other]["won_by"][0] for s in a.seeds])
        dk = np.array([res[s]["lamer"]["won_by"][-1] - res[s][other]["won_by"][-1] for s in a.seeds])
        ds = np.array([res[s]["lamer"]["summed"] - res[s][other]["summed"] for s in a.seeds])
        print(f"lamer - {other}: within 1 {interval(d1)}, within K {interval(dk)}, summed {interval(ds)}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
