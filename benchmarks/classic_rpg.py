"""RPG (Huang et al. 2023, arXiv:2307.10710) against SAC, the paper's Gaussian-policy baseline, at equal environment
steps on `ascent/DecoyPoint-v0`, the deceptive point mass (a near decoy worth ~8 a episode, a far goal worth ~19).
Both arms: the same widths, batch, learning rate, discount and random-action warm-up; seeds in ABBA order so that a
loaded machine's load falls on both arms. Prints one JSON line per run, then one JSON summary: each arm's mean
deterministic evaluation return with a 95% bootstrap interval, the share of evaluation episodes that escaped the
decoy (return > 9, more than the decoy alone can pay), and the paired difference RPG - SAC with a 95% bootstrap and a
95% t interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_rpg.py --steps 6000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ci95  # noqa: E402

ESCAPE_RETURN = 9.0
"""An evaluation episode whose return exceeds this collected reward from the far goal's bump: the decoy alone pays at
most 0.3 a step, 9 over the 30 steps."""


def bootstrap95(xs: list[float], resamples: int = 10_000, seed: int = 0) -> list[float]:
    """The 95% percentile-bootstrap interval of the mean of `xs`.

    >>> bootstrap95([1.0, 1.0, 1.0])
    [1.0, 1.0]
    """
    x = np.asarray(xs, float)
    means = x[np.random.default_rng(seed).integers(0, len(x), (resamples, len(x)))].mean(1)
    return [round(float(np.quantile(means, 0.025)), 4), round(float(np.quantile(means, 0.975)), 4)]


def per_latent(run_dir: Path, latents: int, width: int, episodes: int = 3) -> dict:
    """A finished RPG run's deterministic return with each latent held for whole episodes (as in training), and with
    the latent pi(z|s_0) prefers at the start held: does some mode go past the decoy?"""
    import gymnasium as gym
    import torch
    from safetensors.torch import load_file

    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv, gymnasium
    from ascent.classic.rpg import RPG, RPGParams

    gymnasium()
    envs = VecEnv(lambda: gym.make("ascent/DecoyPoint-v0"), 1, seed=0)
    algo = RPG(ClassicContext(envs, 1, 0, torch.device("cpu")), RPGParams(n_latents=latents, hidden=[width, width]))
    weights = load_file(str(sorted(run_dir.glob("checkpoints/step_*/model.safetensors"))[-1]))
    for name, module in algo.modules().items():
        module.load_state_dict({k[len(name) + 1 :]: v for k, v in weights.items() if k.startswith(name + ".")})

    @torch.no_grad()
    def episode(z: int | None, seed: int) -> float:
        env, total = gym.make("ascent/DecoyPoint-v0"), 0.0
        obs, _ = env.reset(seed=seed)
        h = algo.model.enc(torch.tensor(obs)[None])
        z = int(algo.latent_logits(h).argmax()) if z is None else z
        for _ in range(30):
            h = algo.model.enc(torch.tensor(obs)[None])
            obs, r, *_ = env.step(algo.actor.mode(torch.cat([h, algo.onehot(torch.tensor([z]))], -1))[0].numpy())
            total += r
        return total

    each = [float(np.mean([episode(z, 10_000 + i) for i in range(episodes)])) for z in range(latents)]
    held = float(np.mean([episode(None, 10_000 + i) for i in range(10)]))
    return {"per_latent_return": [round(x, 2) for x in each], "best_latent_return": max(each), "held_z_return": held}


def run(arm: str, args: argparse.Namespace, seed: int, out: Path) -> dict:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    common = f"learning_starts={args.learning_starts},batch_size={args.batch},hidden=[{args.width},{args.width}]"
    if arm == "sac":
        algo = f"classic.algorithm=sac({common})"
    else:
        k = 1 if arm == "rpg_k1" else args.latents
        algo = f"classic.algorithm=rpg({common},train_freq={args.train_freq},n_latents={k},info_coef={args.info_coef})"
    overrides = ["classic.env=ascent/DecoyPoint-v0", f"classic.total_steps={args.steps}", f"seed={seed}", algo]
    overrides += ["logging.progress=false", f"output_dir={out}", f"name={arm}-s{seed}", "classic.eval_episodes=10"]
    overrides += ["classic.log_every=1000"]
    return train(load_config("halfcheetah-sac", overrides))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--arms", default="sac,rpg", help="comma-separated: sac, rpg, rpg_k1 (one latent: no mixture)")
    ap.add_argument("--learning-starts", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--latents", type=int, default=6)
    ap.add_argument("--info-coef", type=float, default=1.0, help="RPG: beta, the mutual-information weight")
    ap.add_argument("--train-freq", type=int, default=2, help="RPG: environment steps per model update")
    ap.add_argument("--work", default="")
    ap.add_argument("--analyse", default="", help="only print per_latent() of the rpg-s* runs in this folder")
    args = ap.parse_args()
    if args.analyse:
        for d in sorted(Path(args.analyse).glob("rpg-s*")):
            print(json.dumps({"run": d.name, **per_latent(d, args.latents, args.width)}), flush=True)
        return
    arms = args.arms.split(",")
    bad = [a for a in arms if a not in ("sac", "rpg", "rpg_k1")]
    if bad:
        sys.exit(f"--arms: unknown {bad} (valid: sac, rpg, rpg_k1)")
    out = Path(args.work or tempfile.mkdtemp(prefix="rpg-"))
    cpu = next((x.split(":")[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    res: dict[str, dict[int, dict]] = {arm: {} for arm in arms}
    loads, start = [], time.time()
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        for arm in arms if i % 2 == 0 else arms[::-1]:
            s = run(arm, args, seed, out)
            reached = float(np.mean([r > ESCAPE_RETURN for r in s["final_returns"]]))
            row = {"arm": arm, "seed": seed, "final_return": s["final_return"], "escaped": reached}
            row |= {"train_cpu_seconds": s.get("train_cpu_seconds"), "load": os.getloadavg()[0]}
            if arm != "sac":
                row |= per_latent(out / f"{arm}-s{seed}", 1 if arm == "rpg_k1" else args.latents, args.width)
            res[arm][seed] = row
            loads.append(os.getloadavg()[0])
            print(json.dumps(row), flush=True)
    summary: dict = {"env": "ascent/DecoyPoint-v0", "cpu": cpu, "nproc": os.cpu_count(), "args": vars(args)}
    summary |= {"load_min_max": [min(loads), max(loads)], "wall_seconds": round(time.time() - start)}
    for arm in arms:
        v = [r["final_return"] for r in res[arm].values()]
        g = [r["escaped"] for r in res[arm].values()]
        cpu_s = [r["train_cpu_seconds"] or 0.0 for r in res[arm].values()]
        summary[arm] = {"final_return_per_seed": v, "mean": float(np.mean(v)), "boot95": bootstrap95(v)}
        if arm != "sac":
            best = [r["best_latent_return"] for r in res[arm].values()]
            summary[arm] |= {
                "best_latent_return_per_seed": best,
                "best_latent_escaped": float(np.mean(np.array(best) > 9)),
            }
        summary[arm] |= {"escaped_per_seed": g, "escaped_mean": float(np.mean(g)), "cpu_s": np.mean(cpu_s)}
    for arm in [a for a in arms if a != "sac" and "sac" in arms]:
        d = [res[arm][s]["final_return"] - res["sac"][s]["final_return"] for s in res["sac"]]
        summary[f"{arm}-sac"] = {"diff_per_seed": d, "mean": float(np.mean(d)), "boot95": bootstrap95(d)}
        summary[f"{arm}-sac"]["t95"] = ci95(d)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
