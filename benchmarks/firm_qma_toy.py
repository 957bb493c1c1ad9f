"""FIRM's Quality-Modulated Alignment (Zhao et al., 2026, arXiv:2603.12247) at toy scale, on the word-level edit
task of `firm_edit_toy.py`: QMA against the plain alignment reward (and the unmodulated sum) with trained critics.

    python benchmarks/firm_qma_toy.py --seeds 5 --steps 60

The task and instructions are those of firm_edit_toy.py ("replace A with B" on a 6-word source), but the policy
may also write an artifact token `#` (ascent's stand-in for an image artifact: it carries no content), and its
start leaks artifacts (about 7% of the positions) and B into other positions. Two critics per seed, trained before
RL on a curated scoring set of 3000 outputs of varied quality scored by the true metrics:
  - the plan critic (`reward:plan_critic`, FIRM-Gen's plan-then-score): the instruction is planned into a
    checklist, ["has B where A", "no A"], and one `EditCritic` scores each item (true item scores: the share of
    A's positions that hold B; 1 if no A is left); alignment is the mean item score;
  - the quality critic (`reward:quality_critic`, prompt-free): true quality is the least of two sub-scores, as
    FIRM's quality is the least of its three: 1 - the share of artifact positions, 1 - the share of adjacent
    identical word pairs (a stutter).
GRPO (16 edits x 8 samples per step, Adam 0.05) from the same start and seed on
  - `align`: the plan critic alone (the authors' "ins" reward mode: instruction following only, the plain form);
  - `sum`: alignment + quality critics (unmodulated);
  - `qma`: `reward:base_and_bonus(base=plan critic, bonus=quality critic, alpha=0.5)` = A (0.5 + 0.5 Q), the
    authors' default; with --oracle also `align_true` and `qma_true` on the true metrics.
Measured with the true metrics on 200 held-out edits x 16 samples: alignment, quality, the clean-and-faithful
rate (alignment 1 and quality 1), and consistency (the other positions left unchanged); paired differences
qma - align and qma - sum with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.rewards import firm  # noqa: E402
from ascent.rewards.runner import resolve_reward  # noqa: E402
from ascent.rewards.shaping import base_and_bonus  # noqa: E402
from benchmarks.common import load, paired_summary, print_machine  # noqa: E402
from benchmarks.firm_edit_toy import VOCAB, edits, instruction  # noqa: E402

N, V = 6, len(VOCAB)
OUT = VOCAB + ["#"]  # the artifact token is the last output
W = len(OUT)


def text(ids: list[int]) -> str:
    return " ".join(OUT[i] for i in ids)


def metrics(src: list[int], a: int, b: int, out: list[int]) -> dict[str, float]:
    """The true checklist items, alignment, quality and consistency of one output."""
    tgt = [i for i in range(N) if src[i] == a]
    rest = [i for i in range(N) if src[i] != a]
    items = [sum(out[i] == b for i in tgt) / len(tgt), float(a not in out)]
    artifacts = sum(o == V for o in out) / N
    stutter = sum(out[i] == out[i + 1] for i in range(N - 1)) / (N - 1)
    return {
        "items": items,
        "alignment": sum(items) / 2,
        "quality": min(1 - artifacts, 1 - stutter),
        "consistency": sum(out[i] == src[i] for i in rest) / len(rest) if rest else 1.0,
    }


def prior(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 + seed)
    t = 3.5 * torch.eye(V, W) + 0.3 * torch.randn(V, W, generator=g)
    t[:, V] += 1.3  # artifacts everywhere
    e = 0.3 * torch.randn(2, V, W, generator=g)
    e[1] += 1.2 * torch.eye(V, W)  # at a target, lean a little towards B
    e[0] += 1.0 * torch.eye(V, W)  # ... and leak B into the other positions
    return {"t": t, "e": e}


def logits_of(theta: dict, batch: list) -> torch.Tensor:
    """(n, N, W) per-position logits."""
    src = torch.tensor([s for s, _, _ in batch])
    is_a = (src == torch.tensor([a for _, a, _ in batch])[:, None]).long()
    b = torch.tensor([b for _, _, b in batch])[:, None].expand(-1, N)
    return theta["t"][src] + theta["e"][is_a, b]


def sample(logits: torch.Tensor, k: int, g: torch.Generator) -> torch.Tensor:
    probs = logits.softmax(-1).repeat_interleave(k, 0).reshape(-1, W)
    return torch.multinomial(probs, 1, generator=g).reshape(logits.shape[0], k, N)


def scoring_set(rng: random.Random, n: int) -> tuple[list, list]:
    """Curated outputs of varied quality: per edit p_exec, p_cons, p_art ~ U(0, 1); a position becomes an
    artifact with p_art / 3, else a target becomes B with p_exec (else stays or a random word), another position
    stays with p_cons (else B or a random word)."""
    rows, outs = edits(rng, n), []
    for src, a, b in rows:
        pe, pc, pa = rng.random(), rng.random(), rng.random() / 3
        out = []
        for s in src:
            if rng.random() < pa:
                out.append(V)
            elif s == a:
                out.append(b if rng.random() < pe else (s if rng.random() < 0.5 else rng.randrange(V)))
            else:
                out.append(s if rng.random() < pc else (b if rng.random() < 0.5 else rng.randrange(V)))
        outs.append(out)
    return rows, outs


def train_critics(seed: int, folder: Path) -> dict[str, str]:
    rows, outs = scoring_set(random.Random(30_000 + seed), 3000)
    true = [metrics(s, a, b, o) for (s, a, b), o in zip(rows, outs)]
    srcs, outs_t = [text(s) for s, _, _ in rows], [text(o) for o in outs]
    plans = [firm.checklist(instruction(a, b)) for _, a, b in rows]
    plan = firm.EditCritic(OUT + list(firm.PLAN_WORDS), max_instruction=4, max_len=N, seed=seed)
    flat = [(s, item, o, m["items"][k]) for s, p, o, m in zip(srcs, plans, outs_t, true) for k, item in enumerate(p)]
    loss_p = firm.fit_critic(plan, *[[f[k] for f in flat] for k in range(3)], [f[3] for f in flat], seed=seed)
    quality = firm.QualityCritic(OUT, max_len=N, seed=seed)
    loss_q = firm.fit_critic(quality, srcs, [""] * len(srcs), outs_t, [m["quality"] for m in true], seed=seed)
    return {
        "alignment": str(firm.save_critic(plan, folder / "plan", "alignment_item", {"train_loss": loss_p})),
        "quality": str(firm.save_critic(quality, folder / "quality", "quality", {"train_loss": loss_q})),
    }


def grpo(theta0: dict, reward, train: list, steps: int, seed: int, lr: float) -> dict:
    theta = {k: v.clone().requires_grad_(True) for k, v in theta0.items()}
    opt = torch.optim.Adam(theta.values(), lr=lr)
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = rng.sample(train, 16)
        logits = logits_of(theta, batch)
        ids = sample(logits.detach(), 8, g)
        fields = {
            "source": [text(s) for s, _, _ in batch for _ in range(8)],
            "instruction": [instruction(a, b) for _, a, b in batch for _ in range(8)],
        }
        outs = [text(ids[n, j].tolist()) for n in range(16) for j in range(8)]
        r = torch.tensor(reward([""] * len(outs), outs, **fields), dtype=torch.float32).reshape(16, 8)
        adv = (r - r.mean(1, keepdim=True)) / (r.std(1, unbiased=False, keepdim=True) + 1e-6)
        logp = logits.log_softmax(-1).unsqueeze(1).expand(-1, 8, -1, -1).gather(-1, ids.unsqueeze(-1)).sum((-1, -2))
        loss = -(adv * logp).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in theta.items()}


def evaluate(theta: dict, test: list, seed: int, critics: dict, k: int = 16) -> dict:
    ids = sample(logits_of(theta, test), k, torch.Generator().manual_seed(50_000 + seed))
    rows = [(s, a, b, ids[n, j].tolist()) for n, (s, a, b) in enumerate(test) for j in range(k)]
    true = [metrics(s, a, b, o) for s, a, b, o in rows]
    fields = {"source": [text(s) for s, *_ in rows], "instruction": [instruction(a, b) for _, a, b, _ in rows]}
    outs = [text(o) for *_, o in rows]
    est = {c: critics[c]([""] * len(rows), outs, **fields) for c in critics}
    n = len(rows)

    def mean(key: str) -> float:
        return round(sum(m[key] for m in true) / n, 4)

    return {
        "alignment": mean("alignment"),
        "quality": mean("quality"),
        "clean_faithful": round(sum(m["alignment"] == 1.0 and m["quality"] == 1.0 for m in true) / n, 4),
        "consistency": mean("consistency"),
        "mae_align": round(sum(abs(x - m["alignment"]) for x, m in zip(est["alignment"], true)) / n, 4),
        "mae_quality": round(sum(abs(x - m["quality"]) for x, m in zip(est["quality"], true)) / n, 4),
    }


def true_reward(key: str):
    def fn(prompts, outs, source, instruction, **_):
        out = []
        for s, ins, o in zip(source, instruction, outs):
            w = ins.split()
            ids = [OUT.index(x) for x in o.split()]
            out.append(metrics([VOCAB.index(x) for x in s.split()], VOCAB.index(w[1]), VOCAB.index(w[3]), ids)[key])
        return out

    return fn


def run_seed(seed: int, steps: int, lr: float, oracle: bool = False) -> dict:
    rng = random.Random(seed)
    train, test = edits(rng, 600), edits(rng, 200)
    theta0 = prior(seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = train_critics(seed, Path(tmp))
        al = resolve_reward(f"plan_critic(path={paths['alignment']!r})")
        qu = resolve_reward(f"quality_critic(path={paths['quality']!r})")
        critics = {"alignment": al, "quality": qu}
        arms = [
            ("align", al),
            ("sum", lambda p, o, **f: [x + y for x, y in zip(al(p, o, **f), qu(p, o, **f))]),
            ("qma", lambda p, o, **f: base_and_bonus(p, o, base=al, bonus=qu, alpha=0.5, **f)),
        ]
        if oracle:
            ta, tq = true_reward("alignment"), true_reward("quality")
            arms += [
                ("align_true", ta),
                ("qma_true", lambda p, o, **f: base_and_bonus(p, o, base=ta, bonus=tq, alpha=0.5, **f)),
            ]
        out = {"seed": seed, "init": evaluate(theta0, test, seed, critics)}
        for name, fn in arms:
            out[name] = evaluate(grpo(theta0, fn, train, steps, seed, lr), test, seed, critics)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60, help="GRPO updates of 16 edits x 8 samples")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--oracle", action="store_true", help="also align and QMA on the true metrics")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.steps, args.lr, args.oracle))
        print(json.dumps(rows[-1]), flush=True)
    keys = ("alignment", "quality", "clean_faithful", "consistency")
    summary = {
        "qma - align": paired_summary(rows, keys, arm="qma", control="align", shown=("init", "align", "sum", "qma")),
        "qma - sum": paired_summary(rows, keys, arm="qma", control="sum"),
    }
    if args.oracle:
        summary["qma_true - align_true"] = paired_summary(rows, keys, arm="qma_true", control="align_true")
    print(json.dumps({"summary": summary, "load_at_end": load()}), flush=True)


if __name__ == "__main__":
    main()
