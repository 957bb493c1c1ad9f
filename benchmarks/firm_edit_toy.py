"""FIRM's "Base-and-Bonus" reward with specialised critics (Zhao et al., 2026, arXiv:2603.12247) on a toy
text-editing task: Consistency-Modulated Execution against the unmodulated sum of the same two critics.

    python benchmarks/firm_edit_toy.py --seeds 5 --steps 60

The task (per seed): a source is 6 words from a 10-word vocabulary; the instruction "replace A with B" names a word
A of the source (1-3 occurrences) and another word B; the right edit replaces every A with B and leaves the rest.
The policy writes each position independently: π(o_i | s_i, instruction) = softmax(T[s_i] + E[s_i == A, B]),
started from a copy-heavy table that rarely edits (P(B) about 0.1 at a target) and leaks B into other positions
(collateral edits) — ascent's reduced stand-in for an image-editing model.

Critics (`ascent/rewards/firm.py`, `reward:edit_critic`), trained per seed before RL on a curated scoring set of
3000 edits of varied quality scored by the true metrics: execution (share of the A positions turned into B) and
consistency (share of the other positions left unchanged); each is an `EditCritic` saved to a folder and scored
from it. GRPO (16 edits x 8 samples per step, Adam) from the same initial table and seed, with
  - `sum`: execution critic + consistency critic (the unmodulated sum), or
  - `cme<alpha>`: `reward:base_and_bonus(base=execution critic, bonus=consistency critic, alpha)`
    = E (alpha + (1 - alpha) C), for each alpha of --alphas (default 0.5, base_and_bonus's default, and 0, the
    plain product);
  - with --oracle, also `sum_true` and `cme0.5_true`: the same combinations on the true metrics (no critic error).
Measured on 200 held-out edits with 16 samples each (a fixed generator), with the true metrics: execution,
consistency and the exact-edit rate; and the critics' mean absolute error against the true metrics on the
initial policy's and on each trained policy's edits. Prints a JSON line per seed and paired differences cme - sum
with 95% t-intervals.
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

VOCAB = ["river", "stone", "light", "cloud", "green", "quiet", "apple", "storm", "north", "glass"]
V, N = len(VOCAB), 6


def edits(rng: random.Random, n: int) -> list[tuple[list[int], int, int]]:
    """n (source ids, A, B): A occurs 1-3 times in the source, B != A."""
    out = []
    for _ in range(n):
        a, b = rng.sample(range(V), 2)
        src = [rng.choice([w for w in range(V) if w != a]) for _ in range(N)]
        for i in rng.sample(range(N), rng.randint(1, 3)):
            src[i] = a
        out.append((src, a, b))
    return out


def instruction(a: int, b: int) -> str:
    return f"replace {VOCAB[a]} with {VOCAB[b]}"


def text(ids: list[int]) -> str:
    return " ".join(VOCAB[i] for i in ids)


def metrics(src: list[int], a: int, b: int, out: list[int]) -> tuple[float, float]:
    """The true (execution, consistency) of one edit."""
    tgt = [i for i in range(N) if src[i] == a]
    rest = [i for i in range(N) if src[i] != a]
    return sum(out[i] == b for i in tgt) / len(tgt), sum(out[i] == src[i] for i in rest) / len(rest)


def prior(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 + seed)
    t = 3.5 * torch.eye(V) + 0.3 * torch.randn(V, V, generator=g)
    e = 0.3 * torch.randn(2, V, V, generator=g)
    e[1] += 1.2 * torch.eye(V)  # at a target position, lean a little towards B
    e[0] += 1.0 * torch.eye(V)  # ... and leak B into the other positions (collateral edits)
    return {"t": t, "e": e}


def logits_of(theta: dict, batch: list) -> torch.Tensor:
    """(n, N, V) per-position logits."""
    src = torch.tensor([s for s, _, _ in batch])  # (n, N)
    is_a = (src == torch.tensor([a for _, a, _ in batch])[:, None]).long()
    b = torch.tensor([b for _, _, b in batch])[:, None].expand(-1, N)
    return theta["t"][src] + theta["e"][is_a, b]


def sample(logits: torch.Tensor, k: int, g: torch.Generator) -> torch.Tensor:
    probs = logits.softmax(-1).repeat_interleave(k, 0).reshape(-1, V)
    return torch.multinomial(probs, 1, generator=g).reshape(logits.shape[0], k, N)


def scoring_set(rng: random.Random, n: int) -> tuple[list, list]:
    """Curated edits of varied quality: per edit, p_exec, p_cons ~ U(0, 1); a target becomes B with p_exec (else it
    stays or becomes a random word), another position stays with p_cons (else B or a random word)."""
    rows, outs = edits(rng, n), []
    for src, a, b in rows:
        pe, pc = rng.random(), rng.random()
        out = []
        for s in src:
            if s == a:
                out.append(b if rng.random() < pe else (s if rng.random() < 0.5 else rng.randrange(V)))
            else:
                out.append(s if rng.random() < pc else (b if rng.random() < 0.5 else rng.randrange(V)))
        outs.append(out)
    return rows, outs


def train_critics(seed: int, folder: Path) -> dict[str, str]:
    rows, outs = scoring_set(random.Random(30_000 + seed), 3000)
    scores = [metrics(s, a, b, o) for (s, a, b), o in zip(rows, outs)]
    paths = {}
    for k, criterion in enumerate(("execution", "consistency")):
        critic = firm.EditCritic(VOCAB, max_instruction=4, max_len=N, seed=seed)
        srcs, ins = [text(s) for s, _, _ in rows], [instruction(a, b) for _, a, b in rows]
        loss = firm.fit_critic(critic, srcs, ins, [text(o) for o in outs], [sc[k] for sc in scores], seed=seed)
        paths[criterion] = str(firm.save_critic(critic, folder / criterion, criterion, {"train_loss": loss}))
    return paths


def grpo(theta0: dict, reward, train: list, steps: int, seed: int, lr: float) -> dict:
    theta = {k: v.clone().requires_grad_(True) for k, v in theta0.items()}
    opt = torch.optim.Adam(theta.values(), lr=lr)
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = rng.sample(train, 16)
        logits = logits_of(theta, batch)
        ids = sample(logits.detach(), 8, g)  # (16, 8, N)
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
    return {
        "execution": round(sum(e for e, _ in true) / n, 4),
        "consistency": round(sum(c for _, c in true) / n, 4),
        "exact": round(sum(e == 1.0 and c == 1.0 for e, c in true) / n, 4),
        "mae_exec": round(sum(abs(x - e) for x, (e, _) in zip(est["execution"], true)) / n, 4),
        "mae_cons": round(sum(abs(x - c) for x, (_, c) in zip(est["consistency"], true)) / n, 4),
    }


def run_seed(seed: int, steps: int, lr: float, alphas: list[float], oracle: bool = False) -> dict:
    rng = random.Random(seed)
    train, test = edits(rng, 600), edits(rng, 200)
    theta0 = prior(seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = train_critics(seed, Path(tmp))
        critics = {c: resolve_reward(f"edit_critic(path={p!r})") for c, p in paths.items()}
        ex, co = critics["execution"], critics["consistency"]

        def plain_sum(prompts, outs, **fields):
            return [x + y for x, y in zip(ex(prompts, outs, **fields), co(prompts, outs, **fields))]

        def cme(alpha: float):
            return lambda prompts, outs, **fields: base_and_bonus(
                prompts, outs, base=ex, bonus=co, alpha=alpha, **fields
            )

        def true_metric(k: int):
            def fn(prompts, outs, source, instruction, **_):
                ws = [i.split() for i in instruction]
                return [
                    metrics(
                        [VOCAB.index(w) for w in s.split()],
                        VOCAB.index(w[1]),
                        VOCAB.index(w[3]),
                        [VOCAB.index(w) for w in o.split()],
                    )[k]
                    for s, w, o in zip(source, ws, outs)
                ]

            return fn

        arms = [("sum", plain_sum)] + [(f"cme{a:g}", cme(a)) for a in alphas]
        if oracle:  # the same two combinations on the true metrics instead of the critics
            te, tc = true_metric(0), true_metric(1)
            arms += [
                ("sum_true", lambda p, o, **f: [x + y for x, y in zip(te(p, o, **f), tc(p, o, **f))]),
                ("cme0.5_true", lambda p, o, **f: base_and_bonus(p, o, base=te, bonus=tc, alpha=0.5, **f)),
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
    ap.add_argument("--alphas", default="0.5,0", help="CME arms: base_and_bonus's share of the base kept without bonus")
    ap.add_argument("--oracle", action="store_true", help="also sum and CME (alpha 0.5) on the true metrics")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    alphas = [float(a) for a in args.alphas.split(",")]
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.steps, args.lr, alphas, args.oracle))
        print(json.dumps(rows[-1]), flush=True)
    keys = ("execution", "consistency", "exact")
    summary = {
        f"cme{a:g} - sum": paired_summary(
            rows, keys, arm=f"cme{a:g}", control="sum", shown=("init", "sum", f"cme{a:g}")
        )
        for a in alphas
    }
    if args.oracle:
        summary["cme0.5_true - sum_true"] = paired_summary(rows, keys, arm="cme0.5_true", control="sum_true")
    print(json.dumps({"summary": summary, "load_at_end": load()}), flush=True)


if __name__ == "__main__":
    main()
