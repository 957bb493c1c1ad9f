"""The offline algorithms: their losses against hand-computed values and slow loops, learning on tiny tasks where
cloning the data is not enough, exact resume, and the errors of a run without a usable dataset."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
pytest.importorskip("minari")

from ascent.classic import CLASSIC  # noqa: E402
from ascent.classic.base import ClassicContext  # noqa: E402
from ascent.classic.envs import VecEnv  # noqa: E402
from ascent.offline.cql import conservative_gap, discrete_cql_gap  # noqa: E402
from ascent.offline.dataset import DatasetError, Episode, write_dataset  # noqa: E402
from ascent.offline.iql import awr_weights, expectile_loss  # noqa: E402
from ascent.typed import ConfigError  # noqa: E402

HORIZON = 40


class Bandit(gym.Env):
    """A contextual bandit run for HORIZON steps: each step shows a fresh s ~ U(-1, 1) and pays -(a - s)^2 for a in
    [-1, 1]; the next state does not depend on a, so the best action is a = s at any discount. A dataset of uniform
    actions has mean action 0: behaviour cloning scores about -E[s^2] = -1/3, following a learned Q near 0."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def draw(self) -> np.ndarray:
        self.s = self.np_random.uniform(-1, 1, size=1).astype(np.float32)
        return self.s

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.draw(), {}

    def step(self, action):
        reward = -((float(action[0]) - float(self.s[0])) ** 2)
        self.t += 1
        return self.draw(), reward, self.t >= HORIZON, False, {}


def bandit_dataset(folder, n: int = 2000) -> str:
    """n transitions of uniformly random actions, in episodes of HORIZON steps."""
    rng = np.random.default_rng(0)
    eps = []
    for _ in range(n // HORIZON):
        s = rng.uniform(-1, 1, size=(HORIZON + 1, 1)).astype(np.float32)
        a = rng.uniform(-1, 1, size=(HORIZON, 1)).astype(np.float32)
        term = np.arange(HORIZON) == HORIZON - 1
        eps.append(Episode(s, a, -((a - s[:-1]) ** 2)[:, 0], term, np.zeros(HORIZON, bool)))
    spaces = (Bandit.observation_space, Bandit.action_space)
    return str(write_dataset(folder, "bandit-v0", eps, None, "uniform", spaces=spaces))


def build(spec: str, dataset: str, make, total_steps: int, seed: int = 0):
    torch.manual_seed(seed)
    ctx = ClassicContext(VecEnv(make, 1, seed), total_steps, seed, torch.device("cpu"), dataset)
    return CLASSIC.resolve(spec)(ctx)


def train(algo, steps: int) -> None:
    for _ in range(steps):
        algo.iteration(False)


def bandit_score(algo) -> float:
    s = np.linspace(-1, 1, 101, dtype=np.float32)[:, None]
    return float(np.mean(-((algo.act(s, deterministic=True) - s) ** 2)))


def test_expectile_loss_matches_its_definition_by_loop():
    u = torch.randn(50, generator=torch.Generator().manual_seed(0))
    loop = sum((0.8 if x >= 0 else 0.2) * float(x) ** 2 for x in u) / 50
    assert float(expectile_loss(u, 0.8)) == pytest.approx(loop, rel=1e-5)
    # the minimiser of the expectile loss over a constant v is the tau-expectile: above the mean for tau > 1/2
    data = torch.tensor([0.0, 1.0, 2.0, 10.0])
    v = torch.zeros((), requires_grad=True)
    opt = torch.optim.SGD([v], lr=0.05)
    for _ in range(2000):
        opt.zero_grad()
        expectile_loss(data - v, 0.9).backward()
        opt.step()
    # the 0.9-expectile e solves 0.9 sum_{x>e} (x - e) = 0.1 sum_{x<e} (e - x): e = 7.1 / 1.2 with one point above
    assert float(v.detach()) == pytest.approx((0.9 * 10 + 0.1 * 3) / (0.9 + 0.1 * 3), abs=1e-3)
    assert awr_weights(torch.tensor([-1.0, 0.5, 3.0]), 2.0, 50.0).tolist() == pytest.approx([np.exp(-2), np.e, 50.0])


def test_iql_updates_q_and_the_policy_with_the_value_it_has_just_updated(tmp_path):
    """The paper's Algorithm 1 (and the authors' code): V steps first; Q's target r + gamma V(s') and the policy's
    weights exp(beta (min Q'(s, a) - V(s))) then use the updated V, not the V the step started from."""
    spec = "iql(hidden=[16], batch_size=32, lr=0.05, reward_scale=none, gamma=0.9)"
    algo = build(spec, bandit_dataset(tmp_path, 200), Bandit, 10)
    b = algo.sample(32)
    critic, actor = copy.deepcopy(algo.critic), copy.deepcopy(algo.actor)  # the step's starting point
    with torch.no_grad():
        v_before = algo.value(b.obs)
        target_q = algo.critic_target(b.obs, b.actions).min(dim=0).values  # the target critics the step uses
    algo.update(b, False)
    with torch.no_grad():  # the updated V (lr 0.05: far from the V the step started from)
        v, next_v = algo.value(b.obs), algo.value(b.next_obs)
    assert (v - v_before).abs().max() > 0.01
    check_iql_gradients(algo, b, critic, actor, next_v, target_q - v)


def check_iql_gradients(algo, b, critic, actor, next_v, adv):
    """The step's critic and policy gradients equal those of Q's target r + 0.9 V(s') with `next_v` and of the
    weights exp(3 adv) (`critic`, `actor`: copies from before the step; gamma 0.9, beta 3, max weight 100)."""
    y = b.rewards + 0.9 * (1.0 - b.terminated) * next_v
    (critic(b.obs, b.actions) - y).pow(2).mean(dim=1).sum().backward()
    for p_ref, p_algo in zip(critic.parameters(), algo.critic.parameters()):
        assert torch.allclose(p_ref.grad, p_algo.grad, atol=1e-5)
    (-(awr_weights(adv, 3.0, 100.0) * actor.log_prob(b.obs, b.actions)).mean()).backward()
    for p_ref, p_algo in zip(actor.parameters(), algo.actor.parameters()):
        assert torch.allclose(p_ref.grad, p_algo.grad, atol=1e-5)


def test_iql_d3rlpy_update_order_takes_q_target_from_the_value_before_the_step(tmp_path):
    """update_order=d3rlpy: Q's target r + gamma V(s') uses V from before the step (d3rlpy updates Q and V
    together); the policy's weights still use the updated V."""
    spec = "iql(hidden=[16], batch_size=32, lr=0.05, reward_scale=none, gamma=0.9, update_order=d3rlpy)"
    algo = build(spec, bandit_dataset(tmp_path, 200), Bandit, 10)
    b = algo.sample(32)
    critic, actor = copy.deepcopy(algo.critic), copy.deepcopy(algo.actor)
    with torch.no_grad():
        next_v_before = algo.value(b.next_obs)
        target_q = algo.critic_target(b.obs, b.actions).min(dim=0).values
    algo.update(b, False)
    with torch.no_grad():
        v, next_v_after = algo.value(b.obs), algo.value(b.next_obs)
    assert (next_v_after - next_v_before).abs().max() > 0.01
    check_iql_gradients(algo, b, critic, actor, next_v_before, target_q - v)
    with pytest.raises(ValueError, match="update_order"):
        build("iql(hidden=[16], update_order=joint)", bandit_dataset(tmp_path, 200), Bandit, 10)


def test_iql_log_std_forms_clamp_and_sigmoid(tmp_path):
    """`log_std=clamp` (the authors' code): log std = clamp(p, -5, 2), p from 0, no gradient past a bound;
    `log_std=sigmoid` (d3rlpy 2.8): log std = -5 + 7 sigmoid(p), from -1.5, a gradient everywhere. Both log-probs
    equal torch's Normal with that std around the tanh-bounded mean."""
    data = bandit_dataset(tmp_path, 200)
    clamp = build("iql(hidden=[16], batch_size=32)", data, Bandit, 10).actor
    sig = build("iql(hidden=[16], batch_size=32, log_std=sigmoid)", data, Bandit, 10).actor
    obs, act = torch.tensor([[0.3], [-0.8]]), torch.tensor([[0.1], [0.5]])
    for actor, start in ((clamp, 0.0), (sig, -1.5)):
        assert actor.current_log_std().tolist() == pytest.approx([start])
        ref = torch.distributions.Normal(actor.mean(obs), actor.current_log_std().exp()).log_prob(act).sum(-1)
        assert torch.allclose(actor.log_prob(obs, act), ref, atol=1e-6)
    with torch.no_grad():
        clamp.log_std.fill_(-7.0)  # past the lower bound: clamped, and the clamp passes no gradient
        sig.log_std.fill_(-7.0)  # deep in the sigmoid's tail: -5 + 7 sigmoid(-7), still a (small) gradient
    assert clamp.current_log_std().tolist() == pytest.approx([-5.0])
    assert sig.current_log_std().tolist() == pytest.approx([-5 + 7 / (1 + np.exp(7.0))], rel=1e-5)
    for actor in (clamp, sig):
        actor.log_prob(obs, act).sum().backward()
    assert float(clamp.log_std.grad) == 0.0 and float(sig.log_std.grad) != 0.0
    with pytest.raises(ValueError, match="iql.log_std: 'softplus' is not valid"):
        build("iql(hidden=[16], log_std=softplus)", data, Bandit, 10)


def test_conservative_gap_matches_a_loop_over_samples():
    g = torch.Generator().manual_seed(1)
    q, log_mu, q_data = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g), torch.randn(4, generator=g)
    loop = np.mean([np.log(sum(np.exp(float(q[b, k] - log_mu[b, k]) / 0.5) for k in range(6))) * 0.5 - float(q_data[b])
                    for b in range(4)])  # fmt: skip
    assert float(conservative_gap(q, log_mu, q_data, 0.5)) == pytest.approx(loop, rel=1e-5)
    q_all, actions = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]), torch.tensor([2, 1])
    by_hand = (np.log(np.exp(1) + np.exp(2) + np.exp(3)) - 3 + np.log(3)) / 2
    assert float(discrete_cql_gap(q_all, actions)) == pytest.approx(by_hand, rel=1e-6)


def test_cql_sampled_actions_cover_the_three_proposals(tmp_path):
    algo = build("cql(hidden=[16], n_actions=3, batch_size=5)", bandit_dataset(tmp_path, 50), Bandit, 10)
    b = algo.sample(5)
    q, log_mu = algo.sampled_q(b)
    assert q.shape == (2, 5, 9) and log_mu.shape == (5, 9)
    assert torch.all(log_mu[:, :3] == -np.log(2.0))  # uniform on [-1, 1]: density 1/2
    # the columns are Q at s of the sampled actions: recompute the uniform ones' Q from the critic directly
    torch.manual_seed(0)
    q1, _ = algo.sampled_q(b)
    torch.manual_seed(0)
    uniform = -1 + 2 * torch.rand(5, 3, 1)
    direct = algo.critic(b.obs[:, None].expand(5, 3, 1).reshape(15, 1), uniform.reshape(15, 1)).reshape(2, 5, 3)
    assert torch.allclose(q1[:, :, :3], direct, atol=1e-6)


@pytest.mark.parametrize(
    "spec, steps",
    [
        ("td3_bc(hidden=[32, 32], batch_size=128, lr=0.001, policy_freq=1, gamma=0.5)", 600),
        ("iql(hidden=[32, 32], batch_size=128, lr=0.001, expectile=0.9, beta=10.0, reward_scale=none, gamma=0.5)", 600),
        ("cql(hidden=[32, 32], batch_size=64, lr=0.001, actor_lr=0.001, n_actions=4, gamma=0.5)", 800),
    ],
)
def test_value_based_methods_beat_cloning_where_the_data_is_uniform(tmp_path, spec, steps):
    data = bandit_dataset(tmp_path)
    bc = build("bc(hidden=[32, 32], batch_size=128)", data, Bandit, steps)
    train(bc, 300)
    algo = build(spec, data, Bandit, steps)
    before = bandit_score(algo)
    train(algo, steps)
    after = bandit_score(algo)
    # cloning learns the mean action 0: -E[s^2] = -1/3; following the learned Q gets close to a = s (score 0)
    assert bandit_score(bc) == pytest.approx(-1 / 3, abs=0.06)
    assert after > -0.08 and after > before + 0.1, (before, after)


def cartpole_dataset(folder) -> str:
    """Half the episodes random, half a balancing controller that acts at random 30% of the time."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    eps = []
    for i in range(40):
        obs, _ = env.reset(seed=i)
        o, a, r, te, tr = [obs], [], [], [], []
        noisy = i % 2 == 1
        done = False
        while not done:
            good = int(obs[2] + 0.5 * obs[3] > 0)
            action = good if noisy and rng.random() > 0.3 else int(rng.integers(2))
            obs, reward, term, trunc, _ = env.step(action)
            o.append(obs), a.append(action), r.append(reward), te.append(term), tr.append(trunc)
            done = term or trunc
        eps.append(Episode(np.array(o, np.float32), np.array(a), np.array(r, np.float32), np.array(te), np.array(tr)))
    return str(write_dataset(folder, "cartpole-mixed-v0", eps, "CartPole-v1", "mixed"))


def test_discrete_cql_learns_to_balance_from_mixed_data(tmp_path):
    data = cartpole_dataset(tmp_path)
    make = lambda: gym.make("CartPole-v1")  # noqa: E731
    algo = build("discrete_cql(hidden=[64, 64], lr=0.001, target_update_interval=200, batch_size=128)", data, make, 1)
    train(algo, 1500)
    from ascent.classic.envs import evaluate

    returns = evaluate(make, lambda obs: algo.act(obs, True), 5, 10_000)
    assert np.mean(returns) > 150, returns  # the data's random half averages ~22


def test_an_offline_run_resumes_exactly(tmp_path):
    from ascent.app.classic import train_run
    from ascent.config import load_config

    rng = np.random.default_rng(0)  # 200 random Pendulum-shaped transitions: resume does not need good data
    T = 200
    ep = Episode(rng.normal(size=(T + 1, 3)).astype(np.float32), rng.uniform(-2, 2, (T, 1)).astype(np.float32),
                 rng.normal(size=T).astype(np.float32), np.zeros(T, bool), np.arange(T) == T - 1)  # fmt: skip
    data = str(write_dataset(tmp_path, "pendulum-noise-v0", [ep], "Pendulum-v1", "noise"))
    over = [f"classic.dataset={data}", "classic.env=Pendulum-v1", "classic.total_steps=40",
            "classic.algorithm=iql(hidden=[8],batch_size=16)", "classic.eval_episodes=2", f"output_dir={tmp_path}",
            "logging.progress=false"]  # fmt: skip
    whole = train_run(load_config("halfcheetah-sac", over + ["name=whole"]))
    cfg = load_config("halfcheetah-sac", over + ["name=half"])
    assert train_run(cfg, stop_at=20) is None
    resumed = train_run(run_dir=tmp_path / "half", resume=True)
    assert resumed["final_returns"] == whole["final_returns"] and resumed["gradient_steps"] == 40
    assert resumed["env_steps"] == 0 and whole["env_steps"] == 0  # an offline run never steps its environments
    from safetensors.torch import load_file

    a = load_file(str(tmp_path / "whole/checkpoints/step_000040/model.safetensors"))
    b = load_file(str(tmp_path / "half/checkpoints/step_000040/model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_without_a_fitting_dataset_says_what_to_set(tmp_path):
    make = lambda: gym.make("Pendulum-v1")  # noqa: E731
    with pytest.raises(ConfigError, match=r"classic.dataset: iql learns from a fixed dataset; set classic.dataset="):
        build("iql", "", make, 10)
    cartpole = cartpole_dataset(tmp_path)
    with pytest.raises(DatasetError, match=r"field 'env_spec': the dataset comes from CartPole-v1, .* Pendulum-v1"):
        build("iql", cartpole, make, 10)
    ctx = ClassicContext(VecEnv(make, 1, 0, normalize_obs=True), 10, 0, torch.device("cpu"), cartpole)
    with pytest.raises(ConfigError, match=r"set classic.normalize_obs=false"):
        CLASSIC.resolve("td3_bc")(ctx)
