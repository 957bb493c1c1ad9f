"""PIBR on coordination matrix games (Lin et al. 2025, arXiv:2512.21024): code-writing best responses from
SmolLM2-135M-Instruct and from the scripted upper bound, against the fixed initial programs and classic iterated
best response over plain actions.

    python benchmarks/pibr_games.py --seeds 5 --rounds 2 [--no-lm]

Per seed s: the game `GAMES[s % 4]` (climbing, penalty, stag hunt, coordination) and initial constant programs drawn
with seed s; each arm runs `pibr` for --rounds rounds (a turn per player per round). Arms: `fixed` (the initial
programs, no update: the welfare before the first turn), `actions` (constant programs only), `scripted` (code-reading
templates, the upper bound) and `lm` (SmolLM2 writes the code, 3 samples of 80 tokens per turn, temperature 0.7,
sampling seeded by s). Every program runs in the bubblewrap sandbox. Welfare (the sum of both payoffs) is normalised
to [0, 1] by the game's worst and best welfare. Prints a JSON line per seed and paired differences with 95%
t-intervals over seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.applications.program_br import BR_ORACLES, GAMES, pibr  # noqa: E402
from benchmarks.common import ci95, load  # noqa: E402


def normalised(game, w: float) -> float:
    lo, hi = game.welfare_range()
    return (w - lo) / (hi - lo)


def run_seed(seed: int, rounds: int, lm) -> dict:
    name = list(GAMES)[seed % len(GAMES)]
    game = GAMES[name]
    rng = np.random.default_rng(seed)
    init = (int(rng.integers(len(game.actions))), int(rng.integers(len(game.actions))))
    out: dict = {"seed": seed, "game": name, "init": list(init)}
    arms = {"actions": BR_ORACLES.resolve("actions"), "scripted": BR_ORACLES.resolve("scripted")}
    if lm is not None:
        arms["lm"] = lm
    for arm, oracle in arms.items():
        torch.manual_seed(seed)
        t = time.perf_counter()
        res = pibr(game, oracle, init, rounds)
        out["fixed"] = round(normalised(game, res.welfare[0]), 4)
        out[arm] = round(normalised(game, res.welfare[-1]), 4)
        out[f"{arm}_detail"] = {
            "welfare": res.welfare,
            "accepted": res.accepted,
            "valid": f"{res.valid}/{res.candidates}",
            "seconds": round(time.perf_counter() - t, 1),
        }
        if arm == "lm":
            out["lm_sources"] = res.sources
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-lm", action="store_true", help="skip the SmolLM2 arm")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    lm = None if args.no_lm else BR_ORACLES.get("lm")()
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.rounds, lm))
        print(json.dumps(rows[-1]), flush=True)
    arms = ["fixed", "actions", "scripted"] + ([] if lm is None else ["lm"])
    summary: dict = {a: round(statistics.mean(r[a] for r in rows), 4) for a in arms}
    pairs = [("actions", "fixed"), ("scripted", "fixed"), ("scripted", "actions")]
    pairs += [] if lm is None else [("lm", "fixed"), ("scripted", "lm")]
    for a, b in pairs:
        d = [r[a] - r[b] for r in rows]
        summary[f"{a} - {b}"] = {"mean": round(statistics.mean(d), 4), "ci95": ci95(d)}
    if lm is not None:
        valid = [r["lm_detail"]["valid"].split("/") for r in rows]
        summary["lm valid candidates"] = f"{sum(int(v) for v, _ in valid)}/{sum(int(n) for _, n in valid)}"
        summary["lm accepted turns"] = sum(r["lm_detail"]["accepted"] for r in rows)
    print(json.dumps({"summary": summary, "seeds": args.seeds, "rounds": args.rounds, "load": load()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
