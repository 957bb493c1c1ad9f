"""Run names cannot escape `output_dir`, and `--overwrite` (train, compare, export, `pref.overwrite`) deletes only
a folder ascent made: the data-loss cases of the security probe (`name=.` emptied runs/, `name=..` the project,
`ascent export RUN ~ --overwrite` would replace the home directory)."""

from __future__ import annotations

import json

import pytest

from ascent.app.compare import compare
from ascent.app.export import MANIFEST, check_out_dir
from ascent.app.runs import RUN_MARKER, RunDirError, open_run, release_run_dir
from ascent.app.train_pref import check_out
from ascent.config import ConfigError, load_config
from ascent.config.preference import PairsConfig, PrefConfig, PrefJob


@pytest.mark.parametrize("name", [".", "..", "/abs/run_dir", "../escaped_run", "a/../../up2", "a/b", ".hidden"])
def test_a_name_that_is_not_one_folder_is_refused(name):
    with pytest.raises(ConfigError, match="cannot be a run name: use letters, digits"):
        load_config("default", [f"name={name}"])


def test_ordinary_names_pass():
    assert load_config("default", ["name=grpo_lr=3e-5-seed.1"]).name == "grpo_lr=3e-5-seed.1"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_code.py").write_text("precious = True\n")
    precious = tmp_path / "runs" / "precious_run"
    precious.mkdir(parents=True)
    (precious / "state.json").write_text("{}")
    return tmp_path


def test_overwrite_deletes_only_a_folder_ascent_made(project):
    cfg = load_config("default", ["name=mine"])
    run_dir = project / "runs" / "mine"
    open_run(cfg, run_dir, overwrite=False, resume=False)
    release_run_dir(run_dir)
    assert (run_dir / RUN_MARKER).is_file() and (run_dir.stat().st_mode & 0o777) == 0o700  # private
    (run_dir / "state.json").write_text("{}")
    open_run(cfg, run_dir, overwrite=True, resume=False)  # a run ascent made: replaced
    release_run_dir(run_dir)
    assert not (run_dir / "state.json").exists()
    # a folder with state.json that ascent did not mark (here: the parent of the runs, as `name=.` made it)
    (project / "runs" / "state.json").write_text("{}")
    with pytest.raises(RunDirError, match=r"does not look like a run made by ascent \(no \.ascent-run file\)"):
        open_run(cfg, project / "runs" / "precious_run", overwrite=True, resume=False)
    with pytest.raises(RunDirError, match="cannot be a run directory"):
        open_run(cfg, project / "runs" / "..", overwrite=True, resume=False)
    assert (project / "my_code.py").exists() and (project / "runs" / "precious_run" / "state.json").exists()
    (project / "notes").mkdir()
    (project / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(RunDirError, match="holds files that are no ascent run"):
        open_run(cfg, project / "notes", overwrite=True, resume=False)
    assert (project / "notes" / "todo.txt").read_text() == "mine"


def test_a_symlinked_run_directory_is_refused(project):
    (project / "runs" / "link").symlink_to(project / "runs" / "precious_run")
    with pytest.raises(RunDirError, match="is a symbolic link"):
        open_run(load_config("default", ["name=link"]), project / "runs" / "link", overwrite=True, resume=False)
    assert (project / "runs" / "precious_run" / "state.json").exists()


def test_export_overwrite_replaces_only_an_earlier_export(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    run = tmp_path / "runs" / "r"
    with pytest.raises(RunDirError, match=r"is not an earlier export \(no ascent_export.json\)"):
        check_out_dir(home, (run, run / "checkpoints" / "step_000001"), overwrite=True)
    earlier = tmp_path / "export"
    earlier.mkdir()
    (earlier / MANIFEST).write_text(json.dumps({"step": 1}))
    check_out_dir(earlier, (run, run / "checkpoints" / "step_000001"), overwrite=True)  # may be replaced


def test_pref_overwrite_deletes_only_an_earlier_pref_output(tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("keep me")
    job = PrefJob(load_config("default"), PairsConfig(), PrefConfig(out=str(out), overwrite=True))
    with pytest.raises(RunDirError, match="does not look like an output of ascent train-pref"):
        check_out(job)
    assert (out / "todo.txt").read_text() == "keep me"
    (out / RUN_MARKER).write_text("pref\n")
    check_out(job)
    assert not out.exists()


def test_compare_name_cannot_escape(tmp_path):
    with pytest.raises(ConfigError, match=r"--name='\.\.' cannot be a run name"):
        compare("default", [], ["train.optim.lr=1e-4,2e-4"], None, 1, "..", 1, output_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_incontext_name_cannot_escape(tmp_path):
    from ascent.app.incontext import train_incontext

    with pytest.raises(ConfigError, match=r"name='\.\.' cannot be a run name"):
        train_incontext("ad-bandit", [f"output_dir={tmp_path}", "name=.."], overwrite=True)
    assert list(tmp_path.iterdir()) == []


def test_a_run_made_before_the_marker_may_still_be_overwritten(project):
    old = project / "runs" / "old"
    old.mkdir()
    (old / "config.yaml").write_text("name: old\n")
    (old / "state.json").write_text("{}")
    open_run(load_config("default", ["name=old"]), old, overwrite=True, resume=False)
    release_run_dir(old)
    assert (old / RUN_MARKER).is_file() and not (old / "state.json").exists()
    # what name=. left behind (config.yaml and state.json in runs/ itself, named ".") is no such run
    (project / "runs" / "config.yaml").write_text("name: .\n")
    (project / "runs" / "state.json").write_text("{}")
    with pytest.raises(RunDirError, match="does not look like a run made by ascent"):
        open_run(load_config("default", ["name=x"]), project / "runs", overwrite=True, resume=False)
    assert (project / "runs" / "precious_run" / "state.json").exists()
