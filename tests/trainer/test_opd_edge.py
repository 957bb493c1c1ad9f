"""opd and edge inside the RL trainer: opd reads its teacher through distil's state and moves the student towards
it (alone, and with only_failed + rl); edge with its explorer trains on half-conditioned groups."""

from __future__ import annotations

import torch

from tests.trainer.test_learning import save_teacher, seven_task, trainer_for  # noqa: F401  (seven_task: fixture)


def test_opd_moves_the_student_towards_a_saved_teacher(seven_task, tmp_path):  # noqa: F811
    run_dir, _, teacher = save_teacher(seven_task, tmp_path)
    common = ["train.prompts_per_step=8", "rollout.samples_per_prompt=4", "train.optim.lr=3e-3"]
    trainer, policy = trainer_for(seven_task + [f"algorithm.loss=opd(teacher={run_dir})", *common])
    assert type(trainer.states["loss"]).__name__ == "DistilState"  # the shared teacher state, not a copy
    kls = [trainer.step()["loss/opd_kl"] for _ in range(4)]
    assert kls[-1] < kls[0]
    trainer, _ = trainer_for(
        seven_task + [f"algorithm.loss=opd(teacher={run_dir},rl=true,only_failed=true,estimator=sampled)", *common]
    )
    m = trainer.step()
    assert 0.0 <= m["loss/opd_rows"] <= 1.0 and "loss/clip_frac" in m and m["loss/skipped_steps"] == 0


def test_edge_trains_on_half_conditioned_groups(seven_task, tmp_path):  # noqa: F811
    seeds = tmp_path / "experiences.txt"
    seeds.write_text("1+6=7\n3+4=7\n")
    trainer, policy = trainer_for(
        seven_task
        + [
            "algorithm.loss=edge",
            f"rollout.explorer=edge(experiences={seeds})",
            "algorithm.tis_cap=2.0",
            "train.prompts_per_step=4",
            "rollout.samples_per_prompt=4",
            "train.optim.lr=1e-2",
        ]
    )
    before = [p.detach().clone() for p in policy.model.parameters()]
    for _ in range(2):
        m = trainer.step()
        assert m["explore/edge_conditioned"] == 8.0 and m["loss/skipped_steps"] == 0
        assert 0.0 <= m["loss/edge_rows"] <= 0.5 and torch.isfinite(torch.tensor(m["loss/edge_term"]))
    assert any(not torch.equal(a, p) for a, p in zip(before, policy.model.parameters()))
