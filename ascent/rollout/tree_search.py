"""MCTS-staged GRPO (`mcts`): a small search tree per prompt, then a group staged along its best path.

Tree-OPO (Huang, Nguyen & Zimmer, 2025, arXiv:2509.09284) derives GRPO completions from partially revealed
MCTS rollouts: a trajectory found by tree search is cut after k of its steps, and the policy completes each such
prefix, which gives prefix-conditioned rewards and a tree-structured group; its Staged Advantage Estimation
(`algorithm.advantage=staged`, ascent/algorithms/staged.py) baselines each sample by its prefix. This explorer
runs the search itself, per round, with the current policy and the run's verifier (the paper's MCTS is run
offline by a teacher), reusing the prefix machinery of `ascent.rollout.explorers`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ascent import papers
from ascent.algorithms.staged import STAGE_KEY
from ascent.data.samplers import Draw
from ascent.rollout.explorers import (
    EXPLORERS,
    Explorer,
    ExplorerContext,
    Request,
    assemble_with_prefix,
    group_sizes,
    sample_pieces,
)
from ascent.rollout.types import RolloutBatch


@dataclass(frozen=True)
class MctsParams:
    """The search budget and the staging of the group."""

    simulations: int = 4
    """Search rollouts per prompt (each: select a node by UCT, sample one completion from it, score it); >= 1.
    They are extra samples that never enter the loss."""
    chunk: int = 2
    """Tokens per tree edge (a search step); >= 1."""
    c_uct: float = 1.0
    """Exploration constant c of UCT, Q + c sqrt(ln N_parent / N_child); >= 0."""
    max_children: int = 2
    """Progressive widening: a node gets a new child (a fresh sample) while it has fewer children than this; >= 1.
    With the defaults (4 simulations, 2 children, 2-token edges) the tree is at most 2 edges deep, so revealed
    prefixes are 0, 2 or 4 tokens, where Tree-OPO reveals whole reasoning steps: raise `chunk` and
    `simulations` with `max_new_tokens` for deeper staging."""

    def __post_init__(self) -> None:
        if self.simulations < 1 or self.chunk < 1 or self.max_children < 1:
            raise ValueError(
                f"simulations, chunk and max_children must be >= 1, got {self.simulations}, {self.chunk}, "
                f"{self.max_children}"
            )
        if self.c_uct < 0:
            raise ValueError(f"c_uct must be >= 0, got {self.c_uct}")


@dataclass
class Node:
    """A tree node: the completion tokens forced so far, its children, and the rewards backed up through it."""

    prefix: list[int]
    terminal: bool = False
    """The prefix is a whole completion (it ended, or no token is left to sample): it is never expanded."""
    visits: int = 0
    value: float = 0.0
    """Sum of the rewards backed up through the node."""
    children: list["Node"] = field(default_factory=list)

    @property
    def q(self) -> float:
        return self.value / self.visits if self.visits else 0.0


def uct(child: Node, parent_visits: int, c: float) -> float:
    """Q + c sqrt(ln N_parent / N_child); an unvisited child first.

    >>> round(uct(Node([1], visits=2, value=1.0), 8, 1.0), 4)  # 0.5 + sqrt(ln 8 / 2)
    1.5197
    """
    if child.visits == 0:
        return math.inf
    return child.q + c * math.sqrt(math.log(max(parent_visits, 1)) / child.visits)


def select(root: Node, p: MctsParams) -> list[Node]:
    """The path root → the node to expand: descend by UCT (first on ties) while the node is full (max_children) or
    terminal and has children; a terminal leaf ends the path too."""
    path = [root]
    node = root
    while node.children and (node.terminal or len(node.children) >= p.max_children):
        node = max(node.children, key=lambda ch: uct(ch, node.visits, p.c_uct))
        path.append(node)
    return path


def expand(path: list[Node], continuation: list[int], finished: bool, reward: float, p: MctsParams, room: int):
    """Add the search step `continuation` (sampled from the path's last node) as a child (or reuse the child with the
    same first chunk), then back the reward up the path. `room`: max_new_tokens."""
    leaf = path[-1]
    if not leaf.terminal and continuation:
        step = continuation[: p.chunk]
        prefix = leaf.prefix + step
        whole = len(continuation) <= p.chunk
        child = next((c for c in leaf.children if c.prefix == prefix), None)
        if child is None:
            child = Node(prefix, terminal=(whole and finished) or len(prefix) >= room - 1)
            leaf.children.append(child)
        path = path + [child]
    for node in path:
        node.visits += 1
        node.value += reward


def best_path(root: Node) -> list[Node]:
    """Root → leaf by the child of highest (Q, visits), the first on ties."""
    path = [root]
    while path[-1].children:
        path.append(max(path[-1].children, key=lambda c: (c.q, c.visits)))
    return path


def stage_requests(group: int, row: int, path: list[Node], n: int) -> list[Request]:
    """The group's n samples spread round-robin over the revealed depths 0..D of `path` (its non-terminal nodes:
    a stage-d sample continues the path's first d chunks), depth 0 first; requests of equal depth merged.

    >>> path = [Node([]), Node([1, 2]), Node([1, 2, 3, 4]), Node([1, 2, 3, 4, 5], terminal=True)]
    >>> [(len(r.prefix), r.n) for r in stage_requests(0, 7, path, 8)]
    [(0, 3), (2, 3), (4, 2)]
    """
    stages = [node for node in path if not node.terminal]
    counts = [n // len(stages) + (d < n % len(stages)) for d in range(len(stages))]
    return [Request(group, row, list(node.prefix), k) for node, k in zip(stages, counts) if k]


@EXPLORERS.register(
    "mcts",
    params=MctsParams,
    paper=papers.TREE_OPO,
    fidelity="reduced",
    departures=(
        "the current policy searches online with the verifier as value, not a teacher's offline MCTS",
        (
            "with the defaults (4 simulations, 2-token chunks) the revealed prefixes are at most a few tokens, not "
            "whole reasoning steps"
        ),
    ),
)
class MctsExplorer(Explorer):
    """MCTS-staged GRPO (Tree-OPO, Huang, Nguyen & Zimmer 2025, arXiv:2509.09284), searched online.

    Per drawn prompt a tree over completion prefixes, edges of `chunk` tokens: `simulations` waves, each (for all
    prompts together, one engine call) selects a node by UCT, Q(child) + c sqrt(ln N(parent) / N(child)) with
    progressive widening (a node with fewer than `max_children` children is expanded), samples one completion from
    it on-policy, scores it with the run's rewards (ctx.scorer), adds its first chunk as a child and backs the
    reward up the path. The group's n completions then start from the partially revealed best path (root → leaf by
    highest mean reward Q, then visits): round-robin over its depths d = 0..D, a stage-d sample forced through the
    path's first d chunks (`completion_mask` 0, `sampled_logprobs` 0: not the policy's choice in this sample) and
    sampled on-policy after them. Each sample's depth goes to `extras["stage"]` for the staged advantage
    (`algorithm.advantage=staged`): deeper prefixes of a good path are easier (the paper's reverse curriculum).

    Choices: the paper's MCTS is a teacher's, offline; here the search is the current policy's, each round, with
    the verifier as the value of a rollout (no value model), so its cost is `simulations` extra samples per prompt
    that do not enter the loss. Search samples are not reused as group members (they would bias the group towards
    the search's selection). Needs a scorer (the trainer passes the run's rewards; with none it raises); a reward
    that learns from what it scores (`rm_online`) sees the search rollouts too.
    Logged: `explore/mcts_depth_mean` (revealed chunks of a sample, mean), `mcts_search_reward` (mean reward of the
    search rollouts), `mcts_path_q` (mean Q of the chosen leaves).
    """

    def __init__(self, ctx: ExplorerContext, params: MctsParams = MctsParams()) -> None:
        self.ctx, self.params = ctx, params
        self.rounds = 0
        self.last: dict[str, float] = {}

    def search(self, draw: Draw, generator: torch.Generator) -> list[Node]:
        """One tree per drawn prompt after `simulations` waves."""
        ctx, p = self.ctx, self.params
        if getattr(ctx, "scorer", None) is None:
            raise ValueError("rollout.explorer=mcts needs ExplorerContext.scorer (the run's rewards) to search")
        room = ctx.settings.max_new_tokens
        roots = [Node([], terminal=room < 2) for _ in draw.indices]
        total, count = 0.0, 0
        for _ in range(p.simulations):
            paths = [select(root, p) for root in roots]
            for path in paths:
                if path[-1].terminal:  # a finished completion: its known value is backed up again, no sample
                    expand(path, [], True, path[-1].q, p, room)
            open_ = [g for g, path in enumerate(paths) if not path[-1].terminal]
            if not open_:
                continue
            requests = [Request(g, draw.indices[g], list(paths[g][-1].prefix), 1) for g in open_]
            prompt_ids = [ctx.encoder(ctx.rows[r.row]["prompt"]) for r in requests]
            pieces = sample_pieces(ctx, requests, prompt_ids, generator)
            batch = assemble_with_prefix(ctx, requests, prompt_ids, pieces)
            scores = ctx.scorer(batch.prompts, batch.completions, batch.reward_fields())
            rewards = torch.where(scores.valid, torch.nan_to_num(scores.rewards), torch.zeros_like(scores.rewards))
            for k, (g, (tokens, _, lengths, finished)) in enumerate(zip(open_, pieces)):
                continuation = tokens[0, : int(lengths[0])].tolist()
                expand(paths[g], continuation, bool(finished[0]), float(rewards[k]), p, room)
            total, count = total + float(rewards.sum()), count + len(requests)
        self.last = {"mcts_search_reward": total / max(count, 1)}
        return roots

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        self.rounds += 1
        ctx = self.ctx
        roots = self.search(draw, generator)
        requests: list[Request] = []
        depth: list[int] = []  # (N,) each sample's revealed depth on its path
        q = []
        for g, (row, n, root) in enumerate(zip(draw.indices, group_sizes(draw, ctx.samples_per_prompt), roots)):
            path = best_path(root)
            level = {len(node.prefix): d for d, node in enumerate(path)}  # prefix lengths grow along a path
            staged = stage_requests(g, row, path, n)
            requests += staged
            depth += [level[len(r.prefix)] for r in staged for _ in range(r.n)]
            q.append(path[-1].q)
        prompt_ids = [ctx.encoder(ctx.rows[r.row]["prompt"]) for r in requests]
        batch = assemble_with_prefix(ctx, requests, prompt_ids, sample_pieces(ctx, requests, prompt_ids, generator))
        batch.extras[STAGE_KEY] = torch.tensor(depth, dtype=torch.long)  # (N,)
        self.last.update(mcts_depth_mean=sum(depth) / max(len(depth), 1), mcts_path_q=sum(q) / max(len(q), 1))
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "last": dict(self.last)}

    def load_state_dict(self, state: Optional[dict[str, Any]]) -> None:
        if state:
            self.rounds, self.last = state["rounds"], dict(state["last"])
