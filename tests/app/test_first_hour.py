"""What a new user meets in the first hour (issue 44): silent no-ops refused or said, a resumed run that never
mixes evaluations scored by different rewards, one run per folder, failed starts that leave nothing, one-line
errors for unusable folders and damaged configs, and the results printed at the end."""

from __future__ import annotations

import json
import os

import pytest

from ascent.app.pipeline import train
from ascent.app.runs import RunDirError, open_run, read_run_config, release_run_dir
from ascent.config import ConfigError, load_config
from ascent.tasks import DataError
from ascent.trainer.rl import TrainingError

TINY = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.task=addition(digits=1)",
    "data.num_eval=12",
    "warmstart.steps=2",
    "warmstart.batch_size=8",
    "warmstart.eval_every=0",
    "train.steps=2",
    "train.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
    "rollout.max_new_tokens=3",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "eval.pass_k=0",
    "control.enabled=false",
    "logging.progress=false",
]

GOOD_REWARD = """
def exact(prompts, completions, answer, **fields):
    return [1.0 for _ in completions]  # every completion counts: the tiny model's accuracy is 1 before RL
"""
BROKEN_REWARD = """
def exact(prompts, completions, answer, **fields):
    raise RuntimeError("a bug in my reward")
"""


def tiny(tmp_path, *extra):
    return load_config("default", TINY + [f"output_dir={tmp_path}", *extra])


@pytest.mark.parametrize("advantage", ["grpo", "dr_grpo", "rloo"])
def test_one_sample_per_prompt_with_a_group_baseline_is_refused(advantage):
    with pytest.raises(ConfigError, match=r"samples_per_prompt=1 .*nothing is trained"):
        load_config("default", ["rollout.samples_per_prompt=1", f"algorithm.advantage={advantage}"])


def test_one_sample_per_prompt_with_a_baseline_of_its_own_is_accepted():
    assert load_config("default", ["rollout.samples_per_prompt=1", "algorithm.advantage=reinforce_pp"])
    assert load_config("default", ["rollout.samples_per_prompt=1", "algorithm.loss=a_star_po"])  # regresses on r


def test_zero_rl_steps_report_no_rl_phase(tmp_path, capsys):
    summary = train(tiny(tmp_path, "train.steps=0", "name=zero"))
    assert "accuracy_before_rl" in summary
    assert "accuracy_after_rl" not in summary and "seconds_per_rl_step" not in summary
    assert "train.steps=0: no RL phase" in capsys.readouterr().out


def test_resume_after_a_reward_fix_rescores_the_evaluation_before_rl(tmp_path):
    reward = tmp_path / "my_reward.py"
    reward.write_text(BROKEN_REWARD)
    cfg = tiny(tmp_path, f"reward={reward}:exact", "name=fixed")
    with pytest.raises(TrainingError, match="reward"):
        train(cfg)
    state = json.loads((tmp_path / "fixed" / "state.json").read_text())
    assert state["before"]["accuracy"] == 0.0  # every reward of the pre-RL evaluation failed
    reward.write_text(GOOD_REWARD)  # the error's own advice: fix the reward, then --resume
    resumed = train(run_dir=tmp_path / "fixed", resume=True)
    fresh = train(tiny(tmp_path, f"reward={reward}:exact", "name=fresh"))
    assert fresh["accuracy_before_rl"] == 1.0
    assert resumed["accuracy_before_rl"] == fresh["accuracy_before_rl"]
    assert resumed["accuracy_after_rl"] == fresh["accuracy_after_rl"]


def test_a_run_folder_in_use_is_refused_before_anything_is_written(tmp_path):
    live = tiny(tmp_path, "name=shared")
    run_dir = tmp_path / "shared"
    open_run(live, run_dir, overwrite=False, resume=False)  # a live run: its config.yaml, no state.json yet
    before = (run_dir / "config.yaml").read_text()
    try:
        other = tiny(tmp_path, "name=shared", "train.steps=7")
        with pytest.raises(RunDirError, match="in use by another"):
            train(other, overwrite=True)
        with pytest.raises(RunDirError, match="in use by another"):
            train(run_dir=run_dir, resume=True)
        assert (run_dir / "config.yaml").read_text() == before
    finally:
        release_run_dir(run_dir)
    with pytest.raises(RunDirError, match="already holds a run"):  # its config.yaml makes the folder taken
        train(tiny(tmp_path, "name=shared", "train.steps=7"))


def test_a_failed_start_leaves_nothing_behind(tmp_path):
    with pytest.raises(DataError):
        train(tiny(tmp_path, "name=nodata", "data.task=jsonl", "data.train=missing.jsonl", "data.eval=missing.jsonl"))
    assert not (tmp_path / "nodata").exists()
    train(tiny(tmp_path, "name=nodata", "train.steps=1"))  # and the name is free again


def test_an_output_folder_that_is_a_file_fails_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(RunDirError, match=r"afile is a file, not a folder"):
        train(tiny(tmp_path / "afile" / "runs", "name=x"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_fails_in_one_line(tmp_path):
    out = tmp_path / "ro"
    out.mkdir(mode=0o555)
    with pytest.raises(RunDirError, match="cannot write the run folder"):
        train(tiny(out, "name=x"))


def test_a_damaged_config_yaml_names_the_file_and_line(tmp_path):
    (tmp_path / "config.yaml").write_text("seed: 1\ntrain: {steps: [1, 2\n")
    with pytest.raises(RunDirError, match=r"config\.yaml is not valid YAML \(line \d+, column \d+\)"):
        read_run_config(tmp_path)


def test_a_finished_run_resumed_says_complete_and_prints_its_results(tmp_path, capsys):
    summary = train(tiny(tmp_path, "name=done", "control.enabled=true", "control.kind=imitation"))
    out = capsys.readouterr().out.rstrip().splitlines()
    last = "\n".join(out[-5:])
    assert f"before RL {summary['accuracy_before_rl']:.3f}" in last and "after RL" in last and "control" in last
    assert str(tmp_path / "done" / "report.html") in last
    written = (tmp_path / "done" / "summary.json").stat().st_mtime_ns
    again = train(run_dir=tmp_path / "done", resume=True)
    assert again == summary
    assert (tmp_path / "done" / "summary.json").stat().st_mtime_ns == written
    assert "already complete" in capsys.readouterr().out


def interrupt_at(monkeypatch, phase, step):
    """Press Ctrl-C (a real SIGINT to this process) right after `phase` logs `step`."""
    import signal

    from ascent.logging.metrics import MetricsLogger

    real = MetricsLogger.log

    def log(self, ph, st, metrics):
        real(self, ph, st, metrics)
        if (ph, st) == (phase, step):
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(MetricsLogger, "log", log)


def weights(folder):
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_ctrl_c_in_the_warm_start_saves_and_resumes_exactly(tmp_path, monkeypatch):
    from ascent.app.interrupt import StopRequested

    extra = ["warmstart.steps=6", "warmstart.checkpoint_every=0", "train.steps=0"]
    whole = train(tiny(tmp_path, "name=whole", *extra))
    with monkeypatch.context() as m:
        interrupt_at(m, "warmstart", 3)
        with pytest.raises(StopRequested, match="warmstart step 3"):
            train(tiny(tmp_path, "name=cut", *extra))
    cut = tmp_path / "cut"
    assert (cut / "warmstart_checkpoints").is_dir() and not (cut / "warmstart").exists()
    resumed = train(run_dir=cut, resume=True)
    assert not (cut / "warmstart_checkpoints").exists()
    a, b = weights(tmp_path / "whole" / "warmstart"), weights(cut / "warmstart")
    assert all(torch_equal(a[k], b[k]) for k in a)  # bitwise: the warm start continued where it stopped
    assert resumed["accuracy_before_rl"] == whole["accuracy_before_rl"]
    lines = [json.loads(x) for x in (cut / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if x["phase"] == "warmstart"] == [1, 2, 3, 4, 5, 6]


def torch_equal(x, y):
    import torch

    return torch.equal(x, y)


def test_ctrl_c_in_rl_stops_cleanly_and_prints_the_resume_command(tmp_path, monkeypatch, capsys):
    from ascent.cli import main

    args = TINY + [f"output_dir={tmp_path}", "train.steps=3"]
    whole = train(load_config("default", args + ["name=whole"]))
    with monkeypatch.context() as m:
        interrupt_at(m, "rl", 1)
        code = main(["train", *args, "name=cut"])
    out = capsys.readouterr()
    assert code == 130 and "Traceback" not in out.out + out.err
    assert f"stopped by Ctrl-C at rl step 1 (saved); continue with: ascent train --resume {tmp_path / 'cut'}" in out.out
    assert (tmp_path / "cut" / "checkpoints" / "step_000001").is_dir()
    resumed = train(run_dir=tmp_path / "cut", resume=True)
    a = weights(tmp_path / "whole" / "checkpoints" / "step_000003")
    b = weights(tmp_path / "cut" / "checkpoints" / "step_000003")
    assert all(torch_equal(a[k], b[k]) for k in a)
    assert resumed["accuracy_after_rl"] == whole["accuracy_after_rl"]


VARIED_REWARD = """
def varied(prompts, completions, answer, **fields):
    return [float(len(set(c))) for c in completions]  # differs between samples: the policy moves
"""


def test_the_kl_monitor_measures_from_the_start_of_rl_across_a_resume(tmp_path, monkeypatch):
    """kl/ref_k3 is the KL to the policy at the start of RL, also after a resume. With kl_coef = 0 the reference
    exists for the monitor only; it was once made on first use, after the resume, from the resumed policy."""
    from ascent.app.interrupt import StopRequested

    reward = tmp_path / "varied.py"
    reward.write_text(VARIED_REWARD)
    extra = [f"reward={reward}:varied", "train.steps=3", "train.optim.lr=0.01"]
    assert tiny(tmp_path, *extra).algorithm.kl_coef == 0 and tiny(tmp_path, *extra).train.kl_monitor
    train(tiny(tmp_path, "name=whole", *extra))
    with monkeypatch.context() as m:
        interrupt_at(m, "rl", 2)  # the policy has moved by then (KL 0 at step 2: it first moves in step 2)
        with pytest.raises(StopRequested):
            train(tiny(tmp_path, "name=cut", *extra))
    train(run_dir=tmp_path / "cut", resume=True)

    def kl(run):
        lines = [json.loads(x) for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        return [x["kl/ref_k3"] for x in lines if x["phase"] == "rl" and "kl/ref_k3" in x]

    assert len(kl("whole")) == 3 and kl("whole")[2] > 1e-6
    assert kl("cut") == pytest.approx(kl("whole"), rel=1e-5)


def test_a_log_gets_a_metrics_line_every_log_every_steps(tmp_path, capsys):
    train(tiny(tmp_path, "name=logged", "logging.progress=true", "logging.log_every=2", "warmstart.steps=4"))
    out = capsys.readouterr().out
    for line in ("warmstart step 2/4", "warmstart step 4/4", "rl step 2/2"):
        assert line in out
    assert "warmstart step 1/4" not in out and "warmstart step 3/4" not in out
    first = next(x for x in out.splitlines() if x.startswith("warmstart step 2/4"))
    assert " loss " in first  # the warm start reports its loss, RL its reward
    assert " reward " in next(x for x in out.splitlines() if x.startswith("rl step 2/2"))
    assert "elapsed 0:" in first and "left ~0:" in first


def test_an_evaluation_shows_a_bar_on_a_terminal(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    import ascent.logging.progress as progress
    from ascent.app.pipeline import evaluate, prepare

    cfg = tiny(tmp_path, "name=bar", "eval.pass_k=2", "eval.batch_size=5", "logging.progress=true")
    run, policy = prepare(cfg, tmp_path / "bar", {})
    seen = []
    screen = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=screen, force_terminal=True, width=100))
    real = progress.eval_progress

    @__import__("contextlib").contextmanager
    def spy(label, total, enabled):
        with real(label, total, enabled) as advance:
            yield lambda n: (seen.append(n), advance(n))

    monkeypatch.setattr("ascent.app.pipeline.eval_progress", spy)
    evaluate(run, policy)
    assert seen == [5, 5, 2, 5, 5, 2]  # greedy then pass@k, batch by batch over the 12 held-out rows
    assert "evaluate" in screen.getvalue() and "24/24" in screen.getvalue()


def test_an_export_is_readable_by_every_user_like_a_plain_write(tmp_path):
    import stat

    from ascent.app.export import export

    train(tiny(tmp_path, "name=exp", "train.steps=1"))
    out = export(tmp_path / "exp", tmp_path / "out", False)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    want = stat.S_IMODE(plain.stat().st_mode)  # what this umask gives a file written the ordinary way
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir() if p.is_file()}
    assert "model.safetensors" in modes and set(modes.values()) == {want}, modes


def test_pyproject_declares_its_license_as_an_spdx_expression():
    """setuptools >= 77 prints a deprecation banner for `license = {text = ...}` at every install."""
    import warnings
    from pathlib import Path

    from setuptools.config.pyprojecttoml import read_configuration

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    path = Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert tomllib.loads(path.read_text())["project"]["license"] == "Apache-2.0"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_configuration(path)
    assert not [w for w in caught if "license" in str(w.message).lower()]


def test_make_demo_installs_only_the_core_and_make_test_every_extra(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[2]
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)

    def dry(target):
        done = subprocess.run(["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, check=True)
        return [line for line in done.stdout.splitlines() if "pip install" in line]

    demo = dry("demo")
    assert any(line.endswith("install -q -e .") for line in demo), demo
    assert not any("[" in line or "smollm2" in line for line in demo), demo  # no extras: no W&B, Ray, MuJoCo
    full = " ".join(dry("test"))
    for extra in ("test", "agents", "tracking", "classic", "ray"):
        assert extra in full


def test_report_titles_stay_clear_of_the_toolbar_and_phases_label_the_x_axis(tmp_path):
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium here (make test installs it where it can)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    train(tiny(tmp_path, "name=rep"))  # a warm start and RL: charts with both phases
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto((tmp_path / "rep" / "report.html").as_uri())
        charts = page.locator("#curves .curve")
        assert charts.count() > 3
        mixed = 0
        for i in range(charts.count()):
            chart = charts.nth(i)
            chart.scroll_into_view_if_needed()
            chart.hover()  # plotly shows its toolbar on hover
            bar = chart.locator(".modebar").bounding_box()
            title = page.locator(".curve-title").nth(i).bounding_box()
            assert bar is not None and title is not None
            apart = title["y"] + title["height"] <= bar["y"] or bar["x"] + bar["width"] <= title["x"]
            assert apart or title["x"] + title["width"] <= bar["x"], (i, title, bar)
            xtitle = chart.locator(".g-xtitle").text_content()
            if chart.locator(".scatterlayer .trace").count() > 1:  # warm start and RL in one chart
                mixed += 1
                assert "warm-start step" in xtitle and "RL step" in xtitle
                assert chart.locator(".legend").count() == 1
            else:
                assert xtitle.endswith("step")
        assert mixed >= 1
        browser.close()


def test_a_failed_start_in_an_existing_folder_keeps_what_was_there(tmp_path):
    from ascent.app.runs import make_private_dir

    run_dir = tmp_path / "c"
    make_private_dir(run_dir, "run")  # as `ascent compare` prepares a run: marked, with its log beside
    (run_dir / "stdout.txt").write_text("the subprocess's output\n")
    with pytest.raises(DataError):
        train(tiny(tmp_path, "name=c", "data.task=jsonl", "data.train=missing.jsonl", "data.eval=missing.jsonl"))
    assert sorted(p.name for p in run_dir.iterdir()) == [".ascent-run", "stdout.txt"]


def test_a_recipe_indented_with_tabs_names_the_line_and_the_tab(tmp_path):
    recipe = tmp_path / "tabs.yaml"
    recipe.write_text("train:\n\tsteps: 3\n")
    with pytest.raises(ConfigError, match=r"not valid YAML \(line 2, column 1\): .*spaces, not tabs"):
        load_config(str(recipe), [])


def test_without_a_kl_term_the_reference_runs_once_an_update_for_the_monitor(tmp_path, monkeypatch):
    """kl_coef = 0 and no piece using the reference: the monitor's one reference forward per update (its first
    micro-batch), not one per micro-batch (once the monitor had made the reference, every micro-batch ran it)."""
    from ascent.trainer.learner import Learner

    calls = []
    real = Learner.reference_logprobs
    monkeypatch.setattr(
        Learner, "reference_logprobs", lambda self, mb: calls.append(len(mb.input_ids)) or real(self, mb)
    )
    train(tiny(tmp_path, "name=mb", "train.steps=3", "train.micro_batch_size=1", "train.skip_zero_advantage=false"))
    assert calls == [1, 1, 1]
