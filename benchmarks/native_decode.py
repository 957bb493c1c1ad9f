"""ascent's rollout engine with its native CPU kernels against the same engine with torch ops, in one
process, alternating call by call (ABBA), on the same model, prompts and seeds.

`--compare step` (default): the native whole decode step (`rollout.decode_step=native`,
`ascent/kernels/decode_step.c`: one C call per step) against the torch forward with the native
attention kernel (`decode_step=torch`, `attention=native`): what the step kernel adds.
`--compare attention`: the torch forward with the native decode-attention kernel (one C pass per (row, kv
head), `decode_attention.c`) against torch ops (two batched matmuls, a mask, a scale and a softmax per
layer), both with `decode_step=torch`. `--compare both`: the native step against torch ops throughout.
Both sides use the engine's defaults otherwise (on a CPU with two or more threads: sharded decoding, one
1-thread shard per thread, where the kernels apply). Per model, one JSON line: medians of tokens/s, the
median of the paired ratios (native / torch, adjacent calls), the share of rows the two sampled
identically and the largest difference of their sampled log-probs where they agree.

    .venv/bin/python benchmarks/native_decode.py [--compare step] [--models 3.17M,25M,smollm2] [--repeats 6] \
        [--workload full64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load, print_machine, scratch_policy, smollm2_policy  # noqa: E402
from rollout_throughput import WORKLOADS, prompt_ids  # noqa: E402

from ascent import kernels  # noqa: E402
from ascent.rollout import SamplingSettings  # noqa: E402
from ascent.rollout.ascent_engine import FastEngine  # noqa: E402
from ascent.runtime.memory import tune_malloc  # noqa: E402


def agreement(a, b) -> dict:
    """How far two generations of the same seed agree: the share of rows with identical tokens, and the
    largest difference of sampled log-probs over the positions before each row's first differing token
    (after it, the rows hold different sequences). A float-rounding difference can flip a sample where the
    uniform lands on a boundary of the inverse CDF, most often among tail tokens of a large vocabulary."""
    differ = a.tokens != b.tokens
    first = torch.where(differ.any(1), differ.int().argmax(1), torch.tensor(differ.shape[1]))
    common = torch.arange(differ.shape[1])[None] < first[:, None]
    return {
        "identical_rows": round(float((~differ.any(1)).float().mean()), 4),
        "max_logprob_diff_common": float(((a.logprobs - b.logprobs).abs() * common).max()),
    }


COMPARE = {  # name -> (native side, torch side) engine settings
    "step": ({"decode_step": "native"}, {"decode_step": "torch", "attention": "native"}),
    "attention": ({"decode_step": "torch", "attention": "native"}, {"decode_step": "torch", "attention": "torch"}),
    "both": ({"decode_step": "native"}, {"decode_step": "torch", "attention": "torch"}),
}


def bench(name: str, workload: str, repeats: int, prompts: int, samples: int, compare: str = "step") -> dict:
    policy = smollm2_policy() if name == "smollm2" else scratch_policy(name)
    ids = prompt_ids(policy, name, prompts)
    max_new, ignore_eos = WORKLOADS[workload]
    s = SamplingSettings(max_new, policy.eos_id, policy.pad_id, temperature=1.0, ignore_eos=ignore_eos)
    engines = {mode: FastEngine(**settings) for mode, settings in zip(("native", "torch"), COMPARE[compare])}
    first = {
        mode: e.generate(policy.model, ids, samples, s, torch.Generator().manual_seed(0)) for mode, e in engines.items()
    }  # warm-up
    rates: dict[str, list[float]] = {"native": [], "torch": []}
    for r in range(repeats):
        for mode in ("native", "torch") if r % 2 == 0 else ("torch", "native"):
            t = time.perf_counter()
            out = engines[mode].generate(policy.model, ids, samples, s, torch.Generator().manual_seed(r + 1))
            rates[mode].append(float(out.lengths.sum()) / (time.perf_counter() - t))
    return {
        "model": name,
        "workload": workload,
        "compare": compare,
        "sequences": prompts * samples,
        "threads": torch.get_num_threads(),
        "shards": engines["native"].last_stats.get("shards"),
        "native_tokens_per_s": round(statistics.median(rates["native"]), 1),
        "torch_tokens_per_s": round(statistics.median(rates["torch"]), 1),
        "ratio_paired": round(statistics.median(a / b for a, b in zip(rates["native"], rates["torch"])), 3),
        **agreement(first["native"], first["torch"]),
        "repeats": repeats,
        "load": load(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="3.17M,25M,smollm2", help="comma-separated: 3.17M, 25M, smollm2")
    p.add_argument(
        "--compare",
        choices=sorted(COMPARE),
        default="step",
        help="which native kernel against which torch path (see above)",
    )
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="full64")
    p.add_argument("--repeats", type=int, default=6, help="timed calls per setting")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--samples", type=int, default=8)
    args = p.parse_args()
    tune_malloc("tuned")  # as `ascent train` runs
    if kernels.load() is None:
        raise SystemExit(f"the native kernels are unavailable here: {kernels.unavailable()}")
    if args.compare != "attention" and kernels.load().step is None:
        raise SystemExit("the native decode step is unavailable here: torch exposes no BLAS sgemm_")
    print(f"load before: {load()}  torch threads: {torch.get_num_threads()}", file=sys.stderr)
    print_machine()
    for name in args.models.split(","):
        print(
            json.dumps(bench(name, args.workload, args.repeats, args.prompts, args.samples, args.compare)), flush=True
        )


if __name__ == "__main__":
    main()
