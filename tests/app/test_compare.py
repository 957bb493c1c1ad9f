"""`ascent compare`: variants x seeds from one shared warm start, aggregated; resumable; bad variants fail early."""

from __future__ import annotations

import json

import pytest
import yaml

from ascent.app.compare import (
    Comparison,
    Plan,
    Variant,
    compare,
    mean_std,
    parse_vary,
    read_variants,
    results_table,
)
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
    main_table, *_ = (root / "table.md").read_text().split("\n\n")  # then the differences to the first variant
    assert main_table.count("| advantage=") == 2 and "too narrow to trust" in (root / "table.md").read_text()
    png = (root / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000  # a real plot, not an empty or truncated file
    page = (root / "report.html").read_text()
    data = json.loads(page.split('<script id="report-data" type="application/json">')[1].split("</script>")[0])
    for row, agg in zip(data["table"], results["variants"]):  # the page shows the bootstrap interval of results.json
        acc = agg["accuracy_after_rl"]
        assert row["accuracy"] == acc["mean"] and (row["lo"], row["hi"]) == (acc["lo"], acc["hi"]) and row["seeds"] == 2
        assert acc["lo"] <= acc["mean"] <= acc["hi"] and row["interval"] == "bootstrap"
    assert set(results["variants"][1]["vs_first"]) == {"accuracy_after_rl", "pass@1_after_rl", "pass@2_after_rl"}
    assert [p["k"] for p in data["passk"]] == [[1, 2], [1, 2]] and data["steps"][0]["x"] == [0, 1, 2]
    assert (root / "pass_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
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


def fake_comparison(root, seeds=(0, 1, 2, 3, 4)):
    """Three variants x 5 seeds of hand-written summaries: `better` beats `base` by 0.04 at every seed (give or take
    0.01), `same` is `base` plus noise symmetric about 0; the seed moves all three alike (same data order)."""
    seed_effect = [0.30, 0.45, 0.38, 0.52, 0.41]
    shift = {"base": [0.0] * 5, "better": [0.05, 0.035, 0.04, 0.045, 0.03], "same": [0.02, -0.02, 0.01, -0.01, 0.0]}
    plan = Plan("default", [], [Variant(n, ()) for n in shift], list(seeds), 0)
    for name, d in shift.items():
        for i, seed in enumerate(seeds):
            acc = seed_effect[i] + d[i]
            summary = {"seed": seed, "steps": 10, "accuracy_before_rl": 0.2, "accuracy_after_rl": acc}
            summary |= {"pass@1_after_rl": acc - 0.05, "pass@4_after_rl": acc + 0.1, "pass@16_after_rl": acc + 0.2}
            summary |= {"seconds_per_rl_step": 0.5, "peak_rss_mb": 900.0}
            run = root / "runs" / f"{name}__seed{seed}"
            run.mkdir(parents=True)
            (run / "summary.json").write_text(json.dumps(summary))
    return Comparison(plan, root, log=lambda _: None)


def test_report_marks_significant_differences_to_the_first_variant(tmp_path):
    results = fake_comparison(tmp_path).report()
    base, better, same = results["variants"]
    assert "vs_first" not in base and results["bootstrap"] == {"resamples": 10_000, "level": 0.95, "seed": 0}
    keys = ["accuracy_after_rl", "pass@1_after_rl", "pass@4_after_rl", "pass@16_after_rl"]
    for k in keys:
        assert base[k]["lo"] < base[k]["mean"] < base[k]["hi"]
        assert better["vs_first"][k]["significant"] and better["vs_first"][k]["paired"]
        assert better["vs_first"][k]["diff"] == pytest.approx(0.04) and better["vs_first"][k]["lo"] > 0
        assert not same["vs_first"][k]["significant"] and same["vs_first"][k]["lo"] < 0 < same["vs_first"][k]["hi"]
    assert "seconds_per_rl_step" not in better["vs_first"] and "lo" not in better["seconds_per_rl_step"]
    table = (tmp_path / "table.md").read_text()
    rows = {line.split(" | ")[0][2:]: line for line in table.splitlines() if line.startswith("| ")}
    d = better["vs_first"]["accuracy_after_rl"]
    assert f"| +{d['diff']:.3f} [+{d['lo']:.3f}, +{d['hi']:.3f}] * |" in rows["better"]
    assert rows["better"].count(" *") == 4 and " *" not in rows["same"] and " *" not in rows["base"]
    assert "| variant | greedy acc | pass@1 | pass@4 | pass@16 |" in table and "paired by seed" in table
    assert f"| {base['pass@4_after_rl']['mean']:.3f} [{base['pass@4_after_rl']['lo']:.3f}," in rows["base"]
    assert "too narrow" not in table  # 5 seeds
    assert (tmp_path / "pass_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "report.html").read_text()
    data = json.loads(page.split('<script id="report-data" type="application/json">')[1].split("</script>")[0])
    assert data["passk"][1]["k"] == [1, 4, 16] and data["passk"][1]["lo"][1] == better["pass@4_after_rl"]["lo"]
    assert data["table"][1]["vs_first"]["significant"] and not data["table"][2]["vs_first"]["significant"]
    again = fake_comparison(tmp_path / "again").report()  # seeded resampling: the same table every time
    assert again["variants"] == results["variants"]


def test_unmatched_seeds_fall_back_to_an_unpaired_difference(tmp_path):
    comparison = fake_comparison(tmp_path)
    runs = [json.loads(p.read_text()) | {"variant": p.parent.name.split("__")[0]} for p in tmp_path.glob("runs/*/*")]
    for r in runs:
        r["seed"] += 10 * (r["variant"] == "better")  # as if `better` ran other seeds
    from ascent.app.compare import aggregate_runs

    aggs = aggregate_runs(runs, [v.name for v in comparison.plan.variants])
    d = aggs[1]["vs_first"]["accuracy_after_rl"]
    assert not d["paired"] and not d["significant"]  # the seeds' spread (0.30 .. 0.52) hides a 0.04 shift
    assert "unpaired (other seeds than base): better." in results_table(aggs, None)


def test_report_and_plots_without_the_before_evaluation(tmp_path):
    """Runs made with eval.before=false have no accuracy_before_rl: the table and the curves still come out."""
    comp = fake_comparison(tmp_path)
    for run in (tmp_path / "runs").iterdir():
        summary = json.loads((run / "summary.json").read_text())
        del summary["accuracy_before_rl"]
        (run / "summary.json").write_text(json.dumps(summary))
        lines = [{"phase": "rl", "step": s, "reward/mean": 0.1 * s} for s in range(1, 11)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    results = comp.report()
    assert [v["variant"] for v in results["variants"]] == ["base", "better", "same"]
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_threads_override_wins_over_the_jobs_share(tmp_path):
    """`--jobs N` gives each run cpu_count / N torch threads, unless the user's overrides (or a variant's) set
    `threads`: theirs is what runs (it used to be appended after the overrides and silently replaced them)."""
    import os

    plan = Plan("default", [], [Variant("a", ())], [0], 0, jobs=1)
    c = Comparison(plan, tmp_path, log=lambda _: None)
    run = tmp_path / "runs" / "a__seed0"
    cmd = c.command(run, ["train.steps=2", "seed=0"])
    assert cmd[:3] == ["train", "default", f"threads={max(1, os.cpu_count() or 1)}"]
    cmd = c.command(run, ["threads=1", "seed=0"])
    assert [a for a in cmd if a.startswith("threads=")] == ["threads=1"]
    run.mkdir(parents=True)
    (run / "state.json").write_text("{}")
    assert c.command(run, ["threads=1"]) == ["train", "--resume", str(run)]
    assert c.command(run, []) == ["train", "--resume", str(run), f"threads={max(1, os.cpu_count() or 1)}"]
