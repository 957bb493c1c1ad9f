"""Turn-level advantage estimators for multi-turn agents: `tree` (TreeOPSD), `progress` (SPA),
`turn_feedback` (ascent's own) and `explore_group` (Exploration-Aware PO); the papers are in
docs/references.md. Same ONE signature as every estimator: `fn(inp, cfg[, params]) -> (N, T)`; each
estimator's knobs are its frozen params dataclass (`TreeParams`, `ProgressParams`, `TurnFeedbackParams`,
`ExploreGroupParams`), set in its spec, e.g. `turn_feedback(strength=0.3)`. SERL's hindsight teacher is
`serl` (ascent.algorithms.hindsight).

For agent batches the trainer fills `inp.extras` with (M = the most model turns of any trajectory):

- `turn_index` (N, T) long: the 0-based model turn each sampled token belongs to, -1 elsewhere;
- `turn_rewards` (N, M) float: the environment's reward for each turn, NaN where there is no such turn
  (all NaN when the environment gives no step rewards);
- `turn_kind` (N, M) long: 1 = exploratory action (a tool call: search / open), 0 = task action (final
  answer, environment action), -1 = no turn;
- `turn_prefix` (N, M) long: a hash of the trajectory's ids up to the end of turn t (equal value = identical
  history), -1 = no turn.

Each estimator computes one advantage per turn, (N, M), and every sampled token of a turn gets its turn's
advantage. Tokens outside turns (turn_index -1 or mask 0) and invalid samples (`inp.valid` false) get 0;
invalid samples are left out of every statistic. Each estimator's `requires` names the extras it reads.

>>> inp = AdvantageInput(rewards=torch.tensor([1.0, 0.0]), valid=torch.tensor([True, True]),
...     group_index=torch.tensor([0, 0]), mask=torch.ones(2, 2),
...     extras={"turn_index": torch.tensor([[0, 1], [0, 1]]), "turn_prefix": torch.tensor([[7, 8], [7, 9]])})
>>> tree_values(inp)  # both share turn 0 (value 0.5); turn 1 branches
tensor([[0.5000, 1.0000],
        [0.5000, 0.0000]], dtype=torch.float64)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, _check, _extra, _grpo_seq, group_moments
from ascent.algorithms.groups import group_min_max
from ascent.algorithms.types import AdvantageInput

EXPLORE, TASK, NO_TURN = 1, 0, -1
"""Values of extras['turn_kind']."""


# ---------------------------------------------------------------------------------------------------------
# shared helpers: reading the turn extras, node statistics of the turn tree, turn -> token broadcast
# ---------------------------------------------------------------------------------------------------------
def _turn_extra(inp: AdvantageInput, key: str, name: str) -> torch.Tensor:
    """extras[key] as an (N, M) tensor, or a ValueError naming the estimator and the extra."""
    value = _extra(inp, key, name)
    n = inp.rewards.shape[0]
    _check(
        name,
        value.dim() == 2 and value.shape[0] == n,
        f"extras[{key!r}] must be (N, M) = ({n}, turns), got {tuple(value.shape)}",
    )
    return value


def _turn_index(inp: AdvantageInput, name: str, turns: int) -> torch.Tensor:
    """extras['turn_index'] (N, T) long, checked against the mask and the M turns of the per-turn extras."""
    idx = _extra(inp, "turn_index", name).long()
    _check(
        name,
        tuple(idx.shape) == tuple(inp.mask.shape),
        f"extras['turn_index'] has shape {tuple(idx.shape)}, mask {tuple(inp.mask.shape)}",
    )
    top = int(idx.max()) if idx.numel() else -1
    _check(name, top < turns, f"extras['turn_index'] names turn {top} but the per-turn extras have {turns} column(s)")
    return idx


def _present(idx: torch.Tensor, turns: int) -> torch.Tensor:
    """(N, M) bool: turn t of row i owns at least one token of `idx`."""
    out = torch.zeros(idx.shape[0], turns + 1, dtype=torch.bool)
    out.scatter_(1, torch.where(idx >= 0, idx, torch.full_like(idx, turns)), True)
    return out[:, :turns]


def _to_tokens(turn_adv: torch.Tensor, idx: torch.Tensor, inp: AdvantageInput) -> torch.Tensor:
    """(N, M) turn advantages -> (N, T): each sampled token gets its turn's; 0 off turns and for invalid rows."""
    padded = torch.cat([turn_adv, torch.zeros(turn_adv.shape[0], 1, dtype=turn_adv.dtype)], dim=1)  # (N, M + 1)
    tok = padded.gather(1, torch.where(idx >= 0, idx, torch.full_like(idx, turn_adv.shape[1])))  # (N, T)
    keep = (idx >= 0) & (inp.mask > 0) & inp.valid[:, None]
    return torch.where(keep, tok, torch.zeros_like(tok)).to(inp.rewards.dtype)


def _live_turns(inp: AdvantageInput, exists: torch.Tensor, name: str, key: str) -> torch.Tensor:
    """(N, M) bool: existing turns of valid rows; turns must be 0..K-1 (no gaps)."""
    gap = exists[:, 1:] & ~exists[:, :-1]
    _check(name, not bool(gap.any()), f"extras[{key!r}]: a row has turn t without turn t-1 (turns must be 0..K-1)")
    return exists & inp.valid[:, None]


def _node_stats(inp: AdvantageInput, prefix: torch.Tensor, live: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, count), each (N, M + 1) float64: column 0 is the group's root (all valid rows), column t + 1
    the node after turn t = the rows of the group with the same prefix hash at depth t. value = mean outcome
    of the valid rows through the node (exact when they are all equal); NaN / 0 off live turns."""
    n, m = prefix.shape
    ext_live = torch.cat([inp.valid[:, None], live], dim=1)  # (N, M + 1)
    ext_prefix = torch.cat([torch.zeros(n, 1, dtype=torch.long), prefix.long()], dim=1)
    rows, cols = ext_live.nonzero(as_tuple=True)  # (L,) each
    keys = torch.stack([inp.group_index[rows], cols, ext_prefix[rows, cols]], dim=1)  # (L, 3) node identity
    _, node = torch.unique(keys, dim=0, return_inverse=True)  # (L,)
    nodes = int(node.max()) + 1 if node.numel() else 0
    r = inp.rewards.double()[rows]  # (L,)
    total = torch.zeros(nodes, dtype=torch.float64).index_add_(0, node, r)
    count = torch.zeros(nodes, dtype=torch.float64).index_add_(0, node, torch.ones_like(r))
    lo, hi = group_min_max(r, torch.ones_like(r, dtype=torch.bool), node, nodes)  # (nodes,) each, float64
    mean = torch.where(lo == hi, lo, total / count.clamp(min=1.0))  # (nodes,)
    value = torch.full((n, m + 1), float("nan"), dtype=torch.float64)
    counts = torch.zeros((n, m + 1), dtype=torch.float64)
    value[rows, cols], counts[rows, cols] = mean[node], count[node]
    return value, counts


def _outcome_scale(inp: AdvantageInput, cfg, normalize: bool) -> torch.Tensor:
    """(N,) float64 divisor of turn advantages: group outcome std + std_eps (or 1); inf for flat groups
    (their advantages are exactly 0)."""
    _, _, std = group_moments(inp.rewards.double(), inp.group_index, inp.valid)
    scale = std + cfg.std_eps if normalize else torch.ones_like(std)
    return torch.where(std > 0, scale, torch.full_like(std, float("inf")))


def _tree_parts(inp: AdvantageInput, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(turn_index (N, T), live (N, M), node value (N, M + 1), node count (N, M + 1)) of the turn tree."""
    prefix = _turn_extra(inp, "turn_prefix", name).long()
    idx = _turn_index(inp, name, prefix.shape[1])
    live = _live_turns(inp, prefix >= 0, name, "turn_prefix")
    value, count = _node_stats(inp, prefix, live)
    return idx, live, value, count


def tree_values(inp: AdvantageInput) -> torch.Tensor:
    """(N, M) float64: value of the tree node after each turn (mean outcome of the group's valid
    trajectories with the same history up to there); NaN where there is no turn or the row is invalid."""
    _, _, value, _ = _tree_parts(inp, "tree")
    return value[:, 1:]


# ---------------------------------------------------------------------------------------------------------
# tree (TreeOPSD)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeParams:
    """Tree credit (TreeOPSD)."""

    normalize: bool = True
    """Divide turn advantages by the group's outcome std (+ std_eps), as GRPO does (TreeOPSD tree credit;
    false: Dr. GRPO-like)."""


@ADVANTAGES.register(
    "tree",
    params=TreeParams,
    paper=papers.TREEOPSD,
    fidelity="reduced",
    departures=(
        "the turn-credit part only: no bounded teacher and no self-distillation loss",
        (
            "the tree is whatever prefixes the group's samples share (no forked continuations), so with independent "
            "samples it mostly reduces to GRPO / Dr. GRPO"
        ),
    ),
)
def tree(inp: AdvantageInput, cfg, params: TreeParams = TreeParams()) -> torch.Tensor:
    """Tree credit (TreeOPSD; arXiv preprint, id not found: docs/references.md): A_t = V(node after turn t)
    - V(node before it), terminal rewards backed up.

    The trajectories of a group (same task) form a tree: two trajectories share a node after turn t when
    their histories up to the end of turn t are identical (equal extras['turn_prefix'] at depth t); the
    root is the prompt. V(node) = the mean outcome (inp.rewards) of the group's valid trajectories through
    the node, i.e. the terminal rewards backed up with each branch weighted by its visits (the abstract's
    "recursively backs up terminal rewards"; an unweighted mean over children is the alternative not
    taken). The root's value is the group mean, so a trajectory's turn advantages telescope to
    V(its last node) - mean_g r, which is r_i - mean_g r when its history is unique. A turn that every
    trajectory of the group shares gets exactly 0; a branch that leads to better outcomes gets the
    difference. With params.normalize the advantages are divided by the group's outcome std (+ std_eps), so
    single-turn trajectories with distinct texts give GRPO exactly (Dr. GRPO without it). Flat groups
    get 0. Only the credit part of TreeOPSD (not its bounded teacher / self-distillation loss); the tree
    comes from whatever branching the group's samples happen to share (no extra rollouts are forked).
    Needs extras turn_index and turn_prefix.
    """
    idx, live, value, _ = _tree_parts(inp, "tree")
    adv = torch.where(live, value[:, 1:] - value[:, :-1], torch.zeros_like(value[:, 1:]))  # (N, M)
    return _to_tokens(adv / _outcome_scale(inp, cfg, params.normalize)[:, None], idx, inp)


tree.requires = frozenset({"turn_index", "turn_prefix"})


# ---------------------------------------------------------------------------------------------------------
# progress (SPA)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProgressParams:
    """Progress attribution (SPA, Wang et al. 2025, arXiv:2505.20732)."""

    prior: float = 1.0
    """Pseudo-count shrinking each tree node's mean outcome toward the progress before the turn (SPA, Wang et
    al. 2025, arXiv:2505.20732; 0: raw means); >= 0."""
    normalize: bool = True
    """Divide the per-turn contributions by the group's outcome std (+ std_eps)."""

    def __post_init__(self) -> None:
        if not self.prior >= 0:
            raise ValueError(f"prior must be >= 0, got {self.prior}")


def progress_contributions(inp: AdvantageInput, cfg, params: ProgressParams = ProgressParams()) -> torch.Tensor:
    """(N, M) float64 per-turn contributions c_t = p_t - p_{t-1} of `progress` (before normalisation).

    For every valid trajectory with K turns, sum_t c_t = r - mean_g r (the outcome minus the baseline);
    0 where there is no turn and for invalid rows.
    """
    name = "progress"
    _, live, value, count = _tree_parts(inp, name)
    n, m = live.shape
    k = float(params.prior)
    last = live.sum(dim=1) - 1  # (N,) index of each row's last turn
    r = inp.rewards.double()
    prev = value[:, 0]  # (N,) p_{-1} = baseline: the group mean (root value); NaN for invalid rows
    contrib = torch.zeros((n, m), dtype=torch.float64)
    for t in range(m):
        node_n, node_v = count[:, t + 1], value[:, t + 1]
        shrunk = (node_n * torch.nan_to_num(node_v) + k * prev) / (node_n + k).clamp(min=1e-300)
        p = torch.where(last == t, r, shrunk)  # p_T = the outcome
        contrib[:, t] = torch.where(live[:, t], p - prev, torch.zeros_like(p))
        prev = torch.where(live[:, t], p, prev)
    return contrib


@ADVANTAGES.register(
    "progress",
    params=ProgressParams,
    paper=papers.SPA,
    fidelity="reduced",
    departures=(
        (
            "learning-free: progress is the mean outcome of the group's trajectories that share the history (shrunk "
            "with pseudo-count k), not a trained estimator (that is `spa`)"
        ),
        "no grounding term (left to reward functions); a GRPO-style group std instead of PPO",
    ),
)
def progress(inp: AdvantageInput, cfg, params: ProgressParams = ProgressParams()) -> torch.Tensor:
    """Progress attribution (SPA, Wang et al., 2025, arXiv:2505.20732): A_t = p_t - p_{t-1}, contributions
    that sum to r - mean_g r exactly.

    SPA trains a progress estimator whose per-step contributions add up to the task's completion and uses
    each contribution as the step's reward. Here the estimator is learning-free: p_t estimates the
    expected outcome after turn t by Monte Carlo over the group's trajectories with the same history (the
    `tree` node: n_t trajectories, mean outcome m_t), shrunk toward the progress before the turn with a
    pseudo-count k = params.prior:  p_t = (n_t m_t + k p_{t-1}) / (n_t + k),  p_{-1} = mean_g r (the
    baseline), and p_{K-1} = r (the trajectory's outcome, which makes the sum telescope to r - mean_g r).
    The shrinkage matters where the tree has not branched: a history seen once (n_t = 1) moves progress
    only a 1/(1+k) share of the way to its outcome per turn, so credit is spread along the turns after a
    branching point instead of all landing on the first turn that differs (k = 0 gives the raw node means:
    `tree`, except that the last turn ends exactly at the outcome). The turn advantage is the contribution
    (SPA's intermediate reward; its grounding bonus is left to the reward functions), divided by the
    group's outcome std (+ std_eps) when params.normalize. Flat groups get 0. Needs extras turn_index
    and turn_prefix.
    """
    contrib = progress_contributions(inp, cfg, params)  # (N, M)
    idx = _turn_index(inp, "progress", contrib.shape[1])
    return _to_tokens(contrib / _outcome_scale(inp, cfg, params.normalize)[:, None], idx, inp)


progress.requires = frozenset({"turn_index", "turn_prefix"})


# ---------------------------------------------------------------------------------------------------------
# turn_feedback (ascent's own, in the spirit of SERL)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnFeedbackParams:
    """Step feedback moving credit between turns (ascent's own; in the spirit of SERL, Li et al. 2026)."""

    strength: float = 0.5
    """Share of each trajectory's credit that environment feedback moves between its turns, in [0, 1] (0: GRPO)."""
    temperature: float = 1.0
    """Softmax temperature of the feedback weights (smaller: credit concentrates on the decisive turns); > 0."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {self.strength}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


@ADVANTAGES.register(
    "turn_feedback",
    params=TurnFeedbackParams,
    paper=papers.SERL,
    fidelity="ascent",
    departures=(
        "ascent's own estimator in the spirit of SERL: a softmax of the environment's scalar step rewards moves "
        "credit between turns, where SERL uses a hindsight teacher's log-prob gap on action tokens (`serl`)",
    ),
)
def turn_feedback(inp: AdvantageInput, cfg, params: TurnFeedbackParams = TurnFeedbackParams()) -> torch.Tensor:
    """Scalar step feedback weights a trajectory's turns; the outcome sets its sign (ascent's own estimator,
    in the spirit of SERL, Li et al., 2026, arXiv:2605.19447, without its hindsight teacher: SERL weights
    action tokens by the log-prob gap between the policy with the feedback text in context and without it,
    which is `serl`; this one uses a softmax of the environment's scalar step rewards instead).

    A_i = GRPO advantage of the outcome (the update direction). f_t = extras['turn_rewards'] (the
    environment's feedback on turn t; a NaN on an existing turn counts as the trajectory's mean feedback,
    so an environment without step rewards gives uniform weights). Weights over the trajectory's K turns:
        w_t = (1 - lambda) + lambda * K * softmax_t(sign(A_i) f_t / tau),
    lambda = params.strength, tau = params.temperature. So w_t > 0 (every turn keeps the trajectory's sign)
    and mean_t w_t = 1 (the trajectory's total credit is GRPO's); feedback only moves credit between
    turns: in a successful trajectory toward the turns the environment rated well, in a failed one toward
    the turns it rated badly (an error, a step that changed nothing). A_t = A_i w_t. All-equal feedback
    within a trajectory gives w_t = 1: GRPO. Which signals make up the feedback (errors, page changes, the
    final step's own reward) is the environment's; the softmax form is ours. Turns are those owning tokens
    in extras['turn_index']. Needs extras turn_index and turn_rewards.
    """
    name = "turn_feedback"
    feedback = _turn_extra(inp, "turn_rewards", name).double()  # (N, M)
    idx = _turn_index(inp, name, feedback.shape[1])
    exists = _present(idx, feedback.shape[1])  # (N, M)
    known = exists & torch.isfinite(feedback)
    f = torch.where(known, feedback, torch.zeros_like(feedback))
    row_mean = f.sum(1) / known.sum(1).clamp(min=1)  # (N,)
    f = torch.where(known, f, row_mean[:, None].expand_as(f))
    base = _grpo_seq(inp, cfg).double()  # (N,)
    logits = torch.where(exists, torch.sign(base)[:, None] * f / params.temperature, torch.full_like(f, -torch.inf))
    top = logits.max(dim=1, keepdim=True).values.clamp(min=-1e300)  # finite even for rows without turns
    e = torch.where(exists, torch.exp(logits - top), torch.zeros_like(f))  # (N, M)
    soft = exists.sum(1, keepdim=True).double() * e / e.sum(1, keepdim=True).clamp(min=1e-300)
    w = (1.0 - params.strength) + params.strength * soft
    return _to_tokens(torch.where(exists, base[:, None] * w, torch.zeros_like(w)), idx, inp)


turn_feedback.requires = frozenset({"turn_index", "turn_rewards"})


# ---------------------------------------------------------------------------------------------------------
# explore_group (Exploration-Aware EAPO)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExploreGroupParams:
    """Exploration-aware grouping (EAPO, Hua et al. 2026, arXiv:2605.08978)."""

    step_coef: float = 0.0
    """A turn's return is the outcome plus this x its step reward, extras turn_rewards (Exploration-Aware PO,
    Hua et al. 2026, arXiv:2605.08978; 0: the outcome only; with `agent.turn_rewards=eapo` the step reward is the
    paper's exploration reward)."""
    step_norm: str = "outcome"
    """How the step reward is scaled. `pool`: each turn's return r + c f_t is standardised with its pool's mean and
    std, so where the pool's outcomes are all equal the spread is c f's alone and any c > 0 gives full-scale
    advantages (c does not set the scale). `outcome`: only the outcome is standardised in the pool, and the step
    reward is added centred on the pool's mean but not divided, A_t = (r - mean r) / (std r + eps) + c (f_t - mean
    f), so c is the step reward's weight in advantage units (the default: measured on `search-agent` the pool form
    halved accuracy at c = 0.05 and 0.01 alike, docs/agents.md). Both ascent's readings (the paper's method section
    was not at hand)."""

    def __post_init__(self):
        if self.step_norm not in ("pool", "outcome"):
            raise ValueError(f"explore_group step_norm must be 'pool' or 'outcome', got {self.step_norm!r}")


@ADVANTAGES.register(
    "explore_group",
    params=ExploreGroupParams,
    paper=papers.EAPO_EXPLORATION,
    fidelity="reduced",
    departures=(
        (
            "the variational exploration reward is ascent's reading of the paper (its method section was not at "
            "hand, only the abstract): `agent.turn_rewards=eapo` gives each exploratory turn "
            "log q(a*|h_t+1) - log q(a*|h_t), the Barber-Agakov bound of the information its observation carries "
            "about the gold answer a* with the policy as the variational posterior q (`eapo_turn_rewards`)"
        ),
        (
            "the reward enters as `step_coef` x extras turn_rewards beside the outcome (0 by default: the grouping "
            "alone); q is the policy's geometric-mean per-token probability of `<answer>a*</answer>` (IGPO's probe)"
        ),
        (
            "how the step reward is scaled is ascent's choice: `step_norm=pool` standardises r + c f_t in the pool "
            "(c then sets no scale where the outcomes are equal), `step_norm=outcome` (the default) standardises r "
            "only and adds c (f_t - pool mean)"
        ),
        "exploratory turns are the tool-call turns",
    ),
)
def explore_group(inp: AdvantageInput, cfg, params: ExploreGroupParams = ExploreGroupParams()) -> torch.Tensor:
    """Exploration-aware grouping (EAPO = Exploration-Aware PO, Hua et al., 2026, arXiv:2605.08978):
    exploratory and task turns are GRPO-normalised in separate groups.

    Not Evidence-Augmented PO (Guan et al., 2026), Efficiency-Aware PO (IterResearch, Chen et al., 2025:
    the rounds discount) or Experience-Augmented PO (Lu et al., 2026), the three other papers named EAPO.
    Each turn is one sample with outcome r (the trajectory's) and step reward f_t = extras['turn_rewards'] (NaN
    as 0), weighted by params.step_coef (0 by default). The paper's exploration reward: `agent.turn_rewards=eapo`
    makes f_t the variational information gain of exploratory turn t (`ascent.rewards.agentic.eapo_turn_rewards`),
    0 on task turns. Within a group (same task) the exploratory turns (turn_kind 1: tool calls) form one pool and
    the task turns (turn_kind 0: answers, environment actions) another; A_t = (r - mean_pool r) /
    (std_pool r + std_eps) + step_coef (f_t - mean_pool f), std unbiased over the pool's turns (flat pools: 0 for
    the first term); with `step_norm=pool` instead A_t = (R_t - mean_pool R) / (std_pool R + std_eps) with
    R_t = r + step_coef f_t (the form measured first). So a trajectory weighs
    in each pool by how many turns of that kind it has, and how well exploration paid off is judged only
    against other exploration, never against the answers, whose returns have another distribution: the
    advantages of one kind do not change when the other kind's returns do. Turns with kind -1 get 0.
    Needs extras turn_index and turn_kind
    (+ turn_rewards when the coefficient is not 0).
    """
    name = "explore_group"
    kind = _turn_extra(inp, "turn_kind", name).long()  # (N, M)
    _check(
        name,
        bool(((kind >= NO_TURN) & (kind <= EXPLORE)).all()),
        "extras['turn_kind'] must hold -1 (no turn), 0 (task) or 1 (exploratory)",
    )
    idx = _turn_index(inp, name, kind.shape[1])
    ret = inp.rewards.double()[:, None].expand(kind.shape).clone()  # (N, M)
    step = torch.zeros_like(ret)  # (N, M) c f_t
    if params.step_coef != 0:
        f = _turn_extra(inp, "turn_rewards", name).double()
        _check(
            name,
            f.shape == kind.shape,
            f"extras['turn_rewards'] {tuple(f.shape)} and ['turn_kind'] {tuple(kind.shape)} differ",
        )
        step = params.step_coef * torch.nan_to_num(f, nan=0.0)
    if params.step_norm == "pool":
        ret, step = ret + step, None
    adv = torch.zeros_like(ret)
    for k in (EXPLORE, TASK):
        rows, cols = ((kind == k) & inp.valid[:, None]).nonzero(as_tuple=True)  # (P,) the pool's turns
        if rows.numel() == 0:
            continue
        vals, ones = ret[rows, cols], torch.ones(rows.shape, dtype=torch.bool)
        _, mean, std = group_moments(vals, inp.group_index[rows], ones)
        adv[rows, cols] = (vals - mean) / (std + cfg.std_eps)
        if step is not None:  # step_norm=outcome: c f_t centred on its pool's mean, not divided
            _, step_mean, _ = group_moments(step[rows, cols], inp.group_index[rows], ones)
            adv[rows, cols] += step[rows, cols] - step_mean
    return _to_tokens(adv, idx, inp)


explore_group.requires = frozenset({"turn_index", "turn_kind"})
explore_group.reads = frozenset({"turn_rewards"})  # optional: read when step_coef != 0


# ---------------------------------------------------------------------------------------------------------
# grpo_mr (RLVMR's GRPO-MR)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GrpoMrParams:
    """RLVMR's GRPO-MR: the episode's group advantage plus the step's meta-reasoning advantage, normalised per tag."""

    step_weight: float = 1.0
    """Weight w of the per-tag step advantage beside the episode advantage; >= 0 (0: the episode part alone)."""
    std: bool = False
    """Divide both parts by their group's std (+ std_eps); false: mean-centred only, the authors' code's default."""

    def __post_init__(self) -> None:
        if not self.step_weight >= 0:
            raise ValueError(f"step_weight must be >= 0, got {self.step_weight}")


@ADVANTAGES.register(
    "grpo_mr",
    params=GrpoMrParams,
    paper=papers.RLVMR,
    fidelity="reduced",
    departures=(
        "the step rewards are `meta_tags`' rules (`agent.turn_rewards=meta_tags`): a repeated exploration scores -1 "
        "(the authors' code: 0) and `<plan>` counts in turn 0 only; ascent's rules",
        "one sample per episode with per-turn advantages on its tokens, where the authors' code makes each step "
        "a sample",
    ),
)
def grpo_mr(inp: AdvantageInput, cfg, params: GrpoMrParams = GrpoMrParams()) -> torch.Tensor:
    """GRPO-MR (RLVMR, Zhang et al., 2025, arXiv:2507.22844; the authors' `compute_rlvmr_outcome_advantage`):
    every token of turn t of episode i gets

        A(i, t) = (R_i - mean_g R) + w (f_{i,t} - mean_{g, tag(i,t)} f)

    R the episode's reward (group g = its task), f_{i,t} = extras['turn_rewards'] the turn's meta-reasoning score
    (`agent.turn_rewards=meta_tags`) and the second mean over the turns of group g with the same tag type
    (extras['turn_tag']: 1 plan, 2 explore, 3 reflect); untagged turns (tag 0) get the episode part only. With
    `std`, each part is divided by its group's unbiased std + std_eps (flat groups: 0). So a plan is judged against
    the group's other plans, an exploration against the other explorations. Needs extras turn_index, turn_rewards,
    turn_tag.
    """
    name = "grpo_mr"
    tag = _turn_extra(inp, "turn_tag", name).long()  # (N, M)
    f = _turn_extra(inp, "turn_rewards", name).double()
    _check(name, f.shape == tag.shape, f"extras['turn_rewards'] {tuple(f.shape)} and ['turn_tag'] {tuple(tag.shape)}")
    idx = _turn_index(inp, name, tag.shape[1])
    r = inp.rewards.double()
    _, mean, sd = group_moments(r, inp.group_index, inp.valid)
    episode = (r - mean) / (sd + cfg.std_eps) if params.std else r - mean  # (N,)
    adv = torch.where(inp.valid, episode, torch.zeros_like(episode))[:, None].expand(tag.shape).clone()  # (N, M)
    rows, cols = ((tag > 0) & inp.valid[:, None]).nonzero(as_tuple=True)  # (P,) the tagged turns
    if rows.numel() and params.step_weight != 0:
        vals = torch.nan_to_num(f[rows, cols], nan=0.0)
        pool = inp.group_index[rows] * 4 + tag[rows, cols]  # (group, tag type)
        _, pm, ps = group_moments(vals, pool, torch.ones_like(vals, dtype=torch.bool))
        step = (vals - pm) / (ps + cfg.std_eps) if params.std else vals - pm
        adv[rows, cols] += params.step_weight * step
    return _to_tokens(adv, idx, inp)


grpo_mr.requires = frozenset({"turn_index", "turn_rewards", "turn_tag"})
