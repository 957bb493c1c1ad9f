"""SEQUOIA: Q-learning whose greedy action is a MILP solve with the Q-network embedded in it (Xu, Wilder, Khalil &
Tambe 2025, "Reinforcement learning with combinatorial actions for coupled restless bandits", ICLR 2025,
arXiv:2503.01919, algorithm 1; the authors' code, github.com/lily-x/combinatorial-rmab, `algos/dqn_estimator.py` and
`model2mip/net2mip.py`, read to learn the details, not copied).

The mechanism:

- Q(s, a) is a small ReLU network on the concatenation [a, s] (J action bits, J arm states) -> a scalar (the
  authors' hidden sizes 16 and 32).
- The greedy action argmax_{a feasible} Q(s, a) is the optimum of one MILP: the coRMAB's action constraints
  (`ActionMILP`) plus the network written as mixed-integer constraints, each hidden ReLU unit h = max(0, w.x + b)
  as  w.x + b = h - g,  0 <= h <= U z,  0 <= g <= -L (1 - z),  z in {0, 1}  (the big-M encoding of Neur2SP,
  Dumouchelle et al. 2022, arXiv:2205.12006, that the authors reuse). ascent computes L and U per unit by interval
  arithmetic over a in [0, 1]^J at the given state (the authors use M = 1e5), fixes units whose sign is known
  (U <= 0: off; L >= 0: on) and solves with HiGHS.
- Training: pretrain Q on the expected one-step reward of random (state, action) pairs (the authors' "myopic
  pretraining", so training starts from the myopic policy), then DQN: epsilon-greedy episodes whose exploratory
  action is a random feasible one, a replay memory seeded with part of the pretraining data, one minibatch a step,
  the target r(s, a) + gamma Q_target(s', argmax_a' Q_target(s', a')) with the argmax a MILP solve, the Huber loss,
  AdamW (amsgrad), gradients clipped by value, the learning rate decayed by 0.9 per episode. The reward is the
  expected reward of the step (the authors' `next_state_expected`), which removes the transition noise from the
  targets.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn

from ascent import papers
from ascent.co.rmab import RMAB_POLICIES, ActionMILP, CoRMAB, RMABPolicy


class QNet(nn.Module):
    """Q(s, a): Linear(2J -> h1) - ReLU - Linear(h1 -> h2) - ReLU - Linear(h2 -> 1) on [a, s]."""

    def __init__(self, arms: int, hidden: tuple[int, ...] | list[int] = (16,)) -> None:
        super().__init__()
        dims = [2 * arms, *hidden]
        self.hidden = nn.ModuleList(nn.Linear(i, o) for i, o in zip(dims[:-1], dims[1:]))
        self.out = nn.Linear(dims[-1], 1)

    def forward(self, action: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """action (..., J), state (..., J) -> Q (...)."""
        x = torch.cat([action, state.float()], dim=-1)  # (..., 2J)
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.out(x).squeeze(-1)


def embed_qnet(net: QNet, inst: CoRMAB, state: torch.Tensor) -> ActionMILP:
    """The MILP max_{a feasible} Q(state, a): the action set plus the network's big-M ReLU encoding (module
    docstring), with bounds from interval arithmetic at this state."""
    m = ActionMILP(inst)
    J = inst.arms
    prev = list(range(J))  # variable indices of the layer input that depends on a
    lo_prev, hi_prev = np.zeros(J), np.ones(J)
    const_in = state.float()  # the state part of the first layer's input, a constant here
    for k, layer in enumerate(net.hidden):
        W = layer.weight.detach().double().numpy()
        b = layer.bias.detach().double().numpy()
        if k == 0:
            b = b + W[:, J:] @ const_in.double().numpy()
            W = W[:, :J]
        lo = b + np.minimum(W, 0) @ hi_prev + np.maximum(W, 0) @ lo_prev  # (out,) pre-activation bounds
        hi = b + np.maximum(W, 0) @ hi_prev + np.minimum(W, 0) @ lo_prev
        cur = []
        for u in range(W.shape[0]):
            if hi[u] <= 0:  # always off: h = 0
                cur.append(m.add_var(0.0, 0.0, 0.0))
                continue
            h = m.add_var(0.0, 0.0, hi[u])
            coefs = {p: W[u, i] for i, p in enumerate(prev) if W[u, i] != 0.0}
            if lo[u] >= 0:  # always on: h = w.x + b
                m.rows.append(({**coefs, h: -1.0}, -b[u], -b[u]))
            else:
                g = m.add_var(0.0, 0.0, -lo[u])
                z = m.add_var(0.0, 0.0, 1.0, integer=True)
                m.rows.append(({**coefs, h: -1.0, g: 1.0}, -b[u], -b[u]))  # w.x + b = h - g
                m.rows.append(({h: 1.0, z: -hi[u]}, -np.inf, 0.0))  # h <= U z
                m.rows.append(({g: 1.0, z: -lo[u]}, -np.inf, -lo[u]))  # g <= -L (1 - z)
            cur.append(h)
        prev, lo_prev, hi_prev = cur, np.maximum(lo, 0), np.maximum(hi, 0)
    w_out = net.out.weight.detach().double().numpy()[0]
    for i, p in enumerate(prev):
        m.c[p] += float(w_out[i])
    m.constant = float(net.out.bias.detach())
    return m


def greedy_action(net: QNet, inst: CoRMAB, state: torch.Tensor) -> tuple[torch.Tensor, float]:
    """argmax over feasible a of Q(state, a) and its value, by one MILP solve."""
    return embed_qnet(net, inst, state).solve()


@dataclass(frozen=True)
class SequoiaParams:
    """SEQUOIA's training (defaults: the authors' code where it fits a small CPU budget; see departures)."""

    hidden: list[int] = field(default_factory=lambda: [16])
    """Hidden layer widths of the Q-network (the authors': 16, 32; one layer here keeps HiGHS's per-step MILP at
    about 10 ms of CPU, against about 0.3 s with the authors' two layers)."""
    episodes: int = 40
    """DQN episodes (the authors': 100)."""
    gamma: float = 0.99
    """Discount factor."""
    lr: float = 2.5e-4
    """AdamW learning rate (amsgrad, eps 1.5e-4), decayed by `lr_decay` after every episode."""
    lr_decay: float = 0.9
    """Per-episode learning-rate factor."""
    batch: int = 32
    """Transitions per minibatch; one minibatch per environment step."""
    eps_start: float = 0.9
    """Initial exploration probability."""
    eps_end: float = 0.05
    """Final exploration probability."""
    eps_decay: float = 150.0
    """Steps of the exponential decay of epsilon (the authors': 1000 over 2000 steps)."""
    target_every: int = 50
    """Optimisation steps between hard copies of the Q-network into the target network."""
    pretrain_samples: int = 2000
    """Random (state, action) pairs for the myopic pretraining."""
    pretrain_epochs: int = 30
    """Epochs of the myopic pretraining (MSE on the expected one-step reward)."""
    pretrain_lr: float = 5e-3
    """AdamW learning rate of the pretraining (authors: 2.5e-4 over 300 epochs; fewer epochs here)."""
    seed_memory: int = 200
    """Pretraining transitions put in the replay memory before the DQN phase."""
    grad_clip: float = 5.0
    """Gradients clipped by value."""

    def __post_init__(self) -> None:
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(f"hidden must be positive widths, got {self.hidden}")
        if not 0 <= self.gamma < 1 or not 0 <= self.eps_end <= self.eps_start <= 1:
            raise ValueError("need 0 <= gamma < 1 and 0 <= eps_end <= eps_start <= 1")
        if min(self.episodes, self.batch, self.target_every, self.pretrain_epochs) < 1 or self.pretrain_samples < 1:
            raise ValueError("episodes, batch, target_every, pretrain_samples and pretrain_epochs must be >= 1")


def _random_states(inst: CoRMAB, n: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, inst.states, (n, inst.arms), generator=g)


def pretrain_myopic(net: QNet, inst: CoRMAB, p: SequoiaParams, g: torch.Generator) -> list[tuple]:
    """Fit Q(s, a) to the expected one-step reward on random states and random feasible actions (MSE); returns
    the (s, a, r, s') transitions it drew."""
    states = _random_states(inst, p.pretrain_samples, g)  # (n, J)
    actions = torch.stack([inst.random_action(g) for _ in range(p.pretrain_samples)])  # (n, J)
    rewards = inst.expected_reward(states, actions)  # (n,)
    u = torch.rand(p.pretrain_samples, inst.arms, generator=g)
    nxt = [inst.step(s, a, uu)[0] for s, a, uu in zip(states, actions, u)]
    opt = torch.optim.AdamW(net.parameters(), lr=p.pretrain_lr, amsgrad=True)
    for _ in range(p.pretrain_epochs):
        perm = torch.randperm(p.pretrain_samples, generator=g)
        for k in range(0, p.pretrain_samples, p.batch):
            idx = perm[k : k + p.batch]
            loss = torch.nn.functional.mse_loss(net(actions[idx], states[idx]), rewards[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [(states[i], actions[i], float(rewards[i]), nxt[i]) for i in range(p.pretrain_samples)]


class _TargetArgmax:
    """argmax_a Q_target(s', a) by MILP, cached per target-network version (exact: the target does not change
    between copies)."""

    def __init__(self, inst: CoRMAB) -> None:
        self.inst, self.cache, self.solves = inst, {}, 0

    def reset(self) -> None:
        self.cache = {}

    def __call__(self, target: QNet, state: torch.Tensor) -> torch.Tensor:
        key = tuple(state.tolist())
        if key not in self.cache:
            self.cache[key] = greedy_action(target, self.inst, state)[0]
            self.solves += 1
        return self.cache[key]


def train_sequoia(inst: CoRMAB, seed: int, p: SequoiaParams = SequoiaParams()) -> tuple[QNet, dict[str, float]]:
    """Myopic pretraining then DQN with MILP action selection (module docstring); returns the Q-network and
    counters (MILP solves, final loss)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    net = QNet(inst.arms, p.hidden)
    data = pretrain_myopic(net, inst, p, g)
    memory = rng.sample(data, min(p.seed_memory, len(data)))
    target = QNet(inst.arms, p.hidden)
    target.load_state_dict(net.state_dict())
    opt = torch.optim.AdamW(net.parameters(), lr=p.lr, eps=1.5e-4, amsgrad=True)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=p.lr_decay)
    argmax, steps, updates, loss_v, policy_solves = _TargetArgmax(inst), 0, 0, float("nan"), 0
    for _ in range(p.episodes):
        state = inst.reset(g)
        for _ in range(inst.horizon):
            eps = p.eps_end + (p.eps_start - p.eps_end) * math.exp(-steps / p.eps_decay)
            steps += 1
            if rng.random() < eps:
                action = inst.random_action(g)
            else:
                with torch.no_grad():
                    action = greedy_action(net, inst, state)[0]
                policy_solves += 1
            r = float(inst.expected_reward(state, action))
            nxt, _ = inst.step(state, action, torch.rand(inst.arms, generator=g))
            memory.append((state, action, r, nxt))
            state = nxt
            loss_v = _dqn_update(net, target, opt, rng.sample(memory, min(p.batch, len(memory))), argmax, inst, p)
            updates += 1
            if updates % p.target_every == 0:
                target.load_state_dict(net.state_dict())
                argmax.reset()
        sched.step()
    return net, {"milp_solves_target": argmax.solves, "milp_solves_policy": policy_solves, "final_loss": loss_v}


def _dqn_update(net, target, opt, batch, argmax, inst: CoRMAB, p: SequoiaParams) -> float:
    """One DQN step on a minibatch of (s, a, r, s') with the MILP argmax in the target."""
    s = torch.stack([b[0] for b in batch])  # (B, J)
    a = torch.stack([b[1] for b in batch])
    r = torch.tensor([b[2] for b in batch])  # (B,)
    s2 = torch.stack([b[3] for b in batch])
    with torch.no_grad():
        a2 = torch.stack([argmax(target, x) for x in s2])  # (B, J) one MILP per new next state
        y = r + p.gamma * target(a2, s2)
    loss = torch.nn.functional.smooth_l1_loss(net(a, s), y)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(net.parameters(), p.grad_clip)
    opt.step()
    return float(loss.detach())


@RMAB_POLICIES.register(
    "sequoia",
    params=SequoiaParams,
    paper=papers.SEQUOIA,
    fidelity="reduced",
    departures=(
        "HiGHS (scipy.optimize.milp) instead of Gurobi, with big-M bounds from interval arithmetic (authors: 1e5)",
        "one hidden layer of 16 units (authors: 16 and 32): HiGHS solves the embedded MILP in ~10 ms CPU vs ~0.3 s",
        "uniform replay instead of prioritised experience replay; no perturbed-action augmentation",
        "hard target copies every target_every steps with an exact per-copy cache of the MILP argmax (authors: "
        "soft updates with tau 1e-6 and a memoizer refreshed every 5 episodes)",
        "a smaller budget: 40 episodes (authors: 100) and 2000 pretraining pairs x 30 epochs (authors: about 50 H "
        "random states x (2J + 13) actions x 300 epochs), random states instead of the authors' hand-picked ones",
    ),
)
def sequoia(inst: CoRMAB, seed: int = 0, params: SequoiaParams = SequoiaParams()) -> RMABPolicy:
    """SEQUOIA (Xu et al. 2025, arXiv:2503.01919): train Q(s, a) by DQN, act by argmax over feasible a of
    Q(s, a), one MILP with the network embedded per step."""
    net, _ = train_sequoia(inst, seed, params)
    return lambda state: greedy_action(net, inst, state)[0]
