"""ascent.co against RL4CO (Berto et al. 2023, arXiv:2306.17100): POMO (Kwon et al. 2020, arXiv:2010.16011) on the
same problem, model size, training budget and test instances, several seeds, the two sides interleaved (ABBA).

    python benchmarks/co_vs_rl4co.py --problem tsp --n 20 --seeds 3 --steps 100

Both sides train the attention model in POMO's configuration (6 layers, d=128, 8 heads, FF 512, instance norm, no
graph context: RL4CO's POMO default, ~1.29M parameters) with Adam (lr 1e-4, weight decay 1e-6), gradient norm clipped
at 1.0 (RL4COTrainer's default; ascent: co.max_grad_norm=1.0), fp32, one torch thread, `--batch-size` fresh
instances per step drawn from the same distributions, all n starts per instance, for `--steps` steps (RL4CO: one
epoch of steps * batch_size instances; its end-of-epoch validation on `--val-size` instances is inside its wall time,
as a user sees it). Then both decode the first `--eval-size` instances of ascent's fixed test set (reference tours:
LKH-3 for TSP, HGS/PyVRP for CVRP) greedily from every start, with and without 8-fold augmentation, and the gap is
computed against the same reference costs.

Prints one JSON line per (seed, side) and a final JSON line:
  gap_ascent, gap_rl4co       mean test gap (percent) over seeds, multistart greedy with 8-fold augmentation
  gap_*_multistart            the same without augmentation
  *_ci95                      95% t-intervals over seeds
  wall_ratio                  median over seeds of ascent training wall / RL4CO training wall (the pair run together)
  cpu_ratio                   the same with CPU seconds of the process (less sensitive to a loaded machine)
  cpu, load_before/after      the machine and its 1-minute load average (wall figures under load are indicative)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ci95  # noqa: E402

from ascent.co.problems import Instances  # noqa: E402
from ascent.co.solvers import gap, load_test_set  # noqa: E402
from ascent.co.train import CoTrainer  # noqa: E402
from ascent.config.schema import CoConfig  # noqa: E402


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def run_ascent(args, seed: int, test) -> dict:
    cfg = CoConfig(
        problem=args.problem,
        n=args.n,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=1e-4,
        weight_decay=1e-6,
        max_grad_norm=1.0,
        eval_size=args.eval_size,
        eval_modes=["multistart", "multistart_aug8"],
        log_every=max(args.steps, 1),
    )
    trainer = CoTrainer(cfg, seed, test)
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.fit()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    res = trainer.evaluate()
    return {
        "gap_multistart": res["eval/gap_multistart"],
        "gap_aug8": res["eval/gap_multistart_aug8"],
        "train_wall_s": wall,
        "train_cpu_s": cpu,
        "eval_wall_s": time.perf_counter() - t1,
        "params": sum(p.numel() for p in trainer.policy.parameters()),
    }


def rl4co_td(inst: Instances):
    from tensordict import TensorDict

    B = inst.size
    if inst.problem == "tsp":
        return TensorDict({"locs": inst.locs.clone()}, batch_size=[B])
    cap = inst.capacity.float()
    return TensorDict(
        {
            "locs": inst.locs[:, 1:].clone(),
            "depot": inst.locs[:, 0].clone(),
            "demand": inst.demand[:, 1:].float() / cap[:, None],
            "capacity": cap[:, None],
        },
        batch_size=[B],
    )


@torch.no_grad()
def rl4co_eval(model, env, inst: Instances, n: int, batch: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    """Tour lengths (multistart greedy, and with 8-fold dihedral augmentation) of RL4CO's policy on `inst`."""
    from rl4co.data.transforms import StateAugmentation
    from rl4co.utils.ops import unbatchify

    policy = model.policy.eval()
    aug = StateAugmentation(num_augment=8, augment_fn="dihedral8", first_aug_identity=True)
    multi, multi_aug = [], []
    for lo in range(0, inst.size, batch):
        td = env.reset(rl4co_td(inst[lo : lo + batch]))
        out = policy(td.clone(), env, phase="test", decode_type="multistart_greedy", num_starts=n)
        multi.append(-unbatchify(out["reward"], n).max(dim=-1).values)
        td8 = aug(td.clone())
        out8 = policy(td8, env, phase="test", decode_type="multistart_greedy", num_starts=n)
        r = unbatchify(out8["reward"], (8, n))  # (b, 8, n)
        multi_aug.append(-r.flatten(1).max(dim=-1).values)
    return torch.cat(multi), torch.cat(multi_aug)


def run_rl4co(args, seed: int, test) -> dict:
    import logging

    import lightning
    from rl4co.envs import CVRPEnv, TSPEnv
    from rl4co.models import POMO
    from rl4co.utils.trainer import RL4COTrainer

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("rl4co").setLevel(logging.ERROR)
    lightning.seed_everything(seed, verbose=False)
    env_cls = TSPEnv if args.problem == "tsp" else CVRPEnv
    env = env_cls(generator_params={"num_loc": args.n})
    model = POMO(
        env,
        batch_size=args.batch_size,
        train_data_size=args.steps * args.batch_size,
        val_data_size=args.val_size,
        val_batch_size=args.val_size,
        optimizer_kwargs={"lr": 1e-4, "weight_decay": 1e-6},
    )
    trainer = RL4COTrainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        precision="32-true",
        gradient_clip_val=1.0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        matmul_precision=None,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.fit(model)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    multi, multi_aug = rl4co_eval(model, env, test.instances, args.n)
    return {
        "gap_multistart": gap(multi, test.ref_cost),
        "gap_aug8": gap(multi_aug, test.ref_cost),
        "train_wall_s": wall,
        "train_cpu_s": cpu,
        "eval_wall_s": time.perf_counter() - t1,
        "params": sum(p.numel() for p in model.policy.parameters()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", choices=["tsp", "cvrp"], default="tsp")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100, help="gradient steps of each side (RL4CO: one epoch of them)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--eval-size", type=int, default=1000, help="test instances decoded by both sides")
    ap.add_argument("--val-size", type=int, default=64, help="RL4CO's end-of-epoch validation instances")
    ap.add_argument("--sides", default="ascent,rl4co", help="which sides to run (rl4co needs pip install rl4co)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    test = load_test_set(args.problem, args.n, size=args.eval_size)
    sides = args.sides.split(",")
    runners = {"ascent": run_ascent, "rl4co": run_rl4co}
    rows: dict[str, list[dict]] = {s: [] for s in sides}
    load_before = load()
    for seed in range(args.seeds):
        order = sides if seed % 2 == 0 else sides[::-1]  # ABBA: the load falls on both sides
        for side in order:
            r = runners[side](args, seed, test)
            r = {"side": side, "seed": seed, "problem": args.problem, "n": args.n, **r, "load": load()}
            rows[side].append(r)
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    final = {
        "problem": args.problem,
        "n": args.n,
        "seeds": args.seeds,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "instances_trained": args.steps * args.batch_size,
        "eval_size": test.instances.size,
        "ref_solver": test.solver,
    }
    for side, rs in rows.items():
        final[f"gap_{side}"] = round(statistics.mean(r["gap_aug8"] for r in rs), 4)
        final[f"gap_{side}_ci95"] = ci95([r["gap_aug8"] for r in rs])
        final[f"gap_{side}_multistart"] = round(statistics.mean(r["gap_multistart"] for r in rs), 4)
        final[f"gap_{side}_multistart_ci95"] = ci95([r["gap_multistart"] for r in rs])
        final[f"train_wall_s_{side}"] = [round(r["train_wall_s"], 2) for r in rs]
        final[f"train_cpu_s_{side}"] = [round(r["train_cpu_s"], 2) for r in rs]
        final[f"params_{side}"] = rs[0]["params"]
    if "ascent" in rows and "rl4co" in rows:
        ratios = [a["train_wall_s"] / b["train_wall_s"] for a, b in zip(rows["ascent"], rows["rl4co"])]
        final["wall_ratio"] = round(statistics.median(ratios), 4)
        final["wall_ratios"] = [round(x, 4) for x in ratios]
        cpu = [a["train_cpu_s"] / b["train_cpu_s"] for a, b in zip(rows["ascent"], rows["rl4co"])]
        final["cpu_ratio"] = round(statistics.median(cpu), 4)
        final["cpu_ratios"] = [round(x, 4) for x in cpu]
    final.update(cpu=cpu_name(), cores=os.cpu_count(), load_before=load_before, load_after=load(), threads=1)
    print(json.dumps(final), flush=True)


if __name__ == "__main__":
    main()
