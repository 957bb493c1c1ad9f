"""report.html: self-contained, carries the run's data, and works in a real browser (Debian's Chromium driven
by Playwright: curves render, samples filter, an agent trajectory opens turn by turn, no console errors)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ascent.app.pipeline import train
from ascent.app.report import _script_json, report_data, write_comparison_report
from ascent.cli import main
from ascent.config import load_config
from ascent.trainer.samples import read_samples
from tests.trainer.test_resume import TINY

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
AGENT_REWARD = """
def has_a(prompts, completions, agent_turn_texts, **fields):
    return [float("a" in texts[0]) if texts else 0.0 for texts in agent_turn_texts]
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A single-turn run and an agent run, each with samples logged every step."""
    root = tmp_path_factory.mktemp("report")
    cfg = load_config("default", TINY + [f"output_dir={root}", "name=single", "logging.samples_every=1"])
    train(cfg)
    reward = root / "agent_reward.py"
    reward.write_text(AGENT_REWARD)
    from tests.agents.test_agent_training import TINY as AGENT_TINY

    over = AGENT_TINY + [f"reward={reward}:has_a", f"output_dir={root}", "name=agent", "train.steps=2"]
    train(load_config("search-agent", over + ["logging.samples_every=1", "data.num_eval=2"]))
    return root / "single", root / "agent"


def embedded(page: str) -> dict:
    m = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_every_run_writes_a_self_contained_report(runs):
    single, _ = runs
    page = (single / "report.html").read_text()
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", page, flags=re.S)  # the tags, not the code
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)\s*=", markup), "nothing loaded from elsewhere"
    assert "Plotly" in page and len(page) > 1_000_000  # plotly.js is inside
    data = embedded(page)
    assert data == json.loads(json.dumps(report_data(single)))
    assert data["samples"] == read_samples(single) and len(data["samples"]) == 4 * 16  # 4 steps x 16 samples
    keys = [c["key"] for c in data["curves"]]
    assert keys[0] == "reward/mean" and "loss/grad_norm" in keys
    reward = next(c for c in data["curves"] if c["key"] == "reward/mean")
    assert [t["phase"] for t in reward["traces"]] == ["rl"] and reward["traces"][0]["x"] == [1, 2, 3, 4]
    assert data["summary"]["steps"] == 4 and "train:" in data["config"]


def test_text_cannot_break_out_of_the_data_script():
    nasty = {"completion": "</script><script>alert(1)</script><!--"}
    text = _script_json(nasty)
    assert "<" not in text and json.loads(text) == nasty


def test_cli_report(runs, tmp_path, capsys):
    single, _ = runs
    out = tmp_path / "r.html"
    assert main(["report", str(single), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and embedded(out.read_text())["name"] == "single"
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def browser_or_skip():
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine: `apt-get install chromium` (make test does it where it runs as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -e '.[test]'")
    return sync_playwright


def open_report(p, path: Path):
    browser = p.chromium.launch(
        executable_path=CHROMIUM,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
    )
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#curves .main-svg")
    return browser, page, errors


def test_report_in_a_real_browser(runs):
    sync_playwright = browser_or_skip()
    single, agent = runs
    with sync_playwright() as p:
        browser, page, errors = open_report(p, single / "report.html")
        n_curves = len(embedded((single / "report.html").read_text())["curves"])
        assert page.locator("#curves .curve").count() == n_curves
        assert page.locator("#curves .curve .main-svg").count() >= n_curves  # plotly drew every chart
        assert page.locator("#curve-0 .scatterlayer .trace").count() == 1  # the rl trace of reward/mean
        rows = page.locator("#samples-table tbody tr")
        assert rows.count() == 64 and page.inner_text("#sample-count") == "64 of 64 samples"
        page.select_option("#step-filter", "3")
        assert rows.count() == 16
        assert {page.inner_text(f"#samples-table tbody tr:nth-child({i}) td:nth-child(2)") for i in (1, 16)} == {"3"}
        page.fill("#reward-min", "0.5")
        shown = [float(x) for x in page.locator("#samples-table tbody tr td:nth-child(5)").all_inner_texts()]
        assert all(r >= 0.5 for r in shown)
        rewards = [s["reward"] for s in read_samples(single) if s["step"] == 3]
        assert len(shown) == sum(r is not None and r >= 0.5 for r in rewards)
        page.select_option("#step-filter", "")
        page.fill("#reward-min", "")
        rows.first.click()
        assert page.inner_text("#sample-detail h3").startswith("rl step 1, group 0, sample 0")
        assert page.inner_text("#sample-detail pre.completion") == read_samples(single)[0]["completion"]
        browser.close()
        assert errors == []

        browser, page, errors = open_report(p, agent / "report.html")
        first = read_samples(agent)[0]
        page.locator("#samples-table tbody tr").first.click()
        turns = page.locator("#trajectory .turn")
        assert turns.count() == len(first["agent"]["turns"]) >= 1
        assert turns.first.inner_text() == f"turn 1: {first['agent']['turns'][0]['text']}"
        observed = [t["observation"] for t in first["agent"]["turns"] if t["observation"]]
        assert page.locator("#trajectory .observation").count() == len(observed)
        browser.close()
        assert errors == []


def test_comparison_report_in_a_real_browser(runs, tmp_path):
    sync_playwright = browser_or_skip()
    single, _ = runs
    run_dirs = []
    for variant in ("advantage=grpo", "advantage=rloo"):
        for seed in (0, 1):
            d = tmp_path / "runs" / f"{variant}__seed{seed}"
            d.mkdir(parents=True)
            shutil.copy(single / "report.html", d / "report.html")
            run_dirs.append((variant, seed, d))
    runs_rows = [
        {"variant": v, "seed": s, "dir": str(d), "steps": 4, "accuracy_before_rl": 0.5, "accuracy_at_step_2": 0.6}
        | {"accuracy_after_rl": 0.7 + 0.1 * s}
        for v, s, d in run_dirs
    ]
    agg = {"accuracy_after_rl": {"mean": 0.75, "std": 0.0707}, "pass@1_after_rl": {"mean": 0.6, "std": 0.0}}
    agg |= {"pass@4_after_rl": {"mean": 0.9, "std": 0.0}}
    variants = [{"variant": v, "seeds": [0, 1], **agg} for v in ("advantage=grpo", "advantage=rloo")]
    out = write_comparison_report(tmp_path, {"variants": variants, "runs": runs_rows, "warm_start_accuracy": 0.5})
    with sync_playwright() as p:
        browser, page, errors = open_report(p, out)
        assert page.locator("#compare-table tbody tr").count() == 2
        cells = page.locator("#compare-table tbody tr").first.locator("td").all_inner_texts()
        assert cells[:2] == ["advantage=grpo", "0.750"] and cells[3] == "[0.115, 1.385]"  # 0.75 ± 12.706·0.0707/√2
        assert page.locator("#acc-steps .scatterlayer .trace").count() == 2
        assert page.locator("#passk .scatterlayer .trace").count() == 2
        links = page.locator("#runs a")
        assert links.count() == 4
        links.first.click()
        page.wait_for_selector("#curves .main-svg")  # the run's own report opens from the comparison
        assert page.inner_text("h1") == "ascent run: single"
        browser.close()
        assert errors == []


def test_comparison_report_shows_bootstrap_intervals_and_significance(tmp_path):
    sync_playwright = browser_or_skip()
    from tests.app.test_compare import fake_comparison

    results = fake_comparison(tmp_path).report()
    with sync_playwright() as p:
        browser, page, errors = open_report(p, tmp_path / "report.html")
        rows = page.locator("#compare-table tbody tr")
        better = results["variants"][1]
        acc, d = better["accuracy_after_rl"], better["vs_first"]["accuracy_after_rl"]
        cells = rows.nth(1).locator("td").all_inner_texts()
        assert cells[3] == f"[{acc['lo']:.3f}, {acc['hi']:.3f}]"
        assert cells[4] == f"+{d['diff']:.3f} [+{d['lo']:.3f}, +{d['hi']:.3f}] *"
        assert not rows.nth(2).locator("td").all_inner_texts()[4].endswith("*")
        assert "percentile bootstrap" in page.inner_text("#method")
        assert page.locator("#passk .scatterlayer .trace").count() == 3
        assert page.locator("#passk .errorbar").count() == 3 * 3  # an interval at each k of each variant
        browser.close()
        assert errors == []


def test_summary_table_names_the_warm_start_only_when_rl_started_from_one():
    """The first column said "before RL (warm start)" for every run, also for a recipe with no warm start (the
    smollm2-gsm8k runs); it says so only when there was one."""
    from ascent.app.pipeline import print_summary
    from ascent.logging.metrics import console

    summary = {
        "accuracy_before_rl": 0.018,
        "accuracy_after_rl": 0.011,
        "control_kind": "rft",
        "accuracy_control": 0.026,
    }
    for warm, expected in ((False, False), (True, True)):
        with console.capture() as cap:
            print_summary(summary, warm_start=warm)
        text = cap.get()
        assert "before RL" in text and ("(warm start)" in text) is expected
