"""The GUI-grounding row's claim on a toy: GRPO with a dense point reward against the binary hit reward (SE-GUI,
Yuan et al. 2025, arXiv:2505.12370; GUI-G², Tang et al. 2025, arXiv:2507.15846).

    python benchmarks/gui_dense_reward.py --seeds 5 --steps 60

Per seed: 32 target elements on a 1000 x 1000 screen, each a box of 20-60 pixels a side at a random place. The
policy is a Gaussian click per element, mean μ_e (learned, started at the screen centre) and one learned log-std
(started at 200 pixels) — ascent's reduced stand-in for a VLM's coordinate head. GRPO (8 elements per step, 8 clicks
each; Adam, lr 25 pixels on the means and 0.05 on the log-std, both decaying linearly to 5%) trains it with the
registered `gui_point` reward, method `binary` (hit or miss), `se_gui` (hit + quadratic distance decay) or
`gaussian` (GUI-G² point reward, σ = 0.5 · element size), from the same start, the same element draws and the same
seed. The clicks reach the reward as text, `(x, y)`. Measured after training: the hit rate of the mean click over
the 32 elements and the mean distance of the mean click to the element centre.
Prints a JSON line per seed and the paired differences dense - binary with 95% t-intervals.
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

from ascent.rewards.runner import resolve_reward  # noqa: E402
from benchmarks.common import ci95, load, print_machine  # noqa: E402

SIZE, ELEMENTS, METHODS = 1000, 32, ("binary", "se_gui", "gaussian")


def make_screen(seed: int) -> list[list[float]]:
    """ELEMENTS boxes [x1, y1, x2, y2] of 20-60 pixels a side."""
    rng = random.Random(seed)
    boxes = []
    for _ in range(ELEMENTS):
        w, h = rng.uniform(20, 60), rng.uniform(20, 60)
        x, y = rng.uniform(0, SIZE - w), rng.uniform(0, SIZE - h)
        boxes.append([x, y, x + w, y + h])
    return boxes


def train(boxes: list[list[float]], method: str, steps: int, seed: int) -> torch.Tensor:
    """GRPO on the per-element Gaussian click policy; returns the (E, 2) mean clicks."""
    reward = resolve_reward(f"gui_point(method={method})")
    mu = torch.full((ELEMENTS, 2), SIZE / 2.0, requires_grad=True)
    log_std = torch.tensor(200.0).log().requires_grad_(True)
    opt = torch.optim.Adam([{"params": [mu], "lr": 25.0}, {"params": [log_std], "lr": 0.05}])
    decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 - 0.95 * k / steps)  # linear to 5%
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(steps):
        loss = torch.zeros(())
        for e in rng.sample(range(ELEMENTS), 8):
            std = log_std.exp().detach()
            clicks = mu.detach()[e] + std * torch.randn(8, 2, generator=g)  # (8, 2)
            texts = [f"({x:.1f}, {y:.1f})" for x, y in clicks.tolist()]
            r = torch.tensor(reward(["click"] * 8, texts, bbox=[boxes[e]] * 8, width=[SIZE] * 8, height=[SIZE] * 8))
            adv = (r - r.mean()) / (r.std(unbiased=False) + 1e-6)
            dist = torch.distributions.Normal(mu[e], log_std.exp())
            loss = loss - (adv * dist.log_prob(clicks).sum(-1)).mean() / 8
        opt.zero_grad()
        loss.backward()
        opt.step()
        decay.step()
    return mu.detach()


def evaluate(mu: torch.Tensor, boxes: list[list[float]]) -> dict:
    hits, dists = [], []
    for (x, y), b in zip(mu.tolist(), boxes):
        hits.append(float(b[0] <= x <= b[2] and b[1] <= y <= b[3]))
        dists.append(((x - (b[0] + b[2]) / 2) ** 2 + (y - (b[1] + b[3]) / 2) ** 2) ** 0.5)
    return {"hit_rate": round(statistics.mean(hits), 4), "distance": round(statistics.mean(dists), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60, help="GRPO updates of 8 elements x 8 clicks")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    rows = []
    for seed in range(args.seeds):
        boxes = make_screen(seed)
        row = {"seed": seed, **{m: evaluate(train(boxes, m, args.steps, seed), boxes) for m in METHODS}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {}
    for m in ("se_gui", "gaussian"):
        for key in ("hit_rate", "distance"):
            diffs = [r[m][key] - r["binary"][key] for r in rows]
            summary[f"{m}-binary/{key}"] = {
                "binary": round(statistics.mean(r["binary"][key] for r in rows), 4),
                m: round(statistics.mean(r[m][key] for r in rows), 4),
                "diff_mean": round(statistics.mean(diffs), 4),
                "diff_sd": round(statistics.stdev(diffs), 4) if len(diffs) > 1 else 0.0,
                "ci95": ci95(diffs),
            }
    print(json.dumps({"summary": summary, "load_at_end": load()}), flush=True)


if __name__ == "__main__":
    main()
