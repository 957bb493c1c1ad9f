"""Preference-based offline RL (IPL, the two-stage `pref_iql`, REED) and return-conditioned RL (BR-RCRL, `rcrl`):
the scripted teacher and the losses by hand, learning from preferences alone on a tiny task where cloning is not
enough, invariance to the rewards beyond the labels, REED's representation learning the dynamics, BR-RCRL's adaptive
target, exact resume, and the errors of unusable settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
pytest.importorskip("minari")

from ascent.classic import CLASSIC  # noqa: E402
from ascent.classic.base import ClassicContext  # noqa: E402
from ascent.classic.envs import VecEnv  # noqa: E402
from ascent.offline.br_rcrl import adaptive_bin, discounted_rtg, rtg_bins  # noqa: E402
from ascent.offline.dataset import Episode, write_dataset  # noqa: E402
from ascent.offline.ipl import implied_reward, ipl_critic_loss  # noqa: E402
from ascent.offline.preferences import preference_loss, sample_pairs, segment_starts, teacher_labels  # noqa: E402
from ascent.offline.reed import REEDParams, REEDRewardModel, fit_consistency  # noqa: E402

H = 40


class Bandit(gym.Env):
    """HORIZON-step contextual bandit: s ~ U(-1, 1) each step, reward -(a - s)^2; cloning uniform data scores -1/3."""

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
        return self.draw(), reward, self.t >= H, False, {}


def bandit_dataset(folder, n: int = 2000, reward_factor: float = 1.0) -> str:
    rng = np.random.default_rng(0)
    eps = []
    for _ in range(n // H):
        s = rng.uniform(-1, 1, size=(H + 1, 1)).astype(np.float32)
        a = rng.uniform(-1, 1, size=(H, 1)).astype(np.float32)
        r = reward_factor * -((a - s[:-1]) ** 2)[:, 0]
        eps.append(Episode(s, a, r.astype(np.float32), np.arange(H) == H - 1, np.zeros(H, bool)))
    spaces = (Bandit.observation_space, Bandit.action_space)
    return str(write_dataset(folder, "bandit-v0", eps, None, "uniform", spaces=spaces))


def build(spec: str, dataset: str, total_steps: int, seed: int = 0):
    torch.manual_seed(seed)
    ctx = ClassicContext(VecEnv(Bandit, 1, seed), total_steps, seed, torch.device("cpu"), dataset)
    return CLASSIC.resolve(spec)(ctx)


def train(algo, steps: int) -> dict:
    metrics = {}
    for i in range(steps):
        metrics = algo.iteration(i == steps - 1)
    return metrics


def bandit_score(algo) -> float:
    s = np.linspace(-1, 1, 101, dtype=np.float32)[:, None]
    return float(np.mean(-((algo.act(s, deterministic=True) - s) ** 2)))


# -- the scripted teacher and the losses ---------------------------------------------------------------------------


def test_segments_stay_inside_episodes_and_labels_follow_the_true_returns():
    rewards = np.arange(12, dtype=np.float32)
    lengths = np.array([5, 2, 5])
    starts = segment_starts(lengths, 3)
    assert starts.tolist() == [0, 1, 2, 7, 8, 9]  # the 2-step episode holds no segment of 3
    pairs = sample_pairs(rewards, starts, 200, 3, 0.0, np.random.default_rng(0))
    episode = np.repeat(np.arange(3), lengths)
    assert (episode[pairs.idx] == episode[pairs.idx[..., :1]]).all()  # one episode per segment
    assert np.allclose(pairs.returns, rewards[pairs.idx].sum(-1))
    want = np.where(pairs.returns[:, 0] > pairs.returns[:, 1], 1.0, np.where(pairs.returns[:, 0] < pairs.returns[:, 1],
                                                                             0.0, 0.5))  # fmt: skip
    assert np.array_equal(pairs.label, want)


def test_the_mistaken_teacher_flips_the_requested_share_of_labels():
    returns = np.random.default_rng(1).normal(size=(20000, 2))
    clean = teacher_labels(returns, 0.0, np.random.default_rng(2))
    noisy = teacher_labels(returns, 0.2, np.random.default_rng(2))
    assert np.mean(clean != noisy) == pytest.approx(0.2, abs=0.01)
    assert set(np.unique(noisy)) == {0.0, 1.0}


def test_preference_loss_is_bradley_terry_by_hand():
    logits, label = torch.tensor([2.0, -1.0, 0.5]), torch.tensor([1.0, 0.0, 0.5])
    p = 1 / (1 + np.exp(-logits.numpy().astype(np.float64)))
    want = -np.mean(label.numpy() * np.log(p) + (1 - label.numpy()) * np.log(1 - p))
    assert float(preference_loss(logits, label)) == pytest.approx(want, rel=1e-6)


def test_ipl_logits_sum_the_implied_reward_of_each_critic_by_loop():
    gen = torch.Generator().manual_seed(0)
    q, next_v = torch.randn(2, 2 * 3 * 4 + 5, generator=gen), torch.randn(2 * 3 * 4 + 5, generator=gen)
    term = (torch.rand(2 * 3 * 4 + 5, generator=gen) < 0.2).float()
    r = implied_reward(q, next_v, 0.9, term)
    label = torch.tensor([1.0, 0.0, 1.0])
    pref, chi2, logits = ipl_critic_loss(r, 3, 4, label, 0.5)
    for e in range(2):
        for k in range(3):
            first = sum(float(q[e, k * 8 + t] - 0.9 * (1 - term[k * 8 + t]) * next_v[k * 8 + t]) for t in range(4))
            second = sum(float(q[e, k * 8 + 4 + t] - 0.9 * (1 - term[k * 8 + 4 + t]) * next_v[k * 8 + 4 + t])
                         for t in range(4))  # fmt: skip
            assert float(logits[e, k]) == pytest.approx(first - second, abs=1e-5)
    assert float(chi2) == pytest.approx(0.5 * float((r**2).mean()), rel=1e-6)
    assert float(pref) == pytest.approx(float(preference_loss(logits, label.expand(2, -1))), rel=1e-6)


# -- learning from preferences alone -------------------------------------------------------------------------------

PREF = "n_pairs=300, segment_len=4, eval_pairs=500, hidden=[32, 32], batch_size=128, lr=0.001"


@pytest.mark.parametrize(
    "spec, steps",
    [
        (f"ipl({PREF}, pref_batch=16, gamma=0.5, beta=10.0)", 700),
        (f"ipl({PREF}, pref_batch=16, gamma=0.5, beta=10.0, flip_rate=0.2)", 700),
        (f"pref_iql({PREF}, reward_hidden=[32, 32], reward_steps=400, reward_lr=0.003, gamma=0.5, beta=10.0)", 600),
        (f"reed({PREF}, reward_hidden=[32, 32], reward_steps=400, reward_lr=0.003, ssl_steps=200, gamma=0.5, "
         "beta=10.0)", 600),
    ],
)  # fmt: skip
def test_preference_learners_beat_cloning_from_labels_alone(tmp_path, spec, steps):
    algo = build(spec, bandit_dataset(tmp_path), steps)
    before = bandit_score(algo)
    metrics = train(algo, steps)
    after = bandit_score(algo)
    # cloning the uniform data scores -1/3; the labels say which segments have actions nearer their states
    assert after > -0.1 and after > before + 0.1, (before, after)
    assert metrics["reward_model/heldout_accuracy"] > 0.75, metrics


@pytest.mark.parametrize(
    "spec",
    [f"ipl({PREF}, pref_batch=4)", f"pref_iql({PREF}, reward_hidden=[16], reward_steps=20)"],
)
def test_preference_learners_see_the_labels_not_the_rewards(tmp_path, spec):
    """Tripling every reward keeps every label: the runs must be bit-identical."""
    runs = []
    for factor in (1.0, 3.0):
        algo = build(spec, bandit_dataset(tmp_path / str(factor), reward_factor=factor), 20)
        train(algo, 20)
        runs.append({k: v.clone() for m in algo.modules().values() for k, v in m.state_dict().items()})
    assert runs[0].keys() == runs[1].keys() and all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])


# -- REED's representation -------------------------------------------------------------------------------------------


def test_reed_consistency_task_learns_the_dynamics_without_collapsing():
    """On s' = A s + B a (a rotation plus the action), the predicted next-state embedding must point nearer the true
    next state's embedding than a shuffled one's (a collapsed representation would score both alike)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n = 3000
    s = torch.from_numpy(rng.uniform(-1, 1, (n, 3)).astype(np.float32))
    a = torch.from_numpy(rng.uniform(-1, 1, (n, 1)).astype(np.float32))
    rot = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.5]])
    s2 = s @ rot.T + torch.cat([a, -a, a], -1)
    model = REEDRewardModel(3, 1, REEDParams(reward_hidden=[64, 64], state_embed=32, action_embed=16, projection=16))
    losses = fit_consistency(model, s[:2500], a[:2500], s2[:2500], 600, 128, 1e-3, rng)
    assert np.mean(losses[-50:]) < np.mean(losses[:10]) - 0.2, (losses[:10], losses[-50:])
    with torch.no_grad():
        pred = model.predict(model.project(model.next_state(model.z_sa(s[2500:], a[2500:]))))
        true = model.project(model.state_enc(s2[2500:]))
        shuffled = true[torch.randperm(500, generator=torch.Generator().manual_seed(0))]
        cos = torch.nn.functional.cosine_similarity
        assert float(cos(pred, true).mean()) > float(cos(pred, shuffled).mean()) + 0.2


# -- return-conditioned RL -------------------------------------------------------------------------------------------


def test_rtg_bins_and_the_adaptive_target_by_loop():
    rtg = discounted_rtg(np.array([1.0, 0.0, 2.0, -1.0, 3.0]), np.array([2, 3]), 0.9)
    assert np.allclose(rtg, [1.0, 0.0, 2.0 - 0.9 + 0.81 * 3.0, -1.0 + 2.7, 3.0])
    assert rtg_bins(np.array([-1.0, 0.0, 0.99, 1.0, 2.0]), -1.0, 1.0, 4).tolist() == [0, 2, 3, 3, 3]
    p = torch.softmax(torch.randn(50, 7, generator=torch.Generator().manual_seed(0)), -1)
    for c in (0.05, 0.3, 0.9):
        got = adaptive_bin(p, c).tolist()
        for row, k in zip(p.tolist(), got):
            want = max(j for j in range(7) if sum(row[j:]) >= c - 1e-6)
            assert k == want


@pytest.mark.parametrize(
    "spec, steps",
    [
        ("br_rcrl(hidden=[32, 32], gamma=0.01, n_negatives=16, n_samples=64, lr=0.002)", 400),
        ("rcrl(hidden=[32, 32], gamma=0.01, lr=0.002)", 400),
    ],
)
def test_return_conditioned_policies_beat_cloning_on_the_bandit(tmp_path, spec, steps):
    """With gamma ~ 0 the RTG is the step's reward: conditioning on a high one asks for a ~ s."""
    algo = build(spec, bandit_dataset(tmp_path), steps)
    train(algo, steps)
    assert bandit_score(algo) > -0.08


def test_br_rcrl_adaptive_target_follows_the_state_and_rcrl_target_does_not(tmp_path):
    """The RTG achievable from s differs by state; BR-RCRL's target bin must too, RCRL's stays one number."""
    algo = build("br_rcrl(hidden=[32, 32], gamma=0.01, n_negatives=8, lr=0.002, n_bins=10)", bandit_dataset(tmp_path),
                 300)  # fmt: skip
    train(algo, 300)
    with torch.no_grad():
        s = torch.tensor([[0.0], [1.0]])  # a ~ U(-1, 1): from s = 0 every a loses <= 1, from s = 1 up to 4
        p = torch.softmax(algo.rtg_s((s - torch.from_numpy(algo.obs_mean)) / torch.from_numpy(algo.obs_std)), -1)
        k = adaptive_bin(p, 0.5).tolist()
    assert k[0] > k[1], k


# -- resume and errors -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "algorithm",
    [
        "ipl(hidden=[8],batch_size=16,n_pairs=20,segment_len=5,pref_batch=2,eval_pairs=10)",
        "br_rcrl(hidden=[8],batch_size=16,n_negatives=4,n_samples=8,dfo_iters=1)",
    ],
)
def test_a_preference_or_rtg_run_resumes_exactly(tmp_path, algorithm):
    from safetensors.torch import load_file

    from ascent.app.classic import train_run
    from ascent.config import load_config

    rng = np.random.default_rng(0)
    T = 200
    ep = Episode(rng.normal(size=(T + 1, 3)).astype(np.float32), rng.uniform(-2, 2, (T, 1)).astype(np.float32),
                 rng.normal(size=T).astype(np.float32), np.zeros(T, bool), np.arange(T) == T - 1)  # fmt: skip
    data = str(write_dataset(tmp_path, "pendulum-noise-v0", [ep], "Pendulum-v1", "noise"))
    over = [f"classic.dataset={data}", "classic.env=Pendulum-v1", "classic.total_steps=30",
            f"classic.algorithm={algorithm}", "classic.eval_episodes=1", f"output_dir={tmp_path}",
            "logging.progress=false"]  # fmt: skip
    whole = train_run(load_config("halfcheetah-sac", over + ["name=whole"]))
    assert train_run(load_config("halfcheetah-sac", over + ["name=half"]), stop_at=15) is None
    resumed = train_run(run_dir=tmp_path / "half", resume=True)
    assert resumed["final_returns"] == whole["final_returns"]
    a = load_file(str(tmp_path / "whole/checkpoints/step_000030/model.safetensors"))
    b = load_file(str(tmp_path / "half/checkpoints/step_000030/model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_unusable_preference_settings_fail_with_one_clear_line(tmp_path):
    with pytest.raises(ValueError, match="segment_len=50"):
        build("ipl(hidden=[8], segment_len=50)", bandit_dataset(tmp_path), 1)  # every episode has 40 steps
    with pytest.raises(ValueError, match="flip_rate"):
        CLASSIC.resolve("pref_iql(flip_rate=0.6)")
    with pytest.raises(ValueError, match="threshold"):
        CLASSIC.resolve("br_rcrl(threshold=0.0)")
