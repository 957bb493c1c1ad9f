"""ICPI on the chain: SmolLM2-135M-Instruct vs the scripted stand-in (upper bound) vs uniform actions
(docs/in_context.md).

    PYTHONPATH=. python benchmarks/incontext_icpi.py --seeds 0 1 2 3 4 --episodes 6 --model smollm2
    PYTHONPATH=. python benchmarks/incontext_icpi.py --seeds 0 1 2 3 4 --episodes 6 --model scripted

Every arm of a seed sees the same start states. Prints per seed the return per episode as a fraction of the optimal
return from that start, the world-model accuracy (predicted reward, next state and done all right), parse
failures, and (with --samples) the first world-model queries and answers; --out writes everything as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch

from ascent.incontext.icpi import ChainMDP, HFTextModel, ICPIParams, RandomAgent, Transition, icpi


def normalised(agent, mdp: ChainMDP, episodes: int, seed: int, gamma: float) -> np.ndarray:
    rng = np.random.default_rng([seed, 3])
    out = np.zeros(episodes)
    for e in range(episodes):
        s = mdp.reset(rng)
        best = mdp.optimal_return(s, gamma)
        for t in range(mdp.horizon):
            a = agent.act(s)
            r, nxt, done = mdp.step(s, a)
            agent.observe(Transition(s, a, r, nxt, done))
            out[e] += gamma**t * r / best
            s = nxt
            if done:
                break
        agent.end_episode()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--model", choices=["smollm2", "scripted"], default="scripted")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"cpu: {platform.processor() or platform.machine()}; load: {open('/proc/loadavg').read().split()[:3]}")
    mdp, params = ChainMDP(n=6, goal=4, horizon=6), ICPIParams(depth=a.depth)
    model = None
    if a.model == "smollm2":
        from ascent.policy.model import load_hf
        from ascent.policy.pretrained import smollm2_path

        pol = load_hf(smollm2_path())
        model = HFTextModel(pol.model, pol.tokenizer)
    result = {"model": a.model, "episodes": a.episodes, "depth": a.depth, "seeds": {}}
    for seed in a.seeds:
        t0 = time.perf_counter()
        agent = icpi(params, model=model, mdp=mdp, seed=seed)
        ret = normalised(agent, mdp, a.episodes, seed, params.gamma)
        rnd = normalised(RandomAgent(seed), mdp, a.episodes, seed, params.gamma)
        st = agent.stats
        acc = st.wm_correct / max(st.wm_queries, 1)
        print(
            f"seed {seed}: icpi {np.round(ret, 2).tolist()} random {np.round(rnd, 2).tolist()}; world model "
            f"{st.wm_correct}/{st.wm_queries} right ({acc:.2f}), {st.parse_failures} parse failures "
            f"of {st.wm_queries + st.policy_queries} queries ({time.perf_counter() - t0:.0f}s)"
        )
        for q, ans in st.samples[: a.samples]:
            print(f"    {q!r} -> {ans!r}")
        result["seeds"][seed] = {
            "icpi": ret.tolist(),
            "random": rnd.tolist(),
            "wm_accuracy": acc,
            "parse_failures": st.parse_failures,
            "queries": st.wm_queries + st.policy_queries,
            "samples": st.samples[:20],
        }
    icpi_m = np.array([v["icpi"] for v in result["seeds"].values()]).mean(1)
    rnd_m = np.array([v["random"] for v in result["seeds"].values()]).mean(1)
    d = icpi_m - rnd_m
    from scipy import stats

    h = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 0.0
    print(
        f"icpi {icpi_m.mean():.3f}, random {rnd_m.mean():.3f}; icpi - random {d.mean():+.3f} "
        f"[{d.mean() - h:+.3f}, {d.mean() + h:+.3f}] (normalised return, mean over episodes, 95% t over seeds)"
    )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
