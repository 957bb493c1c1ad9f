"""The benchmark scripts run end to end on a tiny workload and print what their READMEs promise (their
numbers are measured by hand; here only the fields and the invariants that do not depend on timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def run_script(*args: str) -> list[dict]:
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_rollout_throughput_prints_fp32_and_bf16_rows():
    rows = run_script(
        "benchmarks/rollout_throughput.py",
        "--models",
        "3.17M",
        "--workloads",
        "full64",
        "--prompts",
        "2",
        "--samples",
        "2",
        "--repeats",
        "1",
        "--paired",
        "3",
    )
    assert len(rows) == 1
    r = rows[0]
    assert r["model"] == "3.17M" and r["workload"] == "full64" and r["sequences"] == 4
    assert r["pairs"] == 3  # ABBA pairs: the median per-pair ratio sits inside the pairs' range and quartiles
    assert 0 < r["speedup_paired_min"] <= r["speedup_paired_q1"] <= r["speedup_paired"]
    assert r["speedup_paired"] <= r["speedup_paired_q3"] <= r["speedup_paired_max"]
    assert r["mean_completion_len_ascent"] == r["mean_completion_len_hf"] == 64.0  # EOS ignored: exactly 64 tokens
    for key in (
        "ascent_tokens_per_s",
        "hf_generate_tokens_per_s",
        "ascent_bf16_tokens_per_s",
        "ascent_one_batch_tokens_per_s",
    ):
        assert r[key] > 0
    ours, hf = r["ascent_tokens_per_s"], r["hf_generate_tokens_per_s"]  # each rounded to 0.1, the ratio to 0.001:
    slack = 0.0005 + (ours / hf) * (0.05 / ours + 0.05 / hf) * 1.01  # a slow (loaded) hf rate makes 0.1 matter
    assert abs(r["speedup_vs_hf_generate"] - ours / hf) <= slack
    assert r["malloc"] == "tuned"
    m = r["machine"]  # every figure names where it was measured
    assert m["cpu"] and m["isa"] and m["cpus"] >= 1 and m["torch_threads"] >= 1 and len(m["load"]) == 3


def test_rollout_throughput_speculative_on_a_warm_started_policy(tmp_path):
    """--speculative --warm-steps: the pipeline's warm start trains the scratch model on the recipe's task, the
    rows carry the policy's regime (entropy, sampled-token probability, lengths) and the same tokens as without
    speculation; a second call reuses the run."""
    args = ["benchmarks/rollout_throughput.py", "--speculative", "--models", "3.17M", "--workloads", "natural256"]
    args += ["--prompts", "2", "--samples", "2", "--paired", "1", "--threads", "1", "--warm-steps", "3"]
    args += ["--warm-dir", str(tmp_path)]
    rows = run_script(*args)
    assert len(rows) == 1
    r = rows[0]
    assert r["model"] == "3.17M:bench-warm-default-3.17M-3" and r["sequences"] == 4 and r["identical_sequences"] == 1.0
    assert (tmp_path / "bench-warm-default-3.17M-3" / "warmstart" / "model.safetensors").is_file()
    assert 0 < r["policy_entropy_nats"] < 2.9 and 0 < r["sampled_token_prob"] <= 1  # ln 17 = 2.83
    assert r["length_q1"] <= r["length_median"] <= r["length_q3"] <= r["length_max"] <= 256
    assert r["speedup_speculative"] > 0 and r["policy_params"] > 3_000_000
    assert 0 < r["speculative_decode_steps"] <= r["plain_decode_steps"] <= 256  # each step emits >= 1 token per row
    rerun = run_script(*args[:-4], "--checkpoint", str(tmp_path / "bench-warm-default-3.17M-3"))
    assert (
        rerun[0]["model"] == "bench-warm-default-3.17M-3"
        and rerun[0]["policy_entropy_nats"] == r["policy_entropy_nats"]
    )


def test_native_decode_compares_kernels_and_torch_ops():
    from ascent import kernels

    if kernels.load() is None:
        import pytest

        pytest.skip(f"native kernels unavailable: {kernels.unavailable()}")
    for compare in ("step", "attention"):
        rows = run_script(
            "benchmarks/native_decode.py",
            "--compare",
            compare,
            "--models",
            "3.17M",
            "--prompts",
            "4",
            "--samples",
            "4",
            "--repeats",
            "1",
        )
        assert len(rows) == 1
        r = rows[0]
        assert (r["model"], r["workload"], r["sequences"], r["compare"]) == ("3.17M", "full64", 16, compare)
        assert r["identical_rows"] == 1.0 and r["max_logprob_diff_common"] <= 1e-5  # the same samples either way
        assert r["native_tokens_per_s"] > 0 and r["torch_tokens_per_s"] > 0 and r["ratio_paired"] > 0


def test_step_profile_splits_the_step(tmp_path):
    rows = run_script(
        "benchmarks/step_profile.py",
        "--configs",
        "ascent,ascent-bf16,ascent-plain",
        "--steps",
        "1",
        "--warmup",
        "0",
        "--prompts",
        "2",
        "--samples",
        "2",
        "--tokens",
        "4",
        "--cache",
        str(tmp_path),
    )
    assert [r["config"] for r in rows] == ["ascent", "ascent-bf16", "ascent-plain"]
    assert (rows[0]["shared_prefix"], rows[2]["shared_prefix"], rows[2]["shards"]) == ("on", "off", 1)
    for r in rows:
        assert min(r["rollout"], r["forward"], r["backward"], r["optimizer"], r["recompute"]) > 0  # every hook fired
        assert r["update_other"] >= -1e-3 and r["reward+adv"] >= -1e-3  # hooks inside the update, counted once
    assert rows[0]["mismatch"] <= 1e-4 < rows[1]["mismatch"] < 0.1  # fp32 sampler == learner; bf16 close
    assert rows[2]["mismatch"] <= 1e-4  # the plain learner forward agrees with the sampler too


def test_learner_prefix_times_both_forwards(tmp_path):
    rows = run_script(
        "benchmarks/learner_prefix.py",
        "--workloads",
        "3.17M",
        "--repeats",
        "1",
        "--cache",
        str(tmp_path / "missing" / "cache"),
    )  # created on demand
    assert len(rows) == 1
    r = rows[0]
    assert (r["workload"], r["rows"], r["prompt_len_mean"], r["completion_len_mean"]) == ("3.17M", 128, 7.0, 64.0)
    assert r["shared_update_s"] > 0 and r["plain_update_s"] > 0 and r["ratio_paired"] > 0


def test_seeds_report_tables_and_plots_seeds(tmp_path):
    import json
    import subprocess
    import sys

    runs = []
    for seed, (after, control) in enumerate([(0.40, 0.30), (0.50, 0.36)]):
        run = tmp_path / f"s{seed}"
        run.mkdir()
        summary = {"name": "r", "seed": seed, "steps": 4, "control_kind": "rft"}
        for key, acc in (("before_rl", 0.25), ("after_rl", after), ("control", control)):
            summary.update({f"accuracy_{key}": acc, f"accuracy_{key}_lenient": acc + 0.05})
            summary.update({f"pass@8_{key}": acc + 0.2, f"completion_len_{key}": 30.0 + seed})
        (run / "summary.json").write_text(json.dumps(summary))
        lines = [
            {"phase": p, "step": 2, "eval/accuracy": 0.3, "eval/accuracy_lenient": 0.35} for p in ("rl", "control")
        ]
        # the cut share: high mid-run, low at the end of RL; the control logs none on seed 1
        lines += [{"phase": "rl", "step": i + 1, "rollout/truncated_frac": f} for i, f in enumerate((0.3, 0.05))]
        lines += [{"phase": "control", "step": 4, "rollout/truncated_frac": 0.125}] if seed == 0 else []
        (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        runs.append(str(run))
    plot = tmp_path / "plot.png"
    out = subprocess.run(
        [sys.executable, "benchmarks/seeds_report.py", *runs, "--plot", str(plot)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| strict accuracy | 25.0 ± 0.0 (25.0-25.0) | 45.0 ± 7.1 (40.0-50.0) | 33.0 ± 4.2 (30.0-36.0) |" in out
    assert "| lenient accuracy | 30.0 ± 0.0 (30.0-30.0) | 50.0 ± 7.1 (45.0-55.0) |" in out
    assert "| mean completion tokens | 30.5 | 30.5 | 30.5 |" in out
    assert "| 1 | 25.0 / 30.0 | 50.0 / 55.0 | 36.0 / 41.0 | +14.0 |" in out
    # paired over the two seeds: +10 and +14; bootstrap means of {10, 12, 14}; t with 1 degree of freedom
    assert (
        "RL - control, strict, 2 seeds: +10.0, +14.0; mean +12.00 ± 2.83 (sd), 95% paired bootstrap [+10.00, +14.00], "
        "95% t [-13.41, +37.41]" in out
    )
    assert "RL - control, lenient, 2 seeds: +10.0, +14.0; mean +12.00" in out
    assert "| 0 | 0.05 (max 0.30) | 0.12 (max 0.12) |" in out and "| 1 | 0.05 (max 0.30) | - |" in out
    assert plot.stat().st_size > 10_000


def test_overoptimisation_tables_proxy_and_true_reward_against_kl(tmp_path):
    import json
    import subprocess
    import sys

    run = tmp_path / "rm-run"
    run.mkdir()
    # the proxy rises with the KL while the true reward peaks at step 2 and falls: the table must say so
    steps = [(0.0, -1.0, 0.5), (0.1, 0.0, 0.7), (0.5, 1.0, 0.4), (1.0, 0.8, 0.1)]
    lines = [{"phase": "warmstart", "step": 1}] + [
        {"phase": "rl", "step": i + 1, "kl/ref_k3": kl, "reward/rm:x": p, "reward/exact_answer": t}
        for i, (kl, p, t) in enumerate(steps)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    plot = tmp_path / "o.png"
    cmd = [sys.executable, "benchmarks/overoptimisation.py", str(run), "--proxy", "reward/rm:x"]
    out = subprocess.run(
        [*cmd, "--true", "reward/exact_answer", "--window", "1", "--plot", str(plot)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| rm-run | -1.00 → +1.00 → +0.80 | 0.500 → 0.400 → 0.100 | 1.00 |" in out
    assert plot.stat().st_size > 10_000
    missing = subprocess.run([*cmd, "--true", "reward/nope"], capture_output=True, text=True)
    assert missing.returncode != 0 and "reward/nope" in missing.stderr


def test_offline_vs_d3rlpy_builds_expert_and_dataset_then_scores_ascent(tmp_path):
    import pytest

    pytest.importorskip("minari")
    pytest.importorskip("gymnasium")
    rows = run_script(
        "benchmarks/offline_vs_d3rlpy.py", "--algo", "iql", "--dataset", "pendulum-medium", "--seeds", "2",
        "--steps", "20", "--hidden", "16", "--eval-episodes", "2", "--expert-steps", "200", "--expert-hidden", "16",
        "--data-steps", "300", "--sides", "ascent", "--work", str(tmp_path), "--jobs", "1",
    )  # fmt: skip
    r = rows[-1]
    assert r["transitions"] == 300 and r["seeds"] == 2 and r["steps"] == 20
    a = r["ascent"]
    lo, hi = r["ref_min_score"], r["ref_max_score"]
    by_hand = [100 * (ret - lo) / (hi - lo) for ret in a["returns"]]  # the normalised score of each seed
    assert a["scores"] == pytest.approx(by_hand, abs=0.02) and a["score"] == pytest.approx(sum(by_hand) / 2, abs=0.02)
    assert a["score_ci95"][0] <= a["score"] <= a["score_ci95"][1]
    assert (tmp_path / "runs" / "pendulum-expert" / "summary.json").exists()  # cached for the next run
    assert len(list((tmp_path / "runs" / "pendulum-expert" / "checkpoints").glob("step_*"))) == 10
    assert r["jobs"] == 1
    # by default one run per core: the two seeds train at once, each pinned to a core of its own, same results
    if len(os.sched_getaffinity(0)) >= 2:
        again = run_script(
            "benchmarks/offline_vs_d3rlpy.py", "--algo", "iql", "--dataset", "pendulum-medium", "--seeds", "2",
            "--steps", "20", "--hidden", "16", "--eval-episodes", "2", "--expert-steps", "200", "--expert-hidden",
            "16", "--data-steps", "300", "--sides", "ascent", "--work", str(tmp_path),
        )[-1]  # fmt: skip
        assert again["jobs"] == 2 and again["ascent"]["scores"] == a["scores"]  # two runs: two at once
        cores = [run["core"] for run in again["runs"]["ascent"]]
        assert len(set(cores)) == 2 and set(cores) <= os.sched_getaffinity(0)
    # a diagnostic arm: IQL with d3rlpy's log-std form, its runs under their own names beside the default's
    arm = run_script(
        "benchmarks/offline_vs_d3rlpy.py", "--algo", "iql", "--dataset", "pendulum-medium", "--seeds", "1",
        "--steps", "20", "--hidden", "16", "--eval-episodes", "2", "--expert-steps", "200", "--expert-hidden", "16",
        "--data-steps", "300", "--sides", "ascent", "--work", str(tmp_path), "--ascent-params", "log_std=sigmoid",
    )[-1]  # fmt: skip
    assert arm["ascent_params"] == "log_std=sigmoid" and len(arm["ascent"]["scores"]) == 1
    assert arm["jobs"] == 1  # one run: one at a time, whatever the core count
    (folder,) = (tmp_path / "offline").glob("*-log_std_sigmoid-s0")
    saved = yaml.safe_load((folder / "config.yaml").read_text())["classic"]["algorithm"]
    assert "log_std=sigmoid" in str(saved)  # the run really had the arm's parameter (not only its name)
    too_many = subprocess.run(
        [sys.executable, "benchmarks/offline_vs_d3rlpy.py", "--algo", "iql", "--dataset", "pendulum-medium",
         "--jobs", str(len(os.sched_getaffinity(0)) + 1)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert too_many.returncode == 2 and "--jobs must be 0 (every core) or between 1 and" in too_many.stderr
