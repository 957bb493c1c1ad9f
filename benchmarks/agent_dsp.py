"""Dynamic Speculative Planning (Guan et al. 2025, arXiv:2509.01920) on the search world: latency, cost and accuracy
of no speculation (k=0), fixed k and DSP's learned k, with the same frozen policy.

One warm start (the `search-agent` recipe's, `train.steps=0`), frozen, is the target agent; the draft planner is
the scripted `OracleAgent` (by default the clean one: it searches each hop, opens its document, answers). Per seed,
every arm plays the same held-out questions (a seeded sample), one episode at a time; the DSP chooser starts empty
for each seed and learns online over the seed's episodes. Arms run in a rotated order per seed.

    ascent train search-agent name=dsp-ws train.steps=0 control.enabled=false
    python benchmarks/agent_dsp.py --warmstart runs/dsp-ws/warmstart --seeds 5

Prints one JSON line per seed and arm (per-episode means), then a summary: per arm and metric the mean over seeds
with its 95% t-interval, and the paired differences against k=0 and against the fastest fixed k; on stderr, the
markdown table of docs/agents.md. Latency: wall seconds and sequential policy calls per episode. Cost, in policy
tokens: `cost` without a prefix cache (every call reads its whole context, as this engine does), `cached_cost` with
one (each position of the final trajectory once, plus the verified positions that were discarded); `wasted_*`:
what went into discarded drafts (draft tokens are priced at --draft-price policy tokens; the scripted draft: 0).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ci95, frozen_agent, load, paired_summary, print_machine  # noqa: E402

METRICS = (
    "seconds",
    "policy_calls",
    "policy_tokens",
    "cost",
    "cached_cost",
    "wasted_policy_tokens",
    "wasted_share",
    "draft_tokens",
    "env_steps",
    "accuracy",
    "mean_k",
    "accepted_per_round",
    "same_as_k0",
)

LATE = ("policy_calls", "cached_cost", "wasted_policy_tokens", "mean_k")
"""Also reported over the second half of each seed's episodes (`late_*`)."""


def oracle_draft(task, p_guess: float, p_redundant: float, seed: int, open_docs: bool):
    """The scripted draft planner for one episode: the task's oracle (`SearchingOracle`, or `OracleAgent` with
    `open_docs`); a context it cannot follow (the policy searched something the oracle would not have) gets the
    reply `<answer>unknown</answer>` (a draft the policy rejects unless it agrees)."""
    from ascent.envs.search_world import OracleAgent
    from ascent.tasks.search_world import SearchingOracle

    kind = OracleAgent if open_docs else SearchingOracle
    oracle = kind(task.world, [task.question], p_guess, p_redundant, seed=seed)

    def respond(context: str) -> str:
        try:
            return oracle(context)
        except (StopIteration, ValueError, KeyError):
            return "<answer>unknown</answer>"

    return respond


def episode_row(traj, st, price: float, reference) -> dict:
    from ascent.agents.speculative_planning import summarize

    s = summarize([st])
    cost = s["policy_tokens"] + price * s["draft_tokens"]
    wasted = s["wasted_policy_tokens"] + price * s["wasted_draft_tokens"]
    rounds = sum(1 for k in st.ks if k > 0)
    return {
        **{k: s[k] for k in ("seconds", "policy_calls", "policy_tokens", "wasted_policy_tokens", "draft_tokens")},
        **{"env_steps": s["env_steps"], "mean_k": s["mean_k"]},
        "cost": cost,
        "cached_cost": len(traj.ids) + wasted,
        "wasted_share": wasted / cost if cost else 0.0,
        "accuracy": float(traj.reward),
        "accepted_per_round": st.accepted_turns / rounds if rounds else 0.0,
        "same_as_k0": float(reference is None or reference == traj.ids),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmstart", required=True, help="the warm-start weights folder (a run's warmstart/)")
    ap.add_argument("--recipe", default="search-agent")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=40, help="held-out questions per seed")
    ap.add_argument("--arms", default="0,1,2,4,dsp", help="fixed k values and/or dsp, comma-separated")
    ap.add_argument("--dsp", nargs="+", default=["dsp"], help="DSP chooser specs, one arm each (e.g. 'dsp(tau=0.9)')")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (lossless = token-identical)")
    ap.add_argument("--pool", default="train", choices=["train", "eval"], help="the rows questions are drawn from")
    ap.add_argument("--draft-guess", type=float, default=0.0, help="the draft oracle's p_guess")
    ap.add_argument("--draft-redundant", type=float, default=1.0, help="the draft oracle's p_redundant")
    ap.add_argument("--draft-open", action="store_true", help="draft with OracleAgent (opens documents)")
    ap.add_argument("--draft-price", type=float, default=0.0, help="cost of a draft token in policy tokens")
    ap.add_argument("--json", default="", help="write rows and summary here too")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from dataclasses import replace

    from ascent.agents.speculative_planning import SPECULATION_K, SpeculativePlanner

    print_machine()
    _, task, policy, engine, frozen_loop = frozen_agent(args.recipe, args.warmstart)
    loop = replace(frozen_loop, temperature=args.temperature)
    fixed = [a.strip() for a in args.arms.split(",") if a.strip() and a.strip() != "dsp"]
    specs = {a: f"fixed(k={int(a)})" for a in fixed}
    specs |= {d.replace(" ", ""): d for d in (args.dsp if "dsp" in args.arms.split(",") else [])}
    arms = list(specs)
    per_seed: list[dict[str, dict]] = []
    for seed in range(args.seeds):
        pool = task.train if args.pool == "train" else task.eval
        order = list(range(len(pool)))
        random.Random(seed).shuffle(order)
        tasks = [task.agent.env_task(pool[i]) for i in order[: args.episodes]]
        rot = seed % len(arms)
        played: dict[str, list] = {}
        for arm in arms[rot:] + arms[:rot]:
            chooser = SPECULATION_K.resolve(specs[arm], key="--arms")()
            planner = SpeculativePlanner(engine, policy, None, chooser, task.agent.make_env, loop)
            played[arm] = []
            for i, t in enumerate(tasks):
                planner.draft = oracle_draft(
                    t, args.draft_guess, args.draft_redundant, 1000 * seed + i, args.draft_open
                )
                played[arm].append(planner.run(t, torch.Generator().manual_seed(10_000 * seed + i)))
        greedy_k0 = "0" in arms and args.temperature == 0
        results: dict[str, dict] = {}
        for arm in arms:
            recs = [
                episode_row(traj, st, args.draft_price, played["0"][i][0].ids if greedy_k0 and arm != "0" else None)
                for i, (traj, st) in enumerate(played[arm])
            ]
            rec = {k: round(statistics.mean(r[k] for r in recs), 4) for k in METRICS}
            late = recs[len(recs) // 2 :]  # after the DSP chooser has learned from the first half
            rec |= {f"late_{k}": round(statistics.mean(r[k] for r in late), 4) for k in LATE}
            results[arm] = rec | {"seed": seed, "arm": arm, "load": load()}
            print(json.dumps(results[arm]), flush=True)
        per_seed.append(results)
    summary = summarize_arms(per_seed, arms, args)
    print(json.dumps(summary))
    print(table(summary, arms), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": per_seed, "summary": summary}, indent=1))


def summarize_arms(per_seed: list[dict[str, dict]], arms: list[str], args) -> dict:
    out: dict = {
        "seeds": len(per_seed),
        "episodes_per_seed": args.episodes,
        "temperature": args.temperature,
        "dsp": args.dsp if any(not a.isdigit() for a in arms) else [],
        "pool": args.pool,
        "draft": {
            "oracle": "OracleAgent" if args.draft_open else "SearchingOracle",
            "p_guess": args.draft_guess,
            "p_redundant": args.draft_redundant,
            "price": args.draft_price,
        },
        "arms": {},
    }
    every = METRICS + tuple(f"late_{k}" for k in LATE)
    for arm in arms:
        out["arms"][arm] = {
            k: {
                "mean": round(statistics.mean(r[arm][k] for r in per_seed), 4),
                "ci95": ci95([r[arm][k] for r in per_seed]),
            }
            for k in every
        }
    keys = ("seconds", "policy_calls", "cost", "cached_cost", "wasted_policy_tokens", "accuracy")
    keys += tuple(f"late_{k}" for k in LATE[:3])
    fixed = [a for a in arms if a.isdigit() and a != "0"]
    if "0" in arms:
        out["vs_k0"] = {a: paired_summary(per_seed, keys, arm=a, control="0") for a in arms if a != "0"}
    if fixed:
        fastest = max(fixed, key=int)
        out[f"vs_k{fastest}"] = {
            a: paired_summary(per_seed, keys, arm=a, control=fastest) for a in arms if not a.isdigit()
        }
    return out


def table(summary: dict, arms: list[str]) -> str:
    """The docs' markdown table: per arm, mean [95% interval] over seeds of the per-episode means."""
    cols = ("seconds", "policy_calls", "cost", "cached_cost", "wasted_policy_tokens", "accuracy", "mean_k")
    lines = ["| arm | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for arm in arms:
        a = summary["arms"][arm]
        cells = [f"{a[c]['mean']:.4g} [{a[c]['ci95'][0]:.4g}, {a[c]['ci95'][1]:.4g}]" for c in cols]
        lines.append(f"| {'k=' + arm if arm.isdigit() else arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
