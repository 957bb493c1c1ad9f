"""Complementary RL (Muhtar et al. 2026, arXiv:2603.17621) against the actor alone, at equal episodes.

The world: `--tasks` ML competitions, each solved only by its own hidden pipeline of `--steps` choices out of
`--options` (preprocessing, model, post-processing, ...); an episode picks one option per step and succeeds (reward
1) only if every choice is right: a sparse outcome reward, 1 / options**steps by chance.

The actor: per step, logits[k, o] = T[task, k, o] + a * [experience says `step k: use o`]
- b * [experience says `step k: avoid o`]; T (per-task knowledge in the weights, like an LLM's), a and b (how
to read experience) are learned from zero, by REINFORCE with the registered `dr_grpo` advantage over each task
instance's two episodes (Adam, `--lr`).

Arms, the same seeds, tasks and number of episodes (2 per task instance, `--instances` instances):
- `alone`: both episodes without experience.
- `complementary`: the extractor (`ascent.agents.complementary`) writes experience from the task's past trajectories
  (`ExperienceBank`, both episodes of every instance stored); episode 1 runs with it, episode 2 without; the
  actor trains on both; the extractor's reward is success(with) - success(without).

Metrics of the final actor, exact (products of the right options' probabilities), mean over tasks: `success`
(what the arm deploys: alone without experience; complementary with the extractor's experience from its bank,
averaged over 32 draws) and `success_no_experience` (the actor's own knowledge); `train_success` is the mean
outcome of the arm's training episodes.

    python benchmarks/agent_complementary.py --seeds 10

Prints one JSON line per seed and arm, then the paired differences (complementary - alone) with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import load, paired_summary, print_machine  # noqa: E402


class Actor:
    """logits[k, o] = T[task, k, o] + a use[k, o] - b avoid[k, o]."""

    def __init__(self, tasks: int, steps: int, options: int, lr: float) -> None:
        self.table = torch.zeros(tasks, steps, options, requires_grad=True)  # (K, L, V)
        self.read = torch.zeros(2, requires_grad=True)  # (a, b)
        self.opt = torch.optim.Adam([self.table, self.read], lr=lr)
        self.steps, self.options = steps, options

    def hint_matrix(self, statements) -> torch.Tensor:
        m = torch.zeros(2, self.steps, self.options)  # (use / avoid, L, V)
        for s in statements:
            m[0 if s.use else 1, s.step, s.option] = 1.0
        return m

    def logprobs(self, task: int, hints: torch.Tensor) -> torch.Tensor:
        logits = self.table[task] + self.read[0] * hints[0] - self.read[1] * hints[1]  # (L, V)
        return torch.log_softmax(logits, -1)

    def play(self, task: int, hints: torch.Tensor, answer: torch.Tensor, gen: torch.Generator):
        with torch.no_grad():
            probs = self.logprobs(task, hints).exp()
            choice = torch.multinomial(probs, 1, generator=gen)[:, 0]  # (L,)
        return choice, float(bool((choice == answer).all()))

    def success(self, task: int, hints: torch.Tensor, answer: torch.Tensor) -> float:
        with torch.no_grad():
            lp = self.logprobs(task, hints)
            return float(lp.gather(1, answer[:, None]).sum().exp())


def run_arm(arm: str, seed: int, args) -> dict:
    from ascent.agents.complementary import ExperienceBank, ExperienceExtractor, ExtractorParams, extractor_reward
    from ascent.algorithms import ADVANTAGES, AdvantageInput
    from ascent.config.schema import AlgorithmConfig

    world = torch.Generator().manual_seed(seed)
    answers = torch.randint(args.options, (args.tasks, args.steps), generator=world)  # (K, L) hidden pipelines
    gen = torch.Generator().manual_seed(1000 + seed)
    torch.manual_seed(seed)
    actor = Actor(args.tasks, args.steps, args.options, args.lr)
    bank = ExperienceBank(keep=args.keep)
    extractor = ExperienceExtractor(ExtractorParams(num_statements=args.statements, lr=args.extractor_lr))
    adv_fn, cfg, none = ADVANTAGES.resolve("dr_grpo"), AlgorithmConfig(), actor.hint_matrix([])
    outcomes = []
    for start in range(0, args.instances, args.batch):
        tasks = torch.randint(args.tasks, (min(args.batch, args.instances - start),), generator=gen).tolist()
        episodes, ext_logp, ext_r = [], [], []  # (task, hints, choice, reward, group)
        for g, t in enumerate(tasks):
            hints = none
            if arm == "complementary":
                written, lp = extractor.write(bank.candidates(t), gen)
                hints = actor.hint_matrix(written)
            for h in (hints, none):
                choice, r = actor.play(t, h, answers[t], gen)
                episodes.append((t, h, choice, r, g))
            if arm == "complementary":
                ext_logp.append(lp)
                ext_r.append(extractor_reward(episodes[-2][3], episodes[-1][3]))
                for e in episodes[-2:]:
                    bank.add(t, e[2].tolist(), bool(e[3]))
        r = torch.tensor([e[3] for e in episodes])
        n = len(episodes)
        inp = AdvantageInput(
            r, torch.ones(n, dtype=torch.bool), torch.tensor([e[4] for e in episodes]), torch.ones(n, 1)
        )
        adv = adv_fn(inp, cfg)[:, 0]  # (2B,)
        logp = torch.stack([actor.logprobs(e[0], e[1]).gather(1, e[2][:, None]).sum() for e in episodes])
        loss = -(adv * logp).mean()
        actor.opt.zero_grad()
        loss.backward()
        actor.opt.step()
        if arm == "complementary":
            extractor.update(ext_logp, ext_r)
        outcomes += r.tolist()
    own = sum(actor.success(t, none, answers[t]) for t in range(args.tasks)) / args.tasks
    if arm == "complementary":
        draws = [[extractor.write(bank.candidates(t), gen)[0] for _ in range(32)] for t in range(args.tasks)]
        deployed = sum(
            sum(actor.success(t, actor.hint_matrix(w), answers[t]) for w in draws[t]) / 32 for t in range(args.tasks)
        )
        deployed /= args.tasks
    else:
        deployed = own
    return {
        "seed": seed,
        "arm": arm,
        "success": round(deployed, 4),
        "success_no_experience": round(own, 4),
        "train_success": round(sum(outcomes) / len(outcomes), 4),
        "episodes": len(outcomes),
        "read_use": round(float(actor.read[0]), 3),
        "read_avoid": round(float(actor.read[1]), 3),
        "extractor_weight": [round(float(x), 3) for x in extractor.weight] if arm == "complementary" else [],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed-start", type=int, default=0, help="first seed (fresh seeds for a chosen setting)")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--options", type=int, default=4)
    ap.add_argument("--instances", type=int, default=1200, help="task instances per arm (2 episodes each)")
    ap.add_argument("--batch", type=int, default=8, help="task instances per update")
    ap.add_argument("--lr", type=float, default=0.1, help="actor Adam learning rate")
    ap.add_argument("--extractor-lr", type=float, default=1.0)
    ap.add_argument("--statements", type=int, default=1, help="statements per experience")
    ap.add_argument("--keep", type=int, default=16, help="trajectories kept per task in the bank")
    ap.add_argument("--json", default="", help="write rows and summary here too")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    t0, rows = time.perf_counter(), []
    for seed in range(args.seed_start, args.seed_start + args.seeds):
        row = {arm: run_arm(arm, seed, args) for arm in ("alone", "complementary")}
        for rec in row.values():
            print(json.dumps(rec), flush=True)
        rows.append(row)
    keys = ("success", "success_no_experience", "train_success")
    summary = {
        **{k: getattr(args, k) for k in ("seeds", "seed_start", "tasks", "steps", "options", "instances", "batch")},
        "statements": args.statements,
        "extractor_lr": args.extractor_lr,
        "complementary_vs_alone": paired_summary(rows, keys, arm="complementary", control="alone"),
        "wall_s": round(time.perf_counter() - t0, 1),
        "load": load(),
    }
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
