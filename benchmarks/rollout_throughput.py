"""Rollout throughput: ascent's engine against Hugging Face `generate`, in the same run, on the same model,
prompts and sampling settings.

    python benchmarks/rollout_throughput.py [--models 3.17M,25M,smollm2] [--repeats 3]
    python benchmarks/rollout_throughput.py --device cuda --dtype bfloat16 --models smollm2   # GPU, + vLLM

Prints one JSON object per (model, workload) as soon as it is measured, then a table. JSON fields:
`ascent_tokens_per_s`, `hf_generate_tokens_per_s`, `speedup_vs_hf_generate` and `roofline_fraction` (ascent's
tokens/s x 2 x params / the matmul GFLOP/s measured at start), all at the model's own precision (fp32 on the CPU);
the bf16 rows also get `bf16_roofline_fraction`, against the bf16 matmul ceiling measured at start.
`ascent` is the engine with its defaults (on a CPU: sharded decoding, one shard per torch thread, see
`rollout.shards`); with `--one-batch on` (default) also `ascent_one_batch_tokens_per_s`, the engine
decoding the whole batch at once (`rollout.shards=1`). With `--bf16 on` (default) also
`ascent_bf16_tokens_per_s` and `speedup_bf16_vs_hf_generate`: ascent's engine with `rollout.precision=bfloat16`
on the same fp32 model against HF generate in fp32; `--hf-bf16` adds HF generate on a bfloat16 copy of the
model (`speedup_bf16_vs_hf_generate_bf16`). Workloads: `full64` (exactly 64 new tokens, EOS ignored) and
`natural256` (EOS ends a sequence, at most 256 new tokens). 16 prompts x 8 samples, temperature 1.0.

`--paired N` adds `speedup_paired`: ascent and HF generate alternating rollout by rollout in ABBA order for N
pairs, the median of the per-pair ratios (with quartiles and range) — the ratio with the machine's drift
paired out, as `step_vs_trl.py` does for the step.

`--malloc tuned` (default) applies ascent's allocator setting to the whole process, as `ascent train` does
(`malloc` in the run config, see `ascent.runtime.memory`): HF generate runs under it too; `--malloc system`
keeps glibc's defaults for both.

`--speculative [SPEC]` (default spec `seer_group`) measures grouped speculative decoding instead
(`rollout.speculative`, `ascent.rollout.speculative`): the engine with and without it alternating rollout by
rollout in ABBA order for `--paired` pairs (default 4), one seed per pair, after one warm-up call each, on
every model and workload (`--temperatures`, default 1.0; 0 is greedy). Per (model, workload, temperature) one
JSON object: `speedup_speculative` (median of the per-pair tokens/s ratios, with quartiles and range),
`mean_accepted_draft_length` (accepted tokens per verified draft chain), `acceptance_rate` (accepted /
drafted tokens), `identical_sequences` (share of the sequences whose tokens equal the engine's without it,
same seed: 1.0 up to float-rounding flips of the inverse-CDF sampler, where a uniform falls within ~1e-6 of
a token's cumulative-probability edge, seen about once per thousand tokens on SmolLM2's 49k vocabulary) and
both sides' tokens/s, the decode steps of both (medians) and the plain engine's mean live sequences per step;
with the CPU model and the load before and after.

A randomly initialised model's next-token distributions are near uniform (entropy ~ln 17 on the 17-token
addition vocabulary), which RL never samples from: RL samples a warm-started policy. `--checkpoint RUN_DIR`
benchmarks a run's trained policy instead (its latest RL checkpoint, else its warm start; the prompts: its own
task's training prompts, encoded as the run encodes them), and `--warm-steps N --recipe R` first trains one
(each `--models` scratch model's shape on recipe R's task, through the pipeline's own warm start, `ascent train
R warmstart.steps=N train.steps=0`, into WARM_DIR/bench-warm-R-MODEL-N, `--warm-dir` default runs/, reused
when there). The rows then carry
the policy's regime at temperature 1: `policy_entropy_nats` (mean entropy of its next-token distributions on
its own samples), `sampled_token_prob` (mean probability of the sampled token) and the completion lengths'
quartiles, e.g.

    python benchmarks/rollout_throughput.py --speculative --threads 1 --checkpoint RUN_DIR --workloads natural256

`--device cuda` puts the models on the GPU and runs the ascent and HF engines there; when vllm is
importable it adds a vLLM column (`vllm_tokens_per_s`, `speedup_vs_vllm`; its first, untimed call
starts vLLM). vLLM's samples differ from the others' (its own RNG), so compare tokens/s, not outputs.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    addition_prompts,
    load,
    machine,
    matmul_gflops,
    params,
    policy_regime,
    print_machine,
    scratch_policy,
    smollm2_policy,
    trained_policy,
    warm_started_run,
)

from ascent.data.prompts import PromptEncoder  # noqa: E402
from ascent.rollout import SamplingSettings, make_engine  # noqa: E402

WORKLOADS = {"full64": (64, True), "natural256": (256, False)}


def prompt_ids(policy, model_name: str, n: int) -> list[list[int]]:
    chat = model_name == "smollm2"
    enc = PromptEncoder(policy.tokenizer, chat, "Answer with only the final number." if chat else None)
    return [enc(p) for p in addition_prompts(n)]


def tokens_per_s(
    backend: str, policy, ids, samples: int, settings: SamplingSettings, repeats: int, engine=None, model=None
) -> tuple[float, float]:
    """Median generated tokens/s over `repeats` runs (after one warm-up), and mean completion length."""
    engine, rates, lengths = engine or make_engine(backend), [], []
    model = policy.model if model is None else model
    for r in range(repeats + 1):
        rate, out = timed_rollout(engine, model, ids, samples, settings, seed=r)
        if r:
            rates.append(rate)
            lengths.append(float(out.lengths.float().mean()))
    return statistics.median(rates), statistics.mean(lengths)


def timed_rollout(engine, model, ids, samples: int, settings: SamplingSettings, seed: int):
    """One rollout with the generator seeded `seed`: (generated tokens/s, its Generation); on a GPU the clock
    stops after the device has finished."""
    cuda = next(model.parameters()).is_cuda
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    out = engine.generate(model, ids, samples, settings, torch.Generator().manual_seed(seed))
    if cuda:
        torch.cuda.synchronize()
    return float(out.lengths.sum()) / (time.perf_counter() - t), out


def paired_speedup(backend: str, policy, ids, samples: int, settings: SamplingSettings, pairs: int) -> dict:
    """ascent's engine and HF generate alternating rollout by rollout, ABBA order (A B, B A, A B, ...), one
    seed per pair, after one warm-up call each: the median, quartiles and range of the per-pair tokens/s
    ratios. Drift in the machine's speed (load, clocks, a neighbour) hits both sides of a pair alike, which
    the separate medians of `tokens_per_s` (all of ascent's rollouts, then all of HF's) do not ensure."""
    engines = {"ascent": make_engine(backend), "hf": make_engine("hf")}
    for engine in engines.values():  # warm-up
        timed_rollout(engine, policy.model, ids, samples, settings, seed=0)
    ratios = []
    for i in range(pairs):
        order = ("ascent", "hf") if i % 2 == 0 else ("hf", "ascent")
        r = {side: timed_rollout(engines[side], policy.model, ids, samples, settings, seed=i + 1)[0] for side in order}
        ratios.append(r["ascent"] / r["hf"])
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "pairs": pairs,
        "speedup_paired": round(statistics.median(ratios), 3),
        "speedup_paired_q1": round(q[0], 3),
        "speedup_paired_q3": round(q[2], 3),
        "speedup_paired_min": round(min(ratios), 3),
        "speedup_paired_max": round(max(ratios), 3),
    }


def speculative_rows(model_name: str, workloads: list[str], args) -> list[dict]:
    """The engine with and without `args.speculative`, ABBA-alternating (see the module docstring)."""
    rows, regime, trained = [], {}, {}
    if args.checkpoint or args.warm_steps:  # a trained policy on its own task's prompts (see the module docstring)
        run_dir = args.checkpoint or warm_started_run(
            args.recipe,
            model_name,
            args.warm_steps,
            Path(args.warm_dir) / f"bench-warm-{args.recipe}-{model_name}-{args.warm_steps}",
        )
        policy, ids, run_name, weights = trained_policy(run_dir, args.prompts)
        trained = {"policy": f"{run_name} ({weights})", "policy_params": params(policy.model)}
        model_name = f"{model_name}:{run_name}" if args.warm_steps else run_name
    else:
        policy = smollm2_policy() if model_name == "smollm2" else scratch_policy(model_name)
        ids = prompt_ids(policy, model_name, args.prompts)
    policy.model.to(device=args.device, dtype=getattr(torch, args.dtype))
    for wl, temperature in [(w, float(t)) for w in workloads for t in args.temperatures.split(",")]:
        max_new, ignore_eos = WORKLOADS[wl]
        s = SamplingSettings(max_new, policy.eos_id, policy.pad_id, temperature=temperature, ignore_eos=ignore_eos)
        engines = {"plain": make_engine(args.backend), "spec": make_engine(args.backend, speculative=args.speculative)}
        for engine in engines.values():  # warm-up
            _, warm = timed_rollout(engine, policy.model, ids, args.samples, s, seed=0)
        if temperature == 1.0 and wl not in regime:  # the regime the drafts meet: entropy, sampled-token probability
            regime[wl] = policy_regime(policy.model, ids, warm)
            print(f"  {model_name:8} {wl:11} policy at T=1: {regime[wl]}", file=sys.stderr, flush=True)
        load_before, ratios, rates, same = load(), [], {"plain": [], "spec": []}, []
        drafted = accepted = chains = 0.0
        lengths, steps, active = [], {"plain": [], "spec": []}, []
        for i in range(args.paired or 4):
            order = ("plain", "spec") if i % 2 == 0 else ("spec", "plain")
            r, outs = {}, {}
            for side in order:
                r[side], outs[side] = timed_rollout(engines[side], policy.model, ids, args.samples, s, seed=i + 1)
                rates[side].append(r[side])
            st = engines["spec"].last_stats
            steps["plain"].append(engines["plain"].last_stats["decode_steps"])
            steps["spec"].append(st["decode_steps"])
            active.append(engines["plain"].last_stats["mean_active"])
            drafted, accepted, chains = (
                drafted + st["spec_drafted"],
                accepted + st["spec_accepted"],
                chains + st["spec_chains"],
            )
            same.append(float((outs["plain"].tokens == outs["spec"].tokens).all(-1).float().mean()))
            lengths.append(float(outs["plain"].lengths.float().mean()))
            ratios.append(r["spec"] / r["plain"])
        q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
        row = {
            "model": model_name,
            "workload": wl,
            "temperature": temperature,
            "speculative": args.speculative,
            "pairs": len(ratios),
            "speedup_speculative": round(statistics.median(ratios), 3),
            "speedup_speculative_q1": round(q[0], 3),
            "speedup_speculative_q3": round(q[2], 3),
            "speedup_speculative_min": round(min(ratios), 3),
            "speedup_speculative_max": round(max(ratios), 3),
            "plain_tokens_per_s": round(statistics.median(rates["plain"]), 1),
            "speculative_tokens_per_s": round(statistics.median(rates["spec"]), 1),
            "mean_accepted_draft_length": round(accepted / max(chains, 1.0), 3),
            "acceptance_rate": round(accepted / max(drafted, 1.0), 3),
            "drafted_tokens": int(drafted),
            "plain_decode_steps": statistics.median(steps["plain"]),
            "speculative_decode_steps": statistics.median(steps["spec"]),
            "plain_mean_active": round(statistics.mean(active), 1),
            "mean_completion_len": round(statistics.mean(lengths), 1),
            "identical_sequences": round(statistics.mean(same), 4),
            "sequences": len(ids) * args.samples,
            **trained,
            **regime.get(wl, {}),
            "torch_threads": torch.get_num_threads(),
            "load_before": load_before,
            "load_after": load(),
            "machine": machine(),
        }
        rows.append(row)
        print(
            f"  {model_name:8} {wl:11} T={temperature:g} speculative x{row['speedup_speculative']:5.2f} "
            f"(quartiles {row['speedup_speculative_q1']:.2f}-{row['speedup_speculative_q3']:.2f}) "
            f"accepted/chain {row['mean_accepted_draft_length']:.2f} identical {row['identical_sequences']:.3f}",
            file=sys.stderr,
            flush=True,
        )
        print(json.dumps(row), flush=True)
    return rows


def bench(model_name: str, workloads: list[str], args, ceiling: float) -> list[dict]:
    policy = smollm2_policy() if model_name == "smollm2" else scratch_policy(model_name)
    policy.model.to(device=args.device, dtype=getattr(torch, args.dtype))
    ids, n_params = prompt_ids(policy, model_name, args.prompts), params(policy.model)
    vllm_engine = make_engine("vllm") if args.vllm else None  # one per model: vLLM starts on its first call
    rows = []
    for wl in workloads:
        max_new, ignore_eos = WORKLOADS[wl]
        s = SamplingSettings(max_new, policy.eos_id, policy.pad_id, temperature=1.0, ignore_eos=ignore_eos)
        ours, ours_len = tokens_per_s(args.backend, policy, ids, args.samples, s, args.repeats)
        hf, hf_len = tokens_per_s("hf", policy, ids, args.samples, s, args.repeats)
        extra = {}
        if args.one_batch and args.device == "cpu":  # the engine without sharded decoding (rollout.shards=1)
            one, _ = tokens_per_s(
                args.backend, policy, ids, args.samples, s, args.repeats, engine=make_engine(args.backend, shards=1)
            )
            extra = {
                "ascent_one_batch_tokens_per_s": round(one, 1),
                "speedup_one_batch_vs_hf_generate": round(one / hf, 3),
            }
            print(
                f"  {model_name:8} {wl:11} ascent one batch {one:9.1f} tok/s  x{one / hf:5.2f} vs hf",
                file=sys.stderr,
                flush=True,
            )
        if args.bf16 and args.dtype == "float32":  # bf16 rollouts of the fp32 model; HF generate on a bf16 copy
            b16, _ = tokens_per_s(
                args.backend,
                policy,
                ids,
                args.samples,
                s,
                args.repeats,
                engine=make_engine(args.backend, precision="bfloat16"),
            )
            extra |= {"ascent_bf16_tokens_per_s": round(b16, 1), "speedup_bf16_vs_hf_generate": round(b16 / hf, 3)}
            if args.bf16_ceiling:  # the bf16 rollout against the machine's bf16 matmul ceiling
                extra["bf16_matmul_gflops"] = round(args.bf16_ceiling, 1)
                extra["bf16_roofline_fraction"] = round(b16 * 2 * n_params / (args.bf16_ceiling * 1e9), 3)
            if args.hf_bf16:
                hf16, _ = tokens_per_s(
                    "hf",
                    policy,
                    ids,
                    args.samples,
                    s,
                    args.repeats,
                    model=copy.deepcopy(policy.model).to(torch.bfloat16),
                )
                extra |= {
                    "hf_generate_bf16_tokens_per_s": round(hf16, 1),
                    "speedup_bf16_vs_hf_generate_bf16": round(b16 / hf16, 3),
                }
            print(
                f"  {model_name:8} {wl:11} ascent bf16 {b16:9.1f} tok/s  x{b16 / hf:5.2f} vs hf fp32"
                + (f"  hf bf16 {hf16:9.1f} tok/s" if args.hf_bf16 else ""),
                file=sys.stderr,
                flush=True,
            )
        if args.paired:  # ABBA-alternating rollouts: the ratio with the machine's drift paired out
            extra |= paired_speedup(args.backend, policy, ids, args.samples, s, args.paired)
            print(
                f"  {model_name:8} {wl:11} paired x{extra['speedup_paired']:5.2f} over {args.paired} pairs"
                f" (quartiles {extra['speedup_paired_q1']:.2f}-{extra['speedup_paired_q3']:.2f})",
                file=sys.stderr,
                flush=True,
            )
        if vllm_engine is not None:
            vl, vl_len = tokens_per_s("vllm", policy, ids, args.samples, s, args.repeats, engine=vllm_engine)
            extra |= {
                "vllm_tokens_per_s": round(vl, 1),
                "speedup_vs_vllm": round(ours / vl, 3),
                "mean_completion_len_vllm": round(vl_len, 1),
            }
            print(
                f"  {model_name:8} {wl:11} vllm {vl:9.1f} tok/s  ascent/vllm x{ours / vl:5.2f}",
                file=sys.stderr,
                flush=True,
            )
        rows.append(
            {
                "model": model_name,
                "workload": wl,
                "device": args.device,
                "dtype": args.dtype,
                "params": n_params,
                "sequences": args.prompts * args.samples,
                "ascent_tokens_per_s": round(ours, 1),
                "hf_generate_tokens_per_s": round(hf, 1),
                "speedup_vs_hf_generate": round(ours / hf, 3),
                "roofline_fraction": round(ours * 2 * n_params / (ceiling * 1e9), 3),
                "hf_roofline_fraction": round(hf * 2 * n_params / (ceiling * 1e9), 3),
                "mean_completion_len_ascent": round(ours_len, 1),
                "mean_completion_len_hf": round(hf_len, 1),
                **extra,
            }
        )
        print(
            f"  {model_name:8} {wl:11} ascent {ours:9.1f} tok/s  hf {hf:9.1f} tok/s  x{ours / hf:5.2f}",
            file=sys.stderr,
            flush=True,
        )
        print(
            json.dumps({**rows[-1], "matmul_gflops": round(ceiling, 1), "malloc": args.malloc, "machine": machine()}),
            flush=True,
        )  # as soon as measured
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="3.17M,25M,smollm2", help="comma-separated: 3.17M, 25M, smollm2")
    p.add_argument("--workloads", default="full64,natural256", help="comma-separated: full64, natural256")
    p.add_argument("--smollm2-workloads", default="full64", help="workloads for SmolLM2 (natural256 is long on a CPU)")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--paired",
        type=int,
        default=0,
        help="also alternate ascent and HF generate rollout by rollout (ABBA) for this many pairs and report the "
        "median per-pair ratio (speedup_paired)",
    )
    p.add_argument("--backend", default="ascent", help="ascent engine under test (ascent or cached)")
    p.add_argument(
        "--speculative",
        nargs="?",
        const="seer_group",
        default=None,
        help="measure grouped speculative decoding (rollout.speculative spec, default seer_group) against the "
        "engine without it, ABBA-paired (speedup_speculative), instead of the HF comparison",
    )
    p.add_argument("--temperatures", default="1.0", help="--speculative: comma-separated sampling temperatures")
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="RUN_DIR",
        help="--speculative: sample from this run's trained policy (latest RL checkpoint, else its warm start) on "
        "its own task's training prompts, instead of a randomly initialised benchmark model",
    )
    p.add_argument(
        "--warm-steps",
        type=int,
        default=0,
        help="--speculative: first imitation-train each --models scratch model on --recipe's task with the "
        "pipeline's warm start for this many steps (into runs/bench-warm-RECIPE-MODEL-STEPS, reused when there)",
    )
    p.add_argument("--recipe", default="default", help="--warm-steps: the recipe whose task and warm start to use")
    p.add_argument("--warm-dir", default="runs", help="--warm-steps: where the warm-start runs go")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    p.add_argument("--device", default="cpu", help="cpu or cuda: where the models and the ascent/HF engines run")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="model dtype")
    p.add_argument(
        "--bf16",
        choices=["on", "off"],
        default="on",
        help="also time ascent with rollout.precision=bfloat16 on the fp32 model",
    )
    p.add_argument("--hf-bf16", action="store_true", help="also time HF generate on a bfloat16 copy of the model")
    p.add_argument(
        "--one-batch",
        choices=["on", "off"],
        default="on",
        help="also time ascent's engine without sharded CPU decoding (rollout.shards=1)",
    )
    p.add_argument(
        "--vllm",
        choices=["auto", "on", "off"],
        default="auto",
        help="vLLM column (auto: on cuda when vllm is importable)",
    )
    p.add_argument(
        "--malloc",
        choices=["tuned", "system"],
        default="tuned",
        help="the process's allocator (ascent's `malloc` setting, as `ascent train` applies it; "
        "HF generate runs in the same process under it)",
    )
    args = p.parse_args()
    from ascent.runtime.memory import tune_malloc

    tune_malloc(args.malloc)
    from ascent.rollout.vllm_engine import unavailable_reason

    reason = unavailable_reason() if args.device.startswith("cuda") else "not on cuda"
    if args.vllm == "on" and reason:
        raise SystemExit(f"--vllm on: {reason}")
    args.vllm = args.vllm != "off" and reason is None
    args.bf16 = args.bf16 == "on"
    args.one_batch = args.one_batch == "on"
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"load before: {load()}  torch threads: {torch.get_num_threads()}", file=sys.stderr)
    print_machine()
    if (args.checkpoint or args.warm_steps) and not args.speculative:
        raise SystemExit("--checkpoint and --warm-steps go with --speculative")
    if args.checkpoint and args.warm_steps:
        raise SystemExit("--checkpoint RUN_DIR or --warm-steps N, not both")
    if args.speculative:
        names = ["25M"] if args.checkpoint else args.models.split(",")
        if (args.checkpoint or args.warm_steps) and "smollm2" in names:
            raise SystemExit("--checkpoint / --warm-steps train or load scratch models: leave smollm2 out of --models")
        for name in names:
            speculative_rows(name, (args.smollm2_workloads if name == "smollm2" else args.workloads).split(","), args)
        print(f"load after: {load()}", file=sys.stderr)
        return
    size = 8192 if args.device.startswith("cuda") else 2048
    ceiling = matmul_gflops(size, device=args.device, dtype=getattr(torch, args.dtype))
    print(f"{args.dtype} matmul {size}x{size} on {args.device}: {ceiling:.1f} GFLOP/s", file=sys.stderr)
    args.bf16_ceiling = None
    if args.bf16 and args.dtype == "float32":
        from ascent.kernels.machine import native_bf16

        # Without native bf16 (AVX2-only CPUs) torch emulates bf16 matmuls, and a 2048-square one took 117 s on a
        # Zen 1 EPYC (a 512-square one 0.2 s): measure the ceiling on a smaller square there.
        b16_size = size if args.device.startswith("cuda") or native_bf16() else 512
        args.bf16_ceiling = matmul_gflops(b16_size, device=args.device, dtype=torch.bfloat16)
        print(
            f"bfloat16 matmul {b16_size}x{b16_size} on {args.device}: {args.bf16_ceiling:.1f} GFLOP/s", file=sys.stderr
        )
    rows = []
    for name in args.models.split(","):
        wls = (args.smollm2_workloads if name == "smollm2" else args.workloads).split(",")
        rows += bench(name, wls, args, ceiling)
    print(f"load after: {load()}", file=sys.stderr)
    print(
        f"{'model':8} {'workload':11} {'ascent tok/s':>13} {'hf tok/s':>10} {'speedup':>8} {'roofline':>9}"
        + (f" {'bf16 tok/s':>11} {'bf16/hf':>8}" if args.bf16 else "")
        + (f" {'vllm tok/s':>11} {'vs vllm':>8}" if args.vllm else "")
    )
    for r in rows:
        b16 = (
            f" {r['ascent_bf16_tokens_per_s']:11.1f} {r['speedup_bf16_vs_hf_generate']:8.2f}"
            if "ascent_bf16_tokens_per_s" in r
            else ""
        )
        vl = f" {r['vllm_tokens_per_s']:11.1f} {r['speedup_vs_vllm']:8.2f}" if "vllm_tokens_per_s" in r else ""
        print(
            f"{r['model']:8} {r['workload']:11} {r['ascent_tokens_per_s']:13.1f} {r['hf_generate_tokens_per_s']:10.1f}"
            f" {r['speedup_vs_hf_generate']:8.2f} {r['roofline_fraction']:9.3f}{b16}{vl}"
        )


if __name__ == "__main__":
    main()
