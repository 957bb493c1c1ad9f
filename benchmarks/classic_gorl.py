"""GoRL (Zhang et al. 2025, arXiv:2512.02581) against PPO at equal environment steps: the `cartpole-ppo` recipe's
PPO settings on a continuous-control task for both arms, GoRL adding its stages and flow decoder; seeds run in
ABBA order (PPO, GoRL, GoRL, PPO, ...) so that a loaded machine's load falls on both arms. Arms: PPO, GoRL
(a fresh latent policy each stage, as the authors' pipeline) and GoRL keeping its latent policy across stages
(`reset_encoder=false`). Prints each run's deterministic evaluation return and the paired difference of each GoRL
arm - PPO with a 95% t interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/classic_gorl.py --env InvertedPendulum-v5 --steps 20000 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import yaml


def spec(name: str, extra: dict) -> str:
    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "ascent/recipes/cartpole-ppo.yaml").read_text())
    params = {**recipe["classic"]["algorithm"]["ppo"], **extra}
    return "classic.algorithm=" + json.dumps({name: params}).replace('"', "")


def run(arm: str, env: str, steps: int, seed: int, out: Path, gorl: dict, tag: str = "") -> dict:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    algo = spec("gorl", gorl) if arm.startswith("gorl") else spec("ppo", {})
    overrides = [f"classic.env={env}", f"classic.total_steps={steps}", f"seed={seed}", "logging.progress=false"]
    overrides += [algo, f"output_dir={out}", f"name={arm}{tag}-s{seed}", "classic.eval_episodes=10"]
    return train(load_config("cartpole-ppo", overrides))


def t95(n: int) -> float:
    return {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}.get(n, 2.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="InvertedPendulum-v5")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    out = Path(args.work or tempfile.mkdtemp(prefix="gorl-"))
    print("cpu:", next((x.split(":")[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?"))
    arms = {"ppo": {}, "gorl": {"stages": args.stages}, "gorl_keep": {"stages": args.stages, "reset_encoder": False}}
    res: dict[str, dict[int, float]] = {arm: {} for arm in arms}
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        for arm in list(arms) if i % 2 == 0 else list(arms)[::-1]:
            s = run(arm, args.env, args.steps, seed, out, arms[arm])
            res[arm][seed] = s["final_return"]
            print(
                json.dumps(
                    {
                        "arm": arm,
                        "seed": seed,
                        "final_return": s["final_return"],
                        "train_cpu_seconds": s.get("train_cpu_seconds"),
                        "load": os.getloadavg()[0],
                    }
                ),
                flush=True,
            )
    for arm in res:
        v = list(res[arm].values())
        print(f"{arm}: mean {statistics.mean(v):.1f} sd {statistics.stdev(v) if len(v) > 1 else 0:.1f} per seed {v}")
    for arm in ("gorl", "gorl_keep"):
        diffs = [res[arm][s] - res["ppo"][s] for s in res["ppo"]]
        m, sd = statistics.mean(diffs), statistics.stdev(diffs) if len(diffs) > 1 else 0.0
        h = t95(len(diffs)) * sd / len(diffs) ** 0.5
        print(f"{arm} - ppo: mean {m:.1f} sd {sd:.1f} 95% t [{m - h:.1f}, {m + h:.1f}] over {len(diffs)} seeds")


if __name__ == "__main__":
    main()
