"""IIB-LPO's branching at high-entropy states with an Information-Bottleneck filter and self-reward (`iib`).

IIB-LPO (Latent Policy Optimization via Iterative Information Bottleneck; Deng, Luo, Zhu, Li, Chen, Zhao, Li,
Zhang, Wang, Cao & Kang, 2026, arXiv:2601.05870, ACL 2026) branches rollouts at high-entropy states to diversify
the reasoning paths, and uses the Information Bottleneck (IB) principle twice: to filter trajectories and as a
self-reward that favours concise but informative ones. The explorer reuses `branch` (Spark's explorer: roots,
then branches continuing each root's prefix) and changes where a root branches, what a scored round becomes
(`amend`) and, with `latent_dim` > 0, how a branch is sampled: each branch draws a latent code z ~ N(0, I_d) that
conditions the policy for its whole continuation (`latent_sample`, the paper's latent branching, reduced).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent import papers
from ascent.policy.model import token_logprobs
from ascent.rollout.explorers import (
    EXPLORERS,
    BranchExplorer,
    BranchParams,
    ExplorerContext,
    Piece,
    Request,
    prompt_length,
)
from ascent.rollout.types import RolloutBatch, SamplingSettings


@dataclass(frozen=True)
class IibParams(BranchParams):
    """IIB-LPO: branch at the root's highest-entropy state; IB filter and self-reward on the scored round."""

    reward_coef: float = 0.2
    """lambda of the IB self-reward lambda * 1[r >= threshold] * (1 - S / max_g S) (0: off); >= 0."""
    threshold: float = 1.0
    """A completion is informative (it reached the answer) when its reward is >= this."""
    filter: bool = True
    """Drop from the loss each branch whose completion repeats its group's earlier ones (zero new information)."""
    latent_dim: int = 0
    """Latent branching: each branch draws z ~ N(0, I_latent_dim), injected into every input embedding of its
    forward passes as latent_scale · RMS(E) · z P / sqrt(latent_dim) (P fixed, seeded); 0: token branching."""
    latent_scale: float = 0.5
    """Size of the injected latent relative to the RMS of the embedding matrix E; > 0."""
    latent_seed: int = 0
    """Seed of the fixed projection P (latent_dim x hidden)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reward_coef < 0:
            raise ValueError(f"reward_coef must be >= 0, got {self.reward_coef}")
        if self.latent_dim < 0 or not self.latent_scale > 0:
            raise ValueError(
                f"latent_dim must be >= 0 and latent_scale > 0; got {self.latent_dim}, {self.latent_scale}"
            )


def latent_offsets(embed: torch.Tensor, z: torch.Tensor, scale: float, seed: int) -> torch.Tensor:
    """(B, H) embedding offsets of latent codes z (B, d): scale · RMS(E) · z P / sqrt(d), P ~ N(0, 1)^(d x H)
    drawn from `seed` (the same P for every call), E the (V, H) input-embedding matrix. Each offset's expected
    squared norm per coordinate is (scale · RMS(E))^2.

    >>> e = torch.ones(5, 4)
    >>> zero, one = latent_offsets(e, torch.zeros(2, 3), 0.5, 0), latent_offsets(e, torch.ones(1, 3), 0.5, 0)
    >>> zero.abs().sum().item(), one.shape
    (0.0, torch.Size([1, 4]))
    """
    d = z.shape[1]
    proj = torch.randn((d, embed.shape[1]), generator=torch.Generator().manual_seed(seed))
    rms = float(embed.detach().float().pow(2).mean().sqrt())
    return scale * rms * (z.float() @ proj) / d**0.5


@torch.no_grad()
def latent_sample(
    model: torch.nn.Module,
    prompts: list[list[int]],
    offsets: torch.Tensor,
    s: SamplingSettings,
    budgets: list[int],
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample one continuation of each prompt from the latent-conditioned policy π(y | x, z): every input
    embedding of row b (prompt and sampled tokens) gets `offsets[b]` added before the transformer. Full forward
    per step (no KV cache: a toy-scale sampler), temperature `s.temperature` (0: greedy), `s.top_k`, nucleus
    `s.top_p`, at most `budgets[b]` tokens. Returns (tokens (B, L), their log-probs under π(· | x, z) at the sampling
    temperature (B, L), lengths (B,) with EOS counted, finished (B,))."""
    dev = next(model.parameters()).device
    emb = model.get_input_embeddings()
    rows = [list(p) for p in prompts]
    n, width = len(rows), max(budgets) if budgets else 0
    tokens = torch.full((n, max(width, 1)), s.pad_id, dtype=torch.long)
    logps = torch.zeros((n, max(width, 1)))
    lengths = torch.zeros(n, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    finished = torch.zeros(n, dtype=torch.bool)
    off = offsets.to(dev, torch.float32)
    for t in range(width):
        live = [b for b in range(n) if not done[b] and t < budgets[b]]
        if not live:
            break
        w = max(len(rows[b]) for b in live)
        ids = torch.full((len(live), w), s.pad_id, dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, b in enumerate(live):  # left padding: the last column is every row's next-token position
            ids[i, w - len(rows[b]) :], att[i, w - len(rows[b]) :] = torch.tensor(rows[b]), 1
        ids, att = ids.to(dev), att.to(dev)
        x = emb(ids).float() + off[live].unsqueeze(1)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        logits = model(inputs_embeds=x.to(emb.weight.dtype), attention_mask=att, position_ids=pos).logits[:, -1]
        logp = torch.log_softmax(logits.float().cpu() / (s.temperature or 1.0), dim=-1)
        if s.temperature == 0:
            pick = logp.argmax(-1)
        else:
            probs = logp.exp()
            if s.top_k > 0:
                kth = probs.topk(min(s.top_k, probs.shape[-1]), dim=-1).values[:, -1:]
                probs = probs * (probs >= kth)
            if s.top_p < 1.0:
                sp, si = probs.sort(-1, descending=True)
                keep = sp.cumsum(-1) - sp < s.top_p
                probs = torch.zeros_like(probs).scatter(-1, si, sp * keep)
            pick = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        for i, b in enumerate(live):
            tok = int(pick[i])
            tokens[b, t], logps[b, t] = tok, float(logp[i, tok])
            lengths[b] = t + 1
            rows[b].append(tok)
            if tok == s.eos_id and not s.ignore_eos:
                done[b] = finished[b] = True
    return tokens, logps, lengths, finished


def entropy_branch_point(entropy: torch.Tensor, length: int, min_prefix: int) -> int:
    """Forced prefix length of a root of `length` tokens whose choices had entropies `entropy` (L,): the position
    of its highest-entropy choice, the last token excluded (the first such on ties), moved up to `min_prefix` and
    never past length − 1; 0 for a one-token root.

    >>> h = torch.tensor([0.1, 2.0, 0.5, 9.0])
    >>> entropy_branch_point(h, 4, 1), entropy_branch_point(h, 4, 3), entropy_branch_point(h, 1, 1)
    (1, 3, 0)
    """
    if length < 2:
        return 0
    return min(max(int(torch.argmax(entropy[: length - 1])), min_prefix), length - 1)


@torch.no_grad()
def choice_entropies(ctx: ExplorerContext, prompts: list[list[int]], completions: list[list[int]]) -> torch.Tensor:
    """(n, L) entropy H_t = −Σ_v π(v) log π(v) of the policy (at the sampling temperature) at the choice of each
    completion token t (0 past a completion's end), one forward over prompt + completion."""
    width = max(len(p) + len(c) for p, c in zip(prompts, completions))
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        ids[i, : len(p) + len(c)], att[i, : len(p) + len(c)] = torch.tensor(p + c), 1
    model = ctx.policy.model
    dev = next(model.parameters()).device
    logits = model(input_ids=ids.to(dev), attention_mask=att.to(dev), use_cache=False).logits.float().cpu()
    logp = torch.log_softmax(logits / (ctx.settings.temperature or 1.0), dim=-1)  # (n, W, V)
    ent = -(logp.exp() * logp.clamp(min=-1e4)).sum(-1)  # (n, W): position s chooses token s + 1
    out = torch.zeros((len(prompts), max(len(c) for c in completions)))
    for i, (p, c) in enumerate(zip(prompts, completions)):
        out[i, : len(c)] = ent[i, len(p) - 1 : len(p) - 1 + len(c)]
    return out


@torch.no_grad()
def completion_surprisal(ctx: ExplorerContext, batch: RolloutBatch) -> torch.Tensor:
    """(N,) S_i = −Σ_t log π(y_t | x, y_<t) over each whole completion (forced prefix included), under the policy
    at the sampling temperature: the completion's description length in nats."""
    model = ctx.policy.model
    dev = next(model.parameters()).device
    lp = token_logprobs(model, batch.input_ids.to(dev), batch.attention_mask.to(dev), ctx.settings.temperature or 1.0)
    lp = lp.float().cpu()  # (N, T)
    out = torch.zeros(len(batch))
    for i in range(len(batch)):
        start, end = prompt_length(ctx, batch, i), int(batch.attention_mask[i].sum())
        out[i] = -lp[i, start:end].sum()
    return out


def ib_self_reward(
    rewards: torch.Tensor, valid: torch.Tensor, surprisal: torch.Tensor, group_index: torch.Tensor, p: IibParams
) -> torch.Tensor:
    """(N,) the IB self-reward b_i = lambda * 1[r_i >= threshold] * (1 − S_i / max_{j in g, valid} S_j): among
    a group's informative completions (they reach the answer), the more compressed (lower S) earn more; 0 for
    invalid or uninformative ones.

    >>> r, v = torch.tensor([1.0, 1.0, 0.0]), torch.ones(3, dtype=torch.bool)
    >>> ib_self_reward(r, v, torch.tensor([2.0, 4.0, 1.0]), torch.zeros(3, dtype=torch.long), IibParams()).tolist()
    [0.10000000149011612, 0.0, 0.0]
    """
    out = torch.zeros_like(rewards)
    for g in group_index.unique().tolist():
        rows = (group_index == g) & valid
        if not rows.any():
            continue
        top = float(surprisal[rows].max())
        if top <= 0:
            continue
        good = rows & (torch.nan_to_num(rewards, nan=-float("inf")) >= p.threshold)
        out[good] = p.reward_coef * (1.0 - surprisal[good] / top)
    return out


def redundant_branches(batch: RolloutBatch, ctx: ExplorerContext) -> torch.Tensor:
    """(N,) bool: sequences with a forced prefix (branches) whose completion equals an earlier sequence's of the
    same group (in batch order, a root before its branches)."""
    seen: dict[int, set[tuple[int, ...]]] = {}
    out = torch.zeros(len(batch), dtype=torch.bool)
    for i in range(len(batch)):
        start, end = prompt_length(ctx, batch, i), int(batch.attention_mask[i].sum())
        tokens = tuple(batch.input_ids[i, start:end].tolist())
        group = seen.setdefault(int(batch.group_index[i]), set())
        branch = end > start and not bool(batch.completion_mask[i, start] > 0)
        out[i] = branch and tokens in group
        group.add(tokens)
    return out


@EXPLORERS.register(
    "iib",
    params=IibParams,
    paper=papers.IIB_LPO,
    fidelity="reduced",
    departures=(
        (
            "latent branching (latent_dim > 0) injects z ~ N(0, I) through a fixed random projection into the input "
            "embeddings of each branch (the paper: a trained CVAE's codes through pseudo self-attention in every "
            "layer); the learner's log-probs are the unconditioned policy's (pair with algorithm.tis_cap); "
            "latent_dim = 0 (the default) resamples tokens from the highest-entropy position without a latent"
        ),
        (
            "the IB filter is an exact-duplicate filter and the IB self-reward a verifier-gated description-length "
            "bonus: ascent's readings"
        ),
    ),
)
class IibExplorer(BranchExplorer):
    """IIB-LPO (Deng et al. 2026, arXiv:2601.05870): branch at high-entropy states; IB filter and self-reward.

    Sampling is `branch`'s (r = max(1, round(root_share · n)) roots, the n − r branches round-robin over them,
    each continuing its root's tokens before the critical position, forced with mask 0) with one change: the
    critical position of a root is its highest-entropy choice, argmax_t H_t, H_t = −Σ_v π(v | x, y_<t) log π(v |
    x, y_<t) under the current policy at the sampling temperature (one no-grad forward over the roots; `branch`
    uses the lowest sampled log-prob, which needs none), moved up to `min_prefix` (last token excluded).
    On the scored round (`amend`):
    - IB filter: a branch that reproduces a completion its group already holds carries no new information
      about the answer and leaves the loss (valid False; `filter`).
    - IB self-reward: r_i <- r_i + lambda * 1[r_i >= threshold] * (1 − S_i / max_g S), S_i = −Σ_t log π(y_t)
      the completion's description length under the policy (the compression term I(X; Z) of the IB objective
      max I(Z; Y) − β I(X; Z)); the informativeness term I(Z; Y) is read as reaching the answer (the verifier).
      Concise, informative completions earn up to lambda more than verbose ones; wrong ones get nothing.
    Latent branching (`latent_dim` > 0): each branch sample draws its own z ~ N(0, I_d) and is sampled from
    π(· | x, z), the policy with latent_scale · RMS(E) · z P / sqrt(d) added to every input embedding of the
    sequence (`latent_offsets`, `latent_sample`; P a fixed seeded projection), so the branches of one root differ
    in a whole-continuation direction rather than in one resampled token. Their `sampled_logprobs` are π(· | x, z)'s:
    the learner scores them under π(· | x), so pair it with `algorithm.tis_cap` as for `param_noise`.
    What still differs from the paper: its latent codes come from a trained CVAE (prior network on the prefix,
    posterior on the whole trajectory) and enter every layer by pseudo self-attention, and its IB terms are
    estimated from those latents; here z comes from the untrained prior N(0, I) through a fixed projection into the
    embeddings, and the IB terms use the verifier and the policy's log-probs. The iteration of the IB (the
    "iterative" of the name) is the per-round amend.
    Logged: `explore/branches`, `branch_point_mean` (from `branch`), `iib_filtered`, `iib_bonus_mean`,
    `latent_norm_mean` (the injected offsets' mean norm).
    """

    def __init__(self, ctx: ExplorerContext, params: IibParams = IibParams()) -> None:
        super().__init__(ctx, params)

    def branch_points(self, prompt_ids: list[list[int]], root_pieces: list[Piece]) -> list[list[int]]:
        prompts, comps = [], []
        for p, (tokens, _, lengths, _) in zip(prompt_ids, root_pieces):
            for j in range(len(lengths)):
                prompts.append(p)
                comps.append(tokens[j, : int(lengths[j])].tolist() or [0])
        ent = choice_entropies(self.ctx, prompts, comps)  # (roots, L)
        out, k = [], 0
        for _, _, lengths, _ in root_pieces:
            row = []
            for j in range(len(lengths)):
                row.append(entropy_branch_point(ent[k], int(lengths[j]), self.params.min_prefix))
                k += 1
            out.append(row)
        return out

    def sample_branches(
        self, branches: list[Request], branch_ids: list[list[int]], generator: torch.Generator
    ) -> list[Piece]:
        p = self.params
        if p.latent_dim == 0:
            return super().sample_branches(branches, branch_ids, generator)
        ctx = self.ctx
        model = ctx.policy.model
        model.eval()
        prompts, budgets, owner = [], [], []
        for i, (b, ids) in enumerate(zip(branches, branch_ids)):
            for _ in range(b.n):
                prompts.append(ids + b.prefix)
                budgets.append(ctx.settings.max_new_tokens - len(b.prefix))
                owner.append(i)
        z = torch.randn((len(prompts), p.latent_dim), generator=generator)
        offsets = latent_offsets(model.get_input_embeddings().weight, z, p.latent_scale, p.latent_seed)
        tokens, logps, lengths, finished = latent_sample(model, prompts, offsets, ctx.settings, budgets, generator)
        self.last["latent_norm_mean"] = float(offsets.norm(dim=-1).mean())
        self.last_offsets = offsets  # (branch samples, H), in branch order (for diagnostics and tests)
        pieces: list[Piece] = []
        for i in range(len(branches)):
            rows = [r for r, o in enumerate(owner) if o == i]
            pieces.append((tokens[rows], logps[rows], lengths[rows], finished[rows]))
        return pieces

    def amend(
        self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor, components: torch.Tensor
    ) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
        p = self.params
        valid = valid.clone()
        if p.filter:
            drop = redundant_branches(batch, self.ctx)
            valid &= ~drop
            self.last["iib_filtered"] = float(drop.sum())
        if p.reward_coef > 0:
            bonus = ib_self_reward(rewards, valid, completion_surprisal(self.ctx, batch), batch.group_index, p)
            rewards = rewards + bonus
            self.last["iib_bonus_mean"] = float(bonus[valid].mean()) if valid.any() else 0.0
        return batch, rewards, valid, components
