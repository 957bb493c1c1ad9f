"""`ascent train ad-darkroom` and `ascent eval-in-context` end to end at a tiny size; config errors."""

import json

import numpy as np
import pytest

from ascent.app.incontext import is_incontext_recipe, load
from ascent.cli import main
from ascent.incontext.experiment import InContextConfig, mean_interval, summarise
from ascent.typed import ConfigError

TINY = [
    "family=darkroom(horizon=5)",
    "histories=4",
    "episodes=4",
    "eval_episodes=6",
    "eval_tasks=3",
    "seeds=[0]",
    "train.steps=3",
    "train.context=20",
    "cache_dir=null",
    "arms=[ad=posterior_sampling,ed=expert,ad_eps=noisy_expert]",
]


def test_train_and_eval_in_context_cli(tmp_path, capsys):
    assert is_incontext_recipe("ad-darkroom") and not is_incontext_recipe("default")
    rc = main(["train", "ad-darkroom", "name=t", f"output_dir={tmp_path}", *TINY])
    assert rc == 0
    run = tmp_path / "t"
    summary = json.loads((run / "summary.json").read_text())
    for key in ("return_optimal", "return_first5_ad", "return_last5_ad", "return_last5_ed", "return_last5_ad_eps"):
        assert key in summary
    assert set(summary["curves"]) == {"ad", "ed", "ad_eps", "source"} and len(summary["curves"]["ad"]) == 6
    assert len(summary["seconds_ad"]) == 3 and summary["loss_last_ad"] > 0  # data, training, evaluation seconds
    assert (run / "curves.png").exists() and len(list((run / "models").glob("*.safetensors"))) == 3
    capsys.readouterr()
    assert main(["eval-in-context", str(run), "eval_episodes=4"]) == 0
    out = capsys.readouterr().out
    assert "optimal return" in out and len([ln for ln in out.splitlines() if ln.strip()[:1].isdigit()]) == 4
    # the same saved models and seeds give the same in-context returns as the training run's evaluation
    again = json.loads((run / "summary.json").read_text())["curves"]["ad"][:4]
    assert main(["eval-in-context", str(run), "eval_episodes=6"]) == 0
    assert [round(r[0], 2) for r in again] == [float(x.split()[1]) for x in capsys.readouterr().out.splitlines()[2:6]]


def test_eval_in_context_rejects_other_dirs(tmp_path, capsys):
    assert main(["eval-in-context", str(tmp_path)]) == 2
    assert "not an in-context run directory" in capsys.readouterr().err


def test_config_errors_are_one_line():
    with pytest.raises(ConfigError, match="not name=source"):
        load("ad-darkroom", ["arms=[ad]"])
    with pytest.raises(ConfigError, match="unknown in-context source"):
        load("ad-darkroom", ["arms=[ad=ppo]"])
    with pytest.raises(ConfigError, match="valid keys"):
        load("ad-darkroom", ["train.stepz=3"])
    name, out, cfg = load("ad-darkroom", ["train.steps=7", "name=x"])
    assert (name, cfg.train.steps) == ("x", 7) and isinstance(cfg, InContextConfig)


def test_summary_intervals_by_hand():
    m, lo, hi = mean_interval(np.array([1.0, 2.0, 3.0]))
    assert m == 2.0 and hi - m == pytest.approx(4.302653 * 1 / np.sqrt(3), rel=1e-5)  # t(0.975, 2) * s / sqrt(n)
    cfg = InContextConfig(arms=["ad=expert"], source_control=False, eval_tasks=2, seeds=[0, 1])
    per_seed = [{"ad": np.array([[1.0] * 6, [3.0] * 6])}, {"ad": np.array([[2.0] * 6, [2.0] * 6])}]
    s = summarise(cfg, per_seed)
    assert s["return_first5_ad"] == 2.0 and s["return_last5_ad_ci95"] == [2.0, 2.0]
    assert "seconds_ad" not in s and "loss_last_ad" not in s  # only where every seed carries them
    per_seed[0].update(seconds_ad=[1.0, 10.0, 2.0], loss_ad=[9.0] * 10 + [1.0] * 50)
    per_seed[1].update(seconds_ad=[3.0, 20.0, 4.0], loss_ad=[2.0] * 50)
    s = summarise(cfg, per_seed)  # data, training, evaluation seconds summed over seeds; last-50 loss, seed mean
    assert s["seconds_ad"] == [4.0, 30.0, 6.0] and s["loss_last_ad"] == 1.5
