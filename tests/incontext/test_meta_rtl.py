"""Meta-RTL (Fu et al. 2024, arXiv:2409.19075): the task family, the reward (loss difference) sign, the policy
starting uniform, and the weights learned on a tiny run moving to the related source."""

import numpy as np
import pytest
import torch

from ascent.incontext.meta_rtl import SOURCE_NAMES, Domain, MetaRTLParams, WeightPolicy, meta_train, mse, regressor


def test_domain_tasks_and_labels():
    dom = Domain(4, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    w = dom.sample_task("opposite", rng)
    assert np.linalg.norm(w + dom.w0) < 2.0  # around -w0
    x, y = dom.batch("related", dom.w0, 500, rng)
    assert x.shape == (500, 4) and y.shape == (500, 1)
    np.testing.assert_allclose(np.linalg.lstsq(x.numpy(), y.numpy()[:, 0], rcond=None)[0], dom.w0, atol=0.02)
    with pytest.raises(ValueError, match="unknown task kind"):
        dom.sample_task("sine", rng)


def test_a_step_on_the_related_source_earns_a_positive_loss_difference_the_opposite_a_negative_one():
    dom = Domain(8, np.random.default_rng(0))
    rng = np.random.default_rng(2)
    torch.manual_seed(0)
    model = regressor(8)
    params = dict(model.named_parameters())
    xs, ys = dom.batch("target", dom.sample_task("target", rng), 50, rng)
    general = float(mse(model, params, xs, ys).detach())
    diffs = {}
    for kind in ("related", "opposite"):
        x, y = dom.batch(kind, dom.sample_task(kind, rng), 200, rng)
        grads = torch.autograd.grad(mse(model, params, x, y), list(params.values()))
        temporal = {k: v.detach() - 0.05 * g for (k, v), g in zip(params.items(), grads)}
        diffs[kind] = general - float(mse(model, temporal, xs, ys).detach())
    assert diffs["related"] > 0 > diffs["opposite"]


def test_policy_starts_uniform_and_is_seeded():
    pol = WeightPolicy(4, 8, sigma=1e-6)
    w, logp = pol.act(torch.full((4,), 0.25), torch.zeros(4), torch.Generator().manual_seed(0))
    torch.testing.assert_close(w, torch.full((4,), 0.25), atol=1e-5, rtol=0)
    assert logp.requires_grad


def test_learned_weights_favour_the_related_source_over_the_opposite_and_other():
    p = MetaRTLParams(iterations=60, dim=4, batch=10)
    dom = Domain(4, np.random.default_rng(3))
    rng = np.random.default_rng(4)
    shots = dom.batch("target", dom.sample_task("target", rng), p.shots, rng)
    _, used = meta_train(p, dom, shots, 0, learn_weights=True)
    late = used[30:].mean(0)
    assert used.shape == (60, len(SOURCE_NAMES)) and np.allclose(used.sum(1), 1.0, atol=1e-5)
    assert late[0] > late[1] and late[0] > late[2]
    _, uniform = meta_train(p, dom, shots, 0, learn_weights=False)
    assert np.allclose(uniform, 0.25)
