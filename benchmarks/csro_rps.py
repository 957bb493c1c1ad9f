"""CSRO on repeated rock-paper-scissors (Hennes, Li, Schultz & Lanctot 2026, arXiv:2603.10098): PSRO with code
written by SmolLM2-135M-Instruct and by the scripted upper bound, against iterated best response to the latest
policy.

    python benchmarks/csro_rps.py --seeds 5 --iterations 3 [--no-lm] [--samples 3 --tokens 120]

Per seed s: the initial population is reference program s (of 15); every arm runs --iterations PSRO iterations
(12-round matches): `psro_scripted` (Nash meta-strategy, the reference class as the oracle: an exact best response
within it), `ibr_scripted` (the same oracle against the latest policy only) and `psro_lm` (Nash meta-strategy,
SmolLM2 writes --samples candidates of --tokens tokens per iteration, temperature 0.7, sampling seeded by s).
Exploitability: the most any reference program earns per round against the meta-strategy (0 = unexploitable within
the class; 1 = loses every round). Every program runs in the bubblewrap sandbox. Prints a JSON line per seed and
paired differences with 95% t-intervals over seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.applications.code_psro import CSRO_ORACLES, psro, reference_programs  # noqa: E402
from ascent.applications.program_br import LMOracle, LMParams  # noqa: E402
from benchmarks.common import ci95, load  # noqa: E402


def run_seed(seed: int, iterations: int, lm) -> dict:
    init = reference_programs()[seed % 15]
    out: dict = {"seed": seed}
    arms = {
        "psro_scripted": (CSRO_ORACLES.resolve("scripted"), "nash"),
        "ibr_scripted": (CSRO_ORACLES.resolve("scripted"), "last"),
    }
    if lm is not None:
        arms["psro_lm"] = (lm, "nash")
    for arm, (oracle, meta) in arms.items():
        torch.manual_seed(seed)
        t = time.perf_counter()
        res = psro(oracle, iterations, meta=meta, init=init)
        out["initial"] = round(res.exploitability[0], 4)
        out[arm] = round(res.exploitability[-1], 4)
        out[f"{arm}_detail"] = {
            "exploitability": [round(x, 3) for x in res.exploitability],
            "added": res.added,
            "valid": f"{res.valid}/{res.candidates}",
            "seconds": round(time.perf_counter() - t, 1),
        }
        if arm == "psro_lm":
            out["lm_added"] = res.population[1:]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--no-lm", action="store_true", help="skip the SmolLM2 arm")
    ap.add_argument("--samples", type=int, default=3, help="SmolLM2 candidates per iteration")
    ap.add_argument("--tokens", type=int, default=120, help="SmolLM2 tokens per candidate")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    lm = (
        None
        if args.no_lm
        else CSRO_ORACLES.get("lm")(LMOracle(LMParams(samples=args.samples, max_new_tokens=args.tokens)))
    )
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.iterations, lm))
        print(json.dumps(rows[-1]), flush=True)
    arms = ["initial", "psro_scripted", "ibr_scripted"] + ([] if lm is None else ["psro_lm"])
    summary: dict = {a: round(statistics.mean(r[a] for r in rows), 4) for a in arms}
    pairs = [("psro_scripted", "initial"), ("psro_scripted", "ibr_scripted")]
    pairs += [] if lm is None else [("psro_lm", "initial"), ("psro_lm", "psro_scripted")]
    for a, b in pairs:
        d = [r[a] - r[b] for r in rows]
        summary[f"{a} - {b}"] = {"mean": round(statistics.mean(d), 4), "ci95": ci95(d)}
    if lm is not None:
        valid = [r["psro_lm_detail"]["valid"].split("/") for r in rows]
        summary["lm valid candidates"] = f"{sum(int(v) for v, _ in valid)}/{sum(int(n) for _, n in valid)}"
        summary["lm programs added"] = sum(r["psro_lm_detail"]["added"] for r in rows)
    print(
        json.dumps({"summary": summary, "seeds": args.seeds, "iterations": args.iterations, "load": load()}, indent=1)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
