"""`ascent compare`: variants x seeds from one shared warm start, aggregated; resumable; bad variants fail early."""

from __future__ import annotations

import json

import pytest
import yaml

from ascent.app.compare import Variant, compare, mean_std, parse_vary, read_variants, results_table
from ascent.config.loader import ConfigError

TINY = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "warmstart.steps=4",
    "warmstart.batch_size=16",
    "warmstart.eval_every=0",
    "train.steps=2",
    "train.eval_every=1",
    "train.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "eval.pass_k=2",
    "data.num_eval=20",
    "data.num_train=200",
]


def test_vary_is_a_cartesian_product_and_file_variants_keep_types(tmp_path):
    vs = parse_vary(["algorithm.advantage=grpo,rloo", "algorithm.clip_high=0.2,0.28"])
    assert len(vs) == 4 and vs[1] == Variant(
        "advantage=grpo,clip_high=0.28", ("algorithm.advantage=grpo", "algorithm.clip_high=0.28")
    )
    (tmp_path / "v.yaml").write_text(
        yaml.safe_dump({"dapo": {"algorithm.clip_high": 0.28, "algorithm.filter": "dapo"}, "grpo": None})
    )
    dapo, grpo = read_variants(tmp_path / "v.yaml")
    assert dapo.overrides == ("algorithm.clip_high=0.28", "algorithm.filter=dapo") and grpo.overrides == ()
    with pytest.raises(ConfigError, match="KEY=V1,V2"):
        parse_vary(["algorithm.advantage"])


def test_vary_splits_values_at_top_level_commas_only(tmp_path):
    vs = parse_vary(["algorithm.advantage=grpo,taco(alpha=0.5, floor=0.2),rloo", "algorithm.loss=ppo_clip,gspo"])
    assert [v.overrides[0] for v in vs[::2]] == [
        "algorithm.advantage=grpo",
        "algorithm.advantage=taco(alpha=0.5, floor=0.2)",
        "algorithm.advantage=rloo",
    ]
    assert vs[2].name == "advantage=taco(alpha=0.5, floor=0.2),loss=ppo_clip"
    assert [v.overrides for v in parse_vary(["algorithm.advantage=taco(alpha=0.5),grpo"])] == [
        ("algorithm.advantage=taco(alpha=0.5)",),
        ("algorithm.advantage=grpo",),
    ]
    with pytest.raises(ConfigError, match="variant 'advantage=taco\\(alpha=-1\\)'"):
        compare("default", [], ["algorithm.advantage=grpo,taco(alpha=-1)"], None, 1, "x", 1, str(tmp_path))


def test_table_reports_mean_std_and_delta_to_the_first_variant():
    assert mean_std([0.5, 0.7]) == pytest.approx((0.6, 0.1414213), rel=1e-5)
    agg = [
        {
            "variant": "grpo",
            "seeds": [0, 1],
            "accuracy_after_rl": {"mean": 0.5, "std": 0.1},
            "seconds_per_rl_step": {"mean": 0.2, "std": 0.0},
        },
        {
            "variant": "rloo",
            "seeds": [0, 1],
            "accuracy_after_rl": {"mean": 0.6, "std": 0.0},
            "seconds_per_rl_step": {"mean": 0.3, "std": 0.0},
        },
    ]
    table = results_table(agg, 0.4)
    assert "| rloo | 0.600 ± 0.000 | +0.100 |" in table and "0.400" in table


def test_bad_variant_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="variant 'advantage=nope'"):
        compare("default", TINY, ["algorithm.advantage=grpo,nope"], None, 1, "bad", 1, str(tmp_path))
    assert not (tmp_path / "bad").exists()


def test_compare_runs_resumes_and_aggregates(tmp_path):
    args = ("default", TINY, ["algorithm.advantage=grpo,rloo"], None, 2, "c", 2, str(tmp_path))
    results = compare(*args)
    root = tmp_path / "c"
    assert [v["variant"] for v in results["variants"]] == ["advantage=grpo", "advantage=rloo"]
    assert len(results["runs"]) == 4 and {r["seed"] for r in results["runs"]} == {0, 1}
    for r in results["runs"]:  # every run starts from the one shared warm start and the same held-out split
        cfg = yaml.safe_load((root / "runs" / r["dir"].split("/")[-1] / "config.yaml").read_text())
        assert cfg["warmstart"]["init_from"] == str((root / "warmstart" / "warmstart").resolve())
        assert cfg["data"]["split_seed"] == 0 and cfg["control"]["enabled"] is False
        assert r["accuracy_before_rl"] == results["warm_start_accuracy"]  # same weights, same held-out set
    assert "acc @ step 1" in (root / "table.md").read_text() and "accuracy_at_step_1" in results["runs"][0]
    assert (root / "table.md").read_text().count("| advantage=") == 2
    png = (root / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000  # a real plot, not an empty or truncated file
    page = (root / "report.html").read_text()
    data = json.loads(page.split('<script id="report-data" type="application/json">')[1].split("</script>")[0])
    for row, agg in zip(data["table"], results["variants"]):
        m, sd = agg["accuracy_after_rl"]["mean"], agg["accuracy_after_rl"]["std"]
        half = 12.7062 * sd / 2**0.5  # Student t, 1 degree of freedom, 97.5%
        assert row["accuracy"] == m and row["lo"] == pytest.approx(m - half, abs=1e-4) and row["seeds"] == 2
        assert row["hi"] == pytest.approx(m + half, abs=1e-4)
    assert [p["k"] for p in data["passk"]] == [[1, 2], [1, 2]] and data["steps"][0]["x"] == [0, 1, 2]
    assert len(data["runs"]) == 4 and all((root / link["href"]).exists() for link in data["runs"])
    # a killed comparison: one run lost its summary (as if killed mid-run); rerunning redoes only that run
    victim = root / "runs" / "advantage=rloo__seed1"
    (victim / "summary.json").unlink()
    kept = {p: p.stat().st_mtime_ns for p in (root / "runs").glob("*/summary.json")}
    again = compare(*args)
    assert (victim / "summary.json").exists()
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())
    assert json.loads((root / "results.json").read_text())["runs"] == again["runs"]
    with pytest.raises(ConfigError, match="different comparison"):
        compare("default", TINY, ["algorithm.advantage=grpo,dr_grpo"], None, 2, "c", 2, str(tmp_path))
