"""Label-free rewards from agreement: `reward=peer_consensus` (majority of the group) or
`reward=peer_consensus(peers=[runs/b], k=4)` (majority of peer models' answers, the group's own optionally too).

Co-RL ("Unsupervised reasoning through cooperative multi-agent RL", code github.com/DrStranded/Co-RL) trains
several decoupled models at once, each rewarded by its peers' outputs; its single-model special case is TTRL's
majority vote (Zuo et al. 2025, "TTRL: Test-Time Reinforcement Learning", arXiv:2504.16084). For a prompt x with
the policy's group y_1..y_G and, from each peer m = 1..M, k sampled answers z_m1..z_mk:

    a(y)   = the answer of a completion (`extract`: the stripped text, or its last number)
    votes  = [a(z_mj) for every peer m and sample j]  +  [a(y_i) for i = 1..G]   (the second part: include_self)
    â      = the most frequent answer among the votes (ties: the one voted first; peers vote first)
    share  = count(â) / |votes|
    r_i    = 1[a(y_i) = â]    if share ≥ min_share and a(y_i) exists,   else 0 (no answer) / None (no majority)

No label is read: `answer` columns are ignored. What of Co-RL is here: the peer-consensus reward. The cohort's
simultaneous training is not inside one ascent run (one policy per trainer); run each member as its own
`ascent train` with the others' run directories as `peers` and `refresh_every=N`: every N calls a peer given as a
run directory is reloaded from its latest checkpoint, so the cohort co-evolves asynchronously. A peer samples its
k answers through an ascent rollout engine (one call per batch for all distinct prompts), prompts encoded as
`data.chat_template=false` does unless `chat_template=true`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rollout.types import SamplingSettings
from ascent.typed import ConfigError, build

EXTRACTORS = ("strip", "last_number")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class PeerConsensusParams:
    """The `peer_consensus` reward's knobs."""

    peers: list[str] = field(default_factory=list)
    """Peer models: run directories (latest checkpoint, else warm start), checkpoint folders or HF folders; none:
    the group's own majority (TTRL)."""
    k: int = 4
    """Answers each peer samples per prompt."""
    include_self: bool = True
    """The policy's own group votes too (with no peers it must); false is Co-RL's setting (each model is
    rewarded against its peer's majority only)."""
    extract: str = "strip"
    """How a completion's answer is read: `strip` (the whole text, stripped) or `last_number`."""
    min_share: float = 0.0
    """Below this majority share the prompt gets None (no opinion) instead of a reward."""
    refresh_every: int = 0
    """Reload each peer given as a run directory from its latest checkpoint every this many calls (0: never):
    peers that are themselves training."""
    start: Optional[str] = None
    """Model a peer starts from while its run directory has no model yet (not created, or no checkpoint and no
    warm start of its own): a cohort whose members name each other and share a warm start gives it here; the
    first refresh after the peer's first checkpoint switches to it. None: such a peer is a configuration error."""
    temperature: float = 1.0
    """Peers' sampling temperature."""
    top_p: float = 1.0
    """Peers' nucleus sampling."""
    max_new_tokens: int = 32
    """Longest peer answer (tokens)."""
    chat_template: bool = False
    """Encode prompts for the peers with their chat template (as `data.chat_template=true`)."""
    backend: str = "ascent"
    """Rollout engine the peers sample with."""
    seed: int = 0
    """Seed of the peers' sampling generator."""
    device: Optional[str] = None
    """Device of the peers; None: the learner's."""

    def __post_init__(self) -> None:
        if not self.peers and not self.include_self:
            raise ValueError("with no peers the group's own answers must vote: set include_self=true or give peers")
        if self.extract not in EXTRACTORS:
            raise ValueError(f"extract must be one of {', '.join(EXTRACTORS)}, got {self.extract!r}")
        if self.k < 1 or self.max_new_tokens < 1 or self.refresh_every < 0:
            raise ValueError("k and max_new_tokens must be >= 1, refresh_every >= 0")
        if not 0.0 <= self.min_share <= 1.0:
            raise ValueError(f"min_share must be in [0, 1], got {self.min_share}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")


def answer_of(text: str, extract: str = "strip") -> Optional[str]:
    """The answer a completion gives: its stripped text (`strip`, None when empty) or its last number.

    >>> answer_of(" 46 "), answer_of("so it is 1,200.", "last_number"), answer_of("none", "last_number")
    ('46', '1200', None)
    """
    if extract == "last_number":
        found = _NUMBER.findall(text.replace(",", ""))
        return found[-1] if found else None
    return text.strip() or None


def majority(votes: Sequence[Optional[str]]) -> tuple[Optional[str], float]:
    """(the most frequent answer, its share of all votes, unanswered ones included); ties go to the answer voted
    first; (None, 0) without any answer.

    >>> majority(["7", "8", "8", None]), majority(["7", "8"]), majority([None])
    (('8', 0.5), ('7', 0.5), (None, 0.0))
    """
    counts = Counter(v for v in votes if v is not None)
    if not counts:
        return None, 0.0
    top = max(counts.values())
    winner = next(v for v in votes if v is not None and counts[v] == top)  # first voted among the tied
    return winner, top / len(votes)


def consensus_rewards(
    answers: Sequence[Optional[str]], peer_votes: Sequence[Optional[str]], include_self: bool, min_share: float
) -> tuple[list[Optional[float]], Optional[str], float]:
    """One group's rewards r_i = 1[a_i = majority] (0 without an answer; None for all when the majority's share is
    below `min_share` or nobody answered), the majority answer and its share.

    >>> consensus_rewards(["7", "8", "8", None], [], True, 0.0)[0]
    [0.0, 1.0, 1.0, 0.0]
    >>> consensus_rewards(["7", "8"], ["7", "7", "9"], False, 0.0)
    ([1.0, 0.0], '7', 0.6666666666666666)
    """
    votes = list(peer_votes) + (list(answers) if include_self else [])
    top, share = majority(votes)
    if top is None or share < min_share:
        return [None] * len(answers), top, share
    return [float(a is not None and a == top) for a in answers], top, share


class Peer:
    """A peer model: its spec, the folder it was loaded from, the model and tokenizer."""

    def __init__(self, spec: str, device: Optional[str], start: Optional[str] = None) -> None:
        from ascent.rewards.judge import resolve_judge_model

        self.spec, self.device, self.on_start = spec, device, False
        try:
            self.folder = resolve_judge_model(spec)
        except ConfigError:
            if start is None:
                raise
            self.folder, self.on_start = resolve_judge_model(start), True  # the peer's run has no model yet
        self.load()

    def load(self) -> None:
        from ascent.rewards.judge import load_judge_model

        self.model, self.tokenizer = load_judge_model(self.folder)
        if self.device is not None:
            self.model.to(self.device)

    def refresh(self) -> bool:
        """Reload when the spec (a run directory) now points at a newer checkpoint; whether it did."""
        from ascent.rewards.judge import resolve_judge_model

        try:
            latest = resolve_judge_model(self.spec)
        except ConfigError:
            if self.on_start:  # still no model in the peer's run directory: keep the start
                return False
            raise
        if latest == self.folder:
            return False
        self.on_start = False
        device = next(self.model.parameters()).device
        self.folder = latest
        self.load()
        self.model.to(device)
        return True


@REWARDS.register(
    "peer_consensus",
    params=PeerConsensusParams,
    paper=(papers.CO_RL, papers.TTRL),
    fidelity="reduced",
    departures=(
        (
            "the peer-consensus reward and an asynchronous cohort (separate runs reloading each other's checkpoints), "
            "not a synchronous multi-policy trainer"
        ),
        (
            "the default `include_self=true` lets the policy's own group vote; Co-RL's trainer votes with the peers "
            "only (`include_self=false`)"
        ),
    ),
)
class PeerConsensus:
    """r_i = 1[answer(y_i) = majority of the votes of the prompt's group (and/or of peer models' k answers)], None
    below `min_share`: the peer reward of Co-RL (github.com/DrStranded/Co-RL), TTRL's majority vote without peers
    (Zuo et al. 2025, arXiv:2504.16084). Label-free: the row's answer is never read. See the module docstring."""

    def __init__(self, **params: Any) -> None:
        self.params = p = build(PeerConsensusParams, params, "peer_consensus")
        self.peers = [Peer(spec, p.device, p.start) for spec in p.peers]
        self.engine = None
        if self.peers:
            from ascent.rollout.backends import make_engine

            try:
                self.engine = make_engine(p.backend)
            except (ValueError, KeyError) as err:
                raise ConfigError(f"peer_consensus: backend={p.backend!r}: {err}") from None
        self.generator = torch.Generator().manual_seed(p.seed)
        self.calls, self.reloads = 0, 0
        self._metrics: dict[str, float] = {}
        self.__name__ = "peer_consensus"

    def place(self, device: str) -> None:
        """Move the peers to the learner's device, unless the spec fixed one."""
        if self.params.device is None:
            for peer in self.peers:
                peer.model.to(device)

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        """Calls, the sampling generator and the folders the peers were loaded from (exact resume)."""
        return {
            "calls": self.calls,
            "reloads": self.reloads,
            "generator": self.generator.get_state(),
            "folders": [str(peer.folder) for peer in self.peers],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from pathlib import Path

        self.calls, self.reloads = int(state["calls"]), int(state["reloads"])
        self.generator.set_state(state["generator"])
        for peer, folder in zip(self.peers, state.get("folders", [])):
            if Path(folder) != peer.folder and Path(folder).exists():
                device = next(peer.model.parameters()).device
                peer.folder = Path(folder)
                peer.load()
                peer.model.to(device)

    def __call__(self, prompts: list[str], completions: list[str], group: Optional[list[Any]] = None, **_: Any):
        p = self.params
        if p.refresh_every and self.calls and self.calls % p.refresh_every == 0:
            self.reloads += sum(peer.refresh() for peer in self.peers)
        self.calls += 1
        keys = list(group) if group is not None and all(g is not None for g in group) else list(prompts)
        members: dict[Any, list[int]] = {}
        for i, key in enumerate(keys):
            members.setdefault(key, []).append(i)
        texts = [prompts[idx[0]] for idx in members.values()]
        peer_votes = self.peer_answers(texts)  # one list of votes per group
        out: list[Optional[float]] = [None] * len(completions)
        shares, agree_peers = [], []
        for (key, idx), votes in zip(members.items(), peer_votes):
            answers = [answer_of(completions[i], p.extract) for i in idx]
            rewards, top, share = consensus_rewards(answers, votes, p.include_self, p.min_share)
            for i, r in zip(idx, rewards):
                out[i] = r
            shares.append(share)
            if votes:
                agree_peers.append(float(top is not None and top == majority(answers)[0]))
        scored = [r for r in out if r is not None]
        self._metrics = {
            "peer_consensus/majority_share": sum(shares) / max(len(shares), 1),
            "peer_consensus/agree_frac": sum(scored) / max(len(scored), 1),
            "peer_consensus/no_majority_frac": sum(r is None for r in out) / max(len(out), 1),
            "peer_consensus/reloads": float(self.reloads),
            **({"peer_consensus/self_agrees_with_peers": sum(agree_peers) / len(agree_peers)} if agree_peers else {}),
        }
        return out

    @torch.no_grad()
    def peer_answers(self, prompts: list[str]) -> list[list[Optional[str]]]:
        """For each prompt, the answers of every peer's k samples (peers in order); [] per prompt without peers."""
        votes: list[list[Optional[str]]] = [[] for _ in prompts]
        if not self.peers:
            return votes
        from ascent.data.prompts import PromptEncoder

        p = self.params
        for peer in self.peers:
            tok = peer.tokenizer
            encode = PromptEncoder(tok, p.chat_template)
            pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
            settings = SamplingSettings(p.max_new_tokens, int(tok.eos_token_id), int(pad), p.temperature, p.top_p)
            gen = self.engine.generate(peer.model, [encode(x) for x in prompts], p.k, settings, self.generator)
            for row in range(len(prompts) * p.k):  # prompt-major: prompt row // k
                tokens = gen.tokens[row, : int(gen.lengths[row])].tolist()
                votes[row // p.k].append(answer_of(tok.decode(tokens, skip_special_tokens=True), p.extract))
        return votes
