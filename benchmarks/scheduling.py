"""Length-aware scheduling: tokens/s of ascent's engine with no cap, and with a cap on active sequences
under FIFO and longest-predicted-first admission, in the same process, on a workload whose lengths vary
a lot within and across groups.

    python benchmarks/scheduling.py [--prompts 16] [--samples 8] [--caps 64,16] [--repeats 3] [--threads 1]

The model has the 3.17M benchmark model's shape (Qwen2, hidden 256, 4 layers, the 17-token vocabulary), so
a decode step costs what it costs there, but its weights make it a "sticky" Markov chain: the next token
depends on the current one only (the decoder layers' outputs are zeroed); a digit mostly repeats itself,
and ends the sequence with a probability that depends on the digit (1/150 for 0 ... 1/6 for 9). Prompts
end with a digit, so a group's lengths depend on its prompt (means from ~6 to ~150 tokens, cap 256) and
vary geometrically within the group. Every configuration samples exactly the same tokens (pre-drawn
uniforms); only the schedule differs.

`longest (cold)`: a fresh engine, so no length history: the order comes from siblings only (one probe per
group first, then the groups whose finished or running samples are longest). `longest (warm)`: the same
engine after one call on the same prompts, so the per-prompt length history orders the queue from the
start. Prints one JSON line per configuration and repeat, then medians.

Decode steps are exact and noise-free (the same on any machine); tokens/s is this CPU's. On a CPU a decode
step costs about in proportion to its rows, so fewer steps save little time; on a GPU, where a step costs
about the same for 16 or 128 rows, the steps are the makespan. `--sim-seeds K` adds the steps of K more
seeds (lengths from uncapped engine calls, schedules replayed by `ascent.rollout.scheduling.simulate`,
which reproduces the engine's admission loop step for step), plus an oracle that knows every length.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load, print_machine  # noqa: E402

from ascent.policy.tokenizer import char_tokenizer  # noqa: E402
from ascent.rollout import SamplingSettings  # noqa: E402
from ascent.rollout.ascent_engine import FastEngine  # noqa: E402
from ascent.rollout.scheduling import RequestQueue, simulate  # noqa: E402


def sticky_markov_model(
    tok, hidden: int = 256, layers: int = 4, heads: int = 4, inter: int = 688, seed: int = 0
) -> Qwen2ForCausalLM:
    """A Qwen2 model of the benchmark shape whose logits depend on the current token only (see above)."""
    torch.manual_seed(seed)
    v = len(tok)
    cfg = Qwen2Config(
        vocab_size=v,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = Qwen2ForCausalLM(cfg).eval()
    eos = tok.eos_token_id
    digits = [tok.convert_tokens_to_ids(str(d)) for d in range(10)]
    logits = torch.full((v, v), math.log(1e-4))  # [next, current]: rare switches to another token
    for cur in range(v):
        mean_len = 150 * (6 / 150) ** (digits.index(cur) / 9) if cur in digits else 20  # digit 0: 150 ... digit 9: 6
        logits[eos, cur] = math.log(1 / mean_len)
        logits[cur, cur] = math.log(1 - 1 / mean_len - (v - 2) * 1e-4)
    with torch.no_grad():
        basis = torch.linalg.qr(torch.randn(hidden, v))[0] * hidden**0.5  # (H, V) orthogonal columns of rms 1
        model.model.embed_tokens.weight.copy_(basis.T)
        model.lm_head.weight.copy_(logits @ basis.T / hidden)  # lm_head @ e(t) = logits[:, t]
        model.model.norm.weight.fill_(1.0)
        for layer in model.model.layers:  # the layers still compute, but add nothing to the residual
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return model


def prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.randrange(10, 100)}+{rng.randrange(10, 100)}" for _ in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--caps", default="64,16", help="comma-separated caps on active sequences")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--sim-seeds", type=int, default=0, help="extra seeds whose decode steps are simulated (untimed)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tok = char_tokenizer("0123456789+= ")
    model = sticky_markov_model(tok)
    ids = [tok(q)["input_ids"] for q in prompts(args.prompts)]
    s = SamplingSettings(args.max_new_tokens, tok.eos_token_id, tok.pad_token_id, temperature=1.0)
    print(f"load before: {load()}  torch threads: {torch.get_num_threads()}", file=sys.stderr)
    print_machine()

    def warm_engine(cap: int) -> FastEngine:
        e = FastEngine(max_active_sequences=cap)
        e.generate(model, ids, args.samples, s, torch.Generator().manual_seed(10_000))  # history from another seed
        return e

    configs = {"no cap": lambda: FastEngine()}
    for cap in [int(c) for c in args.caps.split(",")]:
        configs[f"cap {cap} fifo"] = lambda cap=cap: FastEngine(max_active_sequences=cap, schedule="fifo")
        configs[f"cap {cap} longest (cold)"] = lambda cap=cap: FastEngine(max_active_sequences=cap)
        configs[f"cap {cap} longest (warm)"] = lambda cap=cap: warm_engine(cap)
    FastEngine().generate(model, ids, args.samples, s, torch.Generator().manual_seed(0))  # warm-up
    rates: dict[str, list[float]] = {k: [] for k in configs}
    steps: dict[str, int] = {}
    ref = None
    for r in range(args.repeats):
        for name, make in configs.items():  # interleaved, so drift in machine speed hits all alike
            engine = make()
            t = time.perf_counter()
            gen = engine.generate(model, ids, args.samples, s, torch.Generator().manual_seed(r))
            dt = time.perf_counter() - t
            if name == "no cap":
                ref = gen
            elif not torch.equal(gen.tokens, ref.tokens):
                raise SystemExit(f"{name}: sampled tokens differ from the uncapped run")
            lengths = gen.lengths.reshape(args.prompts, args.samples).float()
            rate = float(gen.lengths.sum()) / dt
            rates[name].append(rate)
            steps[name] = int(engine.last_stats["decode_steps"])
            print(
                json.dumps(
                    {
                        "config": name,
                        "repeat": r,
                        "tokens_per_s": round(rate, 1),
                        "seconds": round(dt, 3),
                        "tokens": int(gen.lengths.sum()),
                        "decode_steps": int(engine.last_stats["decode_steps"]),
                        "mean_active": round(engine.last_stats["mean_active"], 1),
                        "group_mean_len_min": round(float(lengths.mean(1).min()), 1),
                        "group_mean_len_max": round(float(lengths.mean(1).max()), 1),
                        "max_len": int(gen.lengths.max()),
                        "load": load(),
                    }
                )
            )
    print(f"load after: {load()}", file=sys.stderr)
    if args.sim_seeds:
        warm = warm_engine(int(args.caps.split(",")[0]))  # its predictor holds the seed-10000 history
        hist = [warm.predictor.predict(q) for q in ids]
        sims: dict[str, list[int]] = {}
        for seed in range(100, 100 + args.sim_seeds):
            lengths = (
                FastEngine()
                .generate(model, ids, args.samples, s, torch.Generator().manual_seed(seed))
                .lengths.reshape(args.prompts, args.samples)
                .tolist()
            )
            flat = [x for row in lengths for x in row]
            for cap in [int(c) for c in args.caps.split(",")]:
                oracle = RequestQueue(args.prompts, args.samples, [None] * args.prompts, False, 0.0)
                oracle.waiting.sort(key=lambda r: -flat[r])
                for name, q in (
                    ("fifo", RequestQueue(args.prompts, args.samples, [None] * args.prompts, False, 0.0)),
                    (
                        "longest (cold)",
                        RequestQueue(
                            args.prompts, args.samples, [None] * args.prompts, True, float(args.max_new_tokens)
                        ),
                    ),
                    (
                        "longest (warm)",
                        RequestQueue(args.prompts, args.samples, hist, True, float(args.max_new_tokens)),
                    ),
                    ("oracle (LPT, knows every length)", oracle),
                ):
                    sims.setdefault(f"cap {cap} {name}", []).append(simulate(lengths, cap, q))
            sims.setdefault("no cap", []).append(max(flat))
        for name, v in sims.items():
            print(json.dumps({"simulated": name, "seeds": len(v), "mean_decode_steps": round(statistics.mean(v), 1)}))
    for name, rs in rates.items():  # ratios: per repeat (runs minutes apart drift), then the median
        fifo = name.rsplit(" ", 2)[0] + " fifo" if name.endswith(")") else None
        vs = (
            f"  x{statistics.median(a / b for a, b in zip(rs, rates[fifo])):5.2f} vs fifo (median of per-repeat ratios)"
            if fifo
            else ""
        )
        print(
            f"{name:26} {statistics.median(rs):9.1f} tok/s"
            f" (median of {len(rs)}; last repeat {steps[name]} decode steps){vs}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
