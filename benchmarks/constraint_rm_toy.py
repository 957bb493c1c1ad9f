"""Label-free multi-constraint instruction following (Ren et al., 2025, arXiv:2510.14420) on a generated toy task:
the constraint-wise classifier reward model trained on pseudo-labels only, against GRPO on the true rule checkers
and on a single holistic reward model trained on the same pseudo-labels.

    python benchmarks/constraint_rm_toy.py --seeds 5 --steps 80

The task (per seed): an instruction is 2-4 atomic constraints drawn from 36 (contains / not_contains / starts_with /
ends_with one of 8 words, max_words 3 or 5, min_words 5 or 7, lowercase, no_commas), without contradictions; 600
training and 200 held-out instructions. A response is up to 8 tokens from 8 lower-case words, 4 capitalised
names and a comma, then END. The policy samples each position independently given the instruction:
π_t(token | I) = softmax(B[t] + Σ_{c ∈ I} W[c, t]), started from a weak "pretrained" prior that leans towards each
asked constraint (plus seed noise) — ascent's reduced stand-in for the paper's LLM.

Reward models (`ascent/rewards/constraint_rm.py`), trained before RL on pseudo-labels from the 600 training
instructions: each instruction is grown one constraint at a time and the initial policy answers every level once;
the answer with c_j asked is a positive for c_j, the answer one level earlier a negative. No checker sees any answer.
  - `constraint_rm`: the constraint-wise classifier; reward = mean of its per-constraint probabilities
    (`reward:constraint_rm`, scored from its saved folder);
  - `holistic_rm`: one probability for the whole instruction, trained on the same pairs with the label on the
    whole instruction prefix;
  - `checker`: the true rule checkers, `reward:constraints` (share satisfied) — the oracle.
GRPO (16 instructions x 8 samples per step, Adam) trains each arm from the same initial policy with the same seed.
Measured on the held-out instructions with 32 samples each (a fixed generator): the share of constraints
satisfied and the share of answers satisfying all of them (true checkers), and each RM's agreement with the true
checkers (accuracy of p > 0.5, per constraint or per instruction) on the initial policy's answers and on the
trained policy's answers (its own RL arm). Prints a JSON line per seed and paired differences with 95% t-intervals.
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

from ascent.rewards import constraint_rm as crm  # noqa: E402
from ascent.rewards.constraints import check  # noqa: E402
from ascent.rewards.runner import resolve_reward  # noqa: E402
from benchmarks.common import load, paired_summary, print_machine  # noqa: E402

WORDS = ["river", "stone", "light", "cloud", "green", "quiet", "apple", "storm"]
NAMES = ["Paris", "Monday", "Alice", "North"]
TOKENS = WORDS + NAMES + [","]
END = len(TOKENS)  # the END token's index
V, L = len(TOKENS) + 1, 8
CATALOGUE = (
    [{"type": t, "value": w} for t in ("contains", "not_contains", "starts_with", "ends_with") for w in WORDS]
    + [{"type": "max_words", "value": n} for n in (3, 5)]
    + [{"type": "min_words", "value": n} for n in (5, 7)]
    + [{"type": "lowercase"}, {"type": "no_commas"}]
)


def conflicts(cs: list[dict]) -> bool:
    kinds = [c["type"] for c in cs]
    banned = {c["value"] for c in cs if c["type"] == "not_contains"}
    wanted = {c["value"] for c in cs if c["type"] in ("contains", "starts_with", "ends_with")}
    hi = min([c["value"] for c in cs if c["type"] == "max_words"], default=99)
    lo = max([c["value"] for c in cs if c["type"] == "min_words"], default=0)
    return bool(banned & wanted) or kinds.count("starts_with") > 1 or kinds.count("ends_with") > 1 or lo > hi


def instructions(rng: random.Random, n: int) -> list[list[dict]]:
    out: list[list[dict]] = []
    while len(out) < n:
        cs = [CATALOGUE[i] for i in rng.sample(range(len(CATALOGUE)), rng.choice((2, 3, 4)))]
        if not conflicts(cs):
            out.append(cs)
    return out


def prior(seed: int) -> dict[str, torch.Tensor]:
    """The initial policy: B (L, V) and W (len(CATALOGUE), L, V), a weak lean towards each asked constraint."""
    g = torch.Generator().manual_seed(10_000 + seed)
    b = torch.zeros(L, V)
    b[:, len(WORDS) : END] = -0.7  # names and the comma: less likely than words
    b[:, END] = torch.linspace(-3.0, 1.5, L)  # stopping grows likelier along the answer
    b[0, END] = -9.0  # never empty
    w = 0.3 * torch.randn(len(CATALOGUE), L, V, generator=g)
    for i, c in enumerate(CATALOGUE):
        t, v = c["type"], c.get("value")
        if t == "contains":
            w[i, :, WORDS.index(v)] += 0.6
        elif t == "not_contains":
            w[i, :, WORDS.index(v)] -= 0.8
        elif t == "starts_with":
            w[i, 0, WORDS.index(v)] += 1.2
        elif t == "ends_with":
            w[i, :, WORDS.index(v)] += 0.4
        elif t == "max_words":
            w[i, v - 1 :, END] += 0.8
        elif t == "min_words":
            w[i, :v, END] -= 0.8
        elif t == "lowercase":
            w[i, :, len(WORDS) : len(WORDS) + len(NAMES)] -= 0.6
        else:
            w[i, :, END - 1] -= 0.6
    return {"b": b, "w": w}


def logits_of(theta: dict[str, torch.Tensor], batch: list[list[dict]]) -> torch.Tensor:
    """(N, L, V) per-position logits of N instructions."""
    idx = torch.zeros(len(batch), len(CATALOGUE))
    for n, cs in enumerate(batch):
        for c in cs:
            idx[n, CATALOGUE.index(c)] = 1.0
    return theta["b"] + torch.einsum("nc,clv->nlv", idx, theta["w"])


def sample(logits: torch.Tensor, k: int, g: torch.Generator) -> torch.Tensor:
    """(N, k, L) token ids, k answers per instruction."""
    probs = logits.softmax(-1).repeat_interleave(k, 0).reshape(-1, V)
    return torch.multinomial(probs, 1, generator=g).reshape(logits.shape[0], k, L)


def render(ids: list[int]) -> str:
    words = []
    for i in ids:
        if i == END:
            break
        words.append(TOKENS[i])
    return " ".join(words).replace(" ,", ",")


def log_prob(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(N, k) log π of each answer: the tokens up to and including the first END."""
    lp = logits.log_softmax(-1).unsqueeze(1).expand(-1, ids.shape[1], -1, -1).gather(-1, ids.unsqueeze(-1))[..., 0]
    is_end = ids == END
    before = (is_end.long().cumsum(-1) - is_end.long()) == 0  # positions up to the first END
    return (lp * before).sum(-1)


def train_rms(theta: dict, train: list[list[dict]], seed: int, folder: Path) -> tuple[str, crm.HolisticClassifier]:
    g = torch.Generator().manual_seed(20_000 + seed)

    def respond(cs: list[dict]) -> str:
        return render(sample(logits_of(theta, [cs]), 1, g)[0, 0].tolist())

    cw, hol = crm.pseudo_labels(train, respond)
    model = crm.ConstraintClassifier()
    loss = crm.fit(model, [c for c, _, _ in cw], [y for _, y, _ in cw], [lab for *_, lab in cw])
    noise = sum(lab != check(y, c) for c, y, lab in cw) / len(cw)
    crm.save(model, folder, {"examples": len(cw), "train_loss": round(loss, 4), "pseudo_label_error": noise})
    holistic = crm.HolisticClassifier()
    crm.fit(holistic, [c for c, _, _ in hol], [y for _, y, _ in hol], [lab for *_, lab in hol])
    return str(folder), holistic


def grpo(theta0: dict, reward, train: list[list[dict]], steps: int, seed: int, lr: float) -> dict:
    theta = {k: v.clone().requires_grad_(True) for k, v in theta0.items()}
    opt = torch.optim.Adam(theta.values(), lr=lr)
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = rng.sample(train, 16)
        logits = logits_of(theta, batch)
        ids = sample(logits.detach(), 8, g)  # (16, 8, L)
        texts = [render(ids[n, j].tolist()) for n in range(16) for j in range(8)]
        rows = [cs for cs in batch for _ in range(8)]
        r = torch.tensor(reward(texts, rows), dtype=torch.float32).reshape(16, 8)
        adv = (r - r.mean(1, keepdim=True)) / (r.std(1, unbiased=False, keepdim=True) + 1e-6)
        loss = -(adv * log_prob(logits, ids)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in theta.items()}


def answers(theta: dict, test: list[list[dict]], seed: int, k: int = 32) -> list[tuple[list[dict], str]]:
    ids = sample(logits_of(theta, test), k, torch.Generator().manual_seed(50_000 + seed))
    return [(cs, render(ids[n, j].tolist())) for n, cs in enumerate(test) for j in range(k)]


def evaluate(pairs: list[tuple[list[dict], str]]) -> dict:
    verdicts = [[check(y, c) for c in cs] for cs, y in pairs]
    share = sum(sum(v) / len(v) for v in verdicts) / len(verdicts)
    return {"share": round(share, 4), "all": round(sum(all(v) for v in verdicts) / len(verdicts), 4)}


def agreement(model: crm.ConstraintClassifier, holistic: crm.HolisticClassifier, pairs: list) -> dict:
    specs = [c for cs, _ in pairs for c in cs]
    texts = [y for cs, y in pairs for _ in cs]
    truth = [check(y, c) for c, y in zip(specs, texts)]
    probs = model.prob(specs, texts)
    hol = holistic.prob([cs for cs, _ in pairs], [y for _, y in pairs])
    all_true = [all(check(y, c) for c in cs) for cs, y in pairs]
    return {
        "cw_acc": round(sum((p > 0.5) == t for p, t in zip(probs, truth)) / len(truth), 4),
        "cw_base": round(max(sum(truth), len(truth) - sum(truth)) / len(truth), 4),
        "hol_acc": round(sum((p > 0.5) == t for p, t in zip(hol, all_true)) / len(all_true), 4),
        "hol_base": round(max(sum(all_true), len(all_true) - sum(all_true)) / len(all_true), 4),
    }


def run_seed(seed: int, steps: int, lr: float) -> dict:
    rng = random.Random(seed)
    train, test = instructions(rng, 600), instructions(rng, 200)
    theta0 = prior(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path, holistic = train_rms(theta0, train, seed, Path(tmp) / "crm")
        meta = json.loads((Path(path) / crm.META_FILE).read_text())["summary"]
        cw_reward = resolve_reward(f"constraint_rm(path={path!r})")
        model = cw_reward.model
        checker = resolve_reward("constraints")
        arms = {
            "checker": lambda texts, rows: checker([""] * len(texts), texts, constraints=rows),
            "constraint_rm": lambda texts, rows: cw_reward([""] * len(texts), texts, constraints=rows),
            "holistic_rm": lambda texts, rows: holistic.prob(rows, texts),
        }
        init = answers(theta0, test, seed)
        out = {"seed": seed, "pseudo_label_error": round(meta["pseudo_label_error"], 4)}
        out["init"] = evaluate(init) | agreement(model, holistic, init)
        for name, fn in arms.items():
            done = answers(grpo(theta0, fn, train, steps, seed, lr), test, seed)
            out[name] = evaluate(done) | agreement(model, holistic, done)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=80, help="GRPO updates of 16 instructions x 8 answers")
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.steps, args.lr))
        print(json.dumps(rows[-1]), flush=True)
    summary = {
        f"{arm} - {ctl}": paired_summary(rows, ("share", "all"), arm=arm, control=ctl)
        for arm, ctl in (("constraint_rm", "holistic_rm"), ("constraint_rm", "checker"), ("constraint_rm", "init"))
    }
    summary["agreement"] = paired_summary(rows, ("cw_acc", "hol_acc"), arm="constraint_rm", control="init")
    print(json.dumps({"summary": summary, "load_at_end": load()}), flush=True)


if __name__ == "__main__":
    main()
