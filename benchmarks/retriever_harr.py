"""The retriever as a policy (HARR, Zhang et al. 2026, arXiv:2602.03645) against the fixed BM25 top-k on the
two-hop search world, with a fixed scripted generator (a retriever-only learning experiment, HARR's own setting:
the LLM is frozen, the retriever learns).

    python benchmarks/retriever_harr.py --seeds 5 --steps 30 --prompts 8 --samples 8 --eval 200

The generator is an iterative RAG pipeline: it searches the question's text `--rounds` times (the same query each
round: the state aliasing HARR names), then reads; with `--pipeline entity` each search is instead the name of the
next entity on the question's path as far as the retrieved documents tell (a sub-query a good generator writes).
The reader follows the question's path (its named entity and relations, both stated by the question) through the
documents the episode retrieved, reading each one's facts; when a document of the path is missing it answers
"unknown". So an episode is right exactly when the retrievals covered the evidence. Reward: answer exact match.
Per seed s, on the same training and held-out questions (worlds disjoint) of seed s:

- `bm25`: the fixed top-k (`retriever=bm25`);
- `pl_init`: the untrained Plackett-Luce retriever, greedy (its top-k is BM25's ranking, ties aside);
- `pl`: `retriever=plackett_luce` trained for `--steps` steps of `--prompts` questions x `--samples` episodes with
  GRPO advantages (the registered `grpo` estimator) by `RetrieverTrainer.step`, the update the RL trainer calls;
  evaluated greedily;
- `pl_query`: the same with query-only features (`plackett_luce(history=false)`): the aliased state.

Prints a JSON line per seed and the paired differences pl - bm25 and pl - pl_query (held-out accuracy) with 95%
t-intervals over seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.algorithms import ADVANTAGES, AdvantageInput  # noqa: E402
from ascent.config.schema import AlgorithmConfig  # noqa: E402
from ascent.envs.retriever import RetrieverTrainer  # noqa: E402
from ascent.envs.search_world import _call  # noqa: E402
from ascent.tasks.search_world import SearchWorldParams, SearchWorlds  # noqa: E402
from benchmarks.common import ci95, load  # noqa: E402

ARMS = ("bm25", "pl_init", "pl", "pl_query")


def read(world, row: dict, seen: set[str]) -> str:
    """The answer the documents in `seen` give by following the question's path, or "unknown"."""
    current = row["subject"]
    for step in row["path"]:
        if current not in seen:
            return "unknown"
        entity = world.entities[current]
        if step in entity.attributes:
            return entity.attributes[step]
        current = entity.relations[step]
    return world.entities[current].name


def frontier(world, row: dict, seen: set[str]) -> str:
    """The name of the first entity on the question's path whose document is not in `seen` (the next hop to look
    up, as read from the documents so far), or the question itself when the path is complete."""
    current = row["subject"]
    for step in row["path"]:
        if current not in seen:
            return world.entities[current].name
        entity = world.entities[current]
        if step in entity.attributes:
            break
        current = entity.relations[step]
    return row["prompt"]


def episode(worlds: SearchWorlds, row: dict, rounds: int, pipeline: str = "question") -> tuple[float, list[dict]]:
    """One scripted episode: (reward, the sampled lists recorded in its steps' infos). pipeline `question`: every
    search is the question's text; `entity`: the name of the next entity to look up (a sub-query)."""
    env = worlds.make_env()
    task = worlds.env_task(row)
    env.reset(task)
    infos = []
    for _ in range(rounds):
        seen = set(env.retrieved) | set(env.opened)
        query = row["prompt"] if pipeline == "question" else frontier(task.world, row, seen)
        infos.append(env.step(_call("search", query=query)).info)
    answer = read(task.world, row, set(env.retrieved) | set(env.opened))
    final = env.step(f"<answer>{answer}</answer>")
    return final.reward, [r for info in infos for r in info.get("retrievals", [])]


def accuracy(worlds: SearchWorlds, rows: list[dict], a: argparse.Namespace) -> float:
    return statistics.mean(episode(worlds, r, a.rounds, a.pipeline)[0] for r in rows)


def train(worlds: SearchWorlds, rows: list[dict], a: argparse.Namespace, seed: int) -> dict[str, float]:
    """`a.steps` GRPO steps of the worlds' retriever on `rows`; returns the last step's metrics."""
    (trainer,) = worlds.companions
    assert isinstance(trainer, RetrieverTrainer)
    grpo, cfg = ADVANTAGES.resolve("grpo"), AlgorithmConfig()
    g = torch.Generator().manual_seed(seed)
    metrics: dict[str, float] = {}
    for _ in range(a.steps):
        picks = torch.randint(len(rows), (a.prompts,), generator=g).tolist()
        trainer.train(True)
        eps = [episode(worlds, rows[i], a.rounds, a.pipeline) for i in picks for _ in range(a.samples)]
        trainer.train(False)
        rewards = torch.tensor([r for r, _ in eps])  # (N,)
        group = torch.arange(a.prompts).repeat_interleave(a.samples)
        valid = torch.ones(len(eps), dtype=torch.bool)
        adv = grpo(AdvantageInput(rewards, valid, group, torch.ones(len(eps), 1)), cfg)[:, 0]  # (N,)
        metrics = {**trainer.step([recs for _, recs in eps], adv, valid), "train_reward": float(rewards.mean())}
    return metrics


def params(a: argparse.Namespace, retriever: str) -> SearchWorldParams:
    return SearchWorldParams(hops=[2], top_k=a.top_k, snippet_chars=200, questions_per_world=4, retriever=retriever)


def run_seed(seed: int, a: argparse.Namespace) -> dict:
    base = seed * 10_000_000
    taken: set[str] = set()
    worlds = SearchWorlds(params(a, "bm25"), seed)
    held_out = worlds.rows(a.eval, range(base + 5_000_000, base + 10_000_000), taken)
    train_rows = worlds.rows(a.train, range(base, base + 5_000_000), taken)
    out: dict = {"seed": seed, "bm25": accuracy(worlds, held_out, a)}
    for arm, spec in (("pl", f"plackett_luce(lr={a.lr})"), ("pl_query", f"plackett_luce(lr={a.lr}, history=false)")):
        pl = SearchWorlds(params(a, spec), seed)
        pl.worlds = worlds.worlds  # the same worlds (built once)
        if arm == "pl":
            out["pl_init"] = accuracy(pl, held_out, a)
        t0 = time.perf_counter()
        m = train(pl, train_rows, a, seed)
        out[arm] = accuracy(pl, held_out, a)
        out[f"{arm}_train_s"] = round(time.perf_counter() - t0, 1)
        out[f"{arm}_weights"] = {k[len("retriever/w_") :]: round(v, 3) for k, v in m.items() if "/w_" in k}
        out[f"{arm}_last_train_reward"] = round(m["train_reward"], 4)
    return out


def summarise(rows: list[dict]) -> dict:
    summary: dict = {arm: round(statistics.mean(r[arm] for r in rows), 4) for arm in ARMS}
    for other in ("bm25", "pl_query", "pl_init"):
        d = [r["pl"] - r[other] for r in rows]
        summary[f"pl - {other}"] = {
            "mean": round(statistics.mean(d), 4),
            "sd": round(statistics.stdev(d), 4) if len(d) > 1 else 0.0,
            "ci95": ci95(d),
        }
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="training steps of each trained retriever")
    p.add_argument("--prompts", type=int, default=8, help="questions per step")
    p.add_argument("--samples", type=int, default=8, help="episodes per question (the GRPO group)")
    p.add_argument("--train", type=int, default=400, help="training questions")
    p.add_argument("--eval", type=int, default=200, help="held-out questions (worlds disjoint from training)")
    p.add_argument("--top-k", type=int, default=2, help="documents per search")
    p.add_argument("--rounds", type=int, default=2, help="searches per episode (the question's text each time)")
    p.add_argument(
        "--pipeline",
        choices=("question", "entity"),
        default="question",
        help="question: every search is the question's text; entity: the next entity's name, read so far",
    )
    p.add_argument("--lr", type=float, default=0.1, help="the retriever's Adam learning rate")
    a = p.parse_args()
    torch.set_num_threads(1)
    print(json.dumps({"args": vars(a), "load": load()}), flush=True)
    rows = []
    for seed in range(a.seeds):
        rows.append(run_seed(seed, a))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"summary": summarise(rows), "load_after": load()}), flush=True)


if __name__ == "__main__":
    main()
