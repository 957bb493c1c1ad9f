"""`ascent report RUN_DIR`: one self-contained `report.html` for a run.

The page needs no network: plotly.js is embedded in it (`plotly.offline.get_plotlyjs()`), and so are the run's
data. Sections: the summary (summary.json), interactive curves (metrics.jsonl: one chart per metric, one
trace per phase), a sample browser (samples.jsonl: filter by phase, step and reward range; clicking a sample
shows its prompt, completion and rewards, and an agent's trajectory turn by turn with the observations), and
the config (config.yaml). The pipeline writes it at the end of every run.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

from ascent.logging import jsonsafe
from ascent.logging.metrics import read_metrics
from ascent.trainer.checkpoint import write_text_atomic
from ascent.trainer.samples import read_samples

CURVES = [
    "reward/mean",
    "reward/std",
    "reward/zero_std_groups_frac",
    "eval/accuracy",
    "eval/accuracy_lenient",
    "kl/ref_k3",
    "policy/entropy",
    "rollout/completion_len_mean",
    "loss/policy",
    "loss/clip_frac",
    "loss/grad_norm",
    "optim/lr",
    "time/step",
    "sft/loss",
]
"""Metrics charted when the run has them, in this order (then up to 8 more of the run's own)."""
MAX_EXTRA_CURVES = 8


PHASE_STEPS = {"warmstart": "warm-start step", "rl": "RL step", "control": "control step"}
"""The x axis of each phase: every phase counts its own steps from 1."""


def x_label(phases: list[str]) -> str:
    """The x-axis title of a chart of these phases' traces.

    >>> x_label(["rl"]), x_label(["warmstart", "rl"])
    ('RL step', 'step within each phase (warm-start step, RL step)')
    """
    names = [PHASE_STEPS.get(p, f"{p} step") for p in phases]
    return names[0] if len(names) == 1 else f"step within each phase ({', '.join(names)})"


def curves(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{"key", "xlabel", "traces": [{"phase", "x", "y"}]}] for the metrics worth a chart."""
    keys = {k for row in metrics for k, v in row.items() if k not in ("phase", "step") and isinstance(v, (int, float))}
    extra = sorted(k for k in keys - set(CURVES) if not k.startswith(("time/", "async/")))[:MAX_EXTRA_CURVES]
    out = []
    for key in [k for k in CURVES if k in keys] + extra:
        traces: dict[str, dict[str, list]] = {}
        for row in metrics:
            if isinstance(row.get(key), (int, float)):
                t = traces.setdefault(row.get("phase", ""), {"x": [], "y": []})
                t["x"].append(row.get("step", 0))
                t["y"].append(row[key])
        out.append(
            {"key": key, "xlabel": x_label(list(traces)), "traces": [{"phase": p, **xy} for p, xy in traces.items()]}
        )
    return out


def report_data(run_dir: Path) -> dict[str, Any]:
    """Everything the page shows, as one JSON-able dict."""
    run_dir = Path(run_dir)
    summary_path, config_path = run_dir / "summary.json", run_dir / "config.yaml"
    metrics_path = run_dir / "metrics.jsonl"
    return {
        "name": run_dir.name,
        "summary": json.loads(summary_path.read_text()) if summary_path.exists() else {},
        "config": config_path.read_text() if config_path.exists() else "",
        "curves": curves(read_metrics(metrics_path) if metrics_path.exists() else []),
        "samples": read_samples(run_dir),
    }


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element (no `</script>` or `<!--` can end it early)."""
    return jsonsafe.dumps(data).replace("<", "\\u003c")


def render(data: dict[str, Any]) -> str:
    """The report page for `report_data(...)`."""
    from plotly.offline import get_plotlyjs

    title = html.escape(f"ascent run: {data['name']}")
    return PAGE.format(title=title, plotly=get_plotlyjs(), data=_script_json(data), style=STYLE, script=SCRIPT)


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write `run_dir/report.html` (or `out`); returns its path."""
    out = Path(out) if out is not None else Path(run_dir) / "report.html"
    text = render(report_data(run_dir))
    write_text_atomic(out, text)
    return out


def interval95(mean: float, std: float, n: int) -> tuple[float, float]:
    """Student-t 95% interval of a mean over n seeds (the mean itself for one seed).

    >>> [round(x, 3) for x in interval95(0.5, 0.1, 3)]
    [0.252, 0.748]
    """
    if n < 2:
        return mean, mean
    from scipy.stats import t

    half = float(t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return mean - half, mean + half


def comparison_data(root: Path, results: dict[str, Any]) -> dict[str, Any]:
    """A comparison's page data: per variant the held-out accuracy with its 95% interval over seeds (the bootstrap
    interval of `aggregate_runs` where results.json has one, else Student t) and its difference to the first
    variant, pass@k for each k evaluated (with its interval), held-out accuracy against RL step (mean over seeds),
    and each run's report."""
    rows, passk, steps = [], [], []
    runs = results.get("runs", [])
    for a in results.get("variants", []):
        n = len(a["seeds"])
        acc = a.get("accuracy_after_rl", {"mean": float("nan"), "std": 0.0})
        lo, hi = (acc["lo"], acc["hi"]) if "lo" in acc else interval95(acc["mean"], acc["std"], n)
        rows.append(
            {"variant": a["variant"], "seeds": n, "accuracy": acc["mean"], "std": acc["std"], "lo": lo, "hi": hi}
            | {
                "interval": "bootstrap" if "lo" in acc else "t",
                "vs_first": a.get("vs_first", {}).get("accuracy_after_rl"),
            }
        )
        ks = sorted(int(k[5:].split("_")[0]) for k in a if k.startswith("pass@") and k.endswith("_after_rl"))
        pk = [a[f"pass@{k}_after_rl"] for k in ks]
        band = {"lo": [m["lo"] for m in pk], "hi": [m["hi"] for m in pk]} if all("lo" in m for m in pk) else {}
        passk.append({"variant": a["variant"], "k": ks, "y": [m["mean"] for m in pk], **band})
        mine = [r for r in runs if r.get("variant") == a["variant"]]
        points: dict[int, list[float]] = {}
        for r in mine:
            if "accuracy_before_rl" in r:
                points.setdefault(0, []).append(r["accuracy_before_rl"])
            for key, v in r.items():
                if key.startswith("accuracy_at_step_"):
                    points.setdefault(int(key.rsplit("_", 1)[1]), []).append(v)
            if "accuracy_after_rl" in r and "steps" in r:
                points.setdefault(int(r["steps"]), []).append(r["accuracy_after_rl"])
        xs = sorted(points)
        steps.append({"variant": a["variant"], "x": xs, "y": [sum(points[x]) / len(points[x]) for x in xs]})
    links = []
    for r in runs:
        report = Path(r["dir"]) / "report.html"
        if report.exists():
            links.append({"run": f"{r['variant']} seed {r['seed']}", "href": os.path.relpath(report, root)})
    return {
        "name": Path(root).name,
        "warm_start_accuracy": results.get("warm_start_accuracy"),
        "table": rows,
        "passk": passk,
        "steps": steps,
        "runs": links,
        "plan": results.get("plan", {}),
    }


def write_comparison_report(root: Path, results: dict[str, Any]) -> Path:
    """Write `root/report.html` for an `ascent compare` comparison; returns its path."""
    from plotly.offline import get_plotlyjs

    data = comparison_data(root, results)
    title = html.escape(f"ascent comparison: {data['name']}")
    text = COMPARE_PAGE.format(
        title=title, plotly=get_plotlyjs(), data=_script_json(data), style=STYLE, script=COMPARE_SCRIPT
    )
    out = Path(root) / "report.html"
    write_text_atomic(out, text)
    return out


STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: .9em; }
td, th { border: 1px solid #ddd; padding: .25em .5em; text-align: left; vertical-align: top; }
#curves { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); gap: .5em; }
.curve { height: 280px; }
.curve-title { font-size: .95em; font-weight: 600; margin: .6em 0 0 .5em; }
#samples-table tbody tr { cursor: pointer; } #samples-table tbody tr:hover { background: #f3f6ff; }
#samples-table td.text { max-width: 40em; white-space: pre-wrap; font-family: monospace; font-size: .85em; }
#sample-detail pre { white-space: pre-wrap; background: #f7f7f7; padding: .5em; }
.turn { border-left: 3px solid #4a7; margin: .4em 0; padding-left: .6em; }
.observation { border-left: 3px solid #aaa; margin: .4em 0 .4em 1.5em; padding-left: .6em; color: #555555; }
.filters label { margin-right: 1em; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{style}</style>
<script>{plotly}</script>
</head><body>
<h1>{title}</h1>
<section><h2>Summary</h2><table id="summary"><tbody></tbody></table></section>
<section><h2>Curves</h2><div id="curves"></div></section>
<section><h2>Samples</h2>
<div class="filters">
<label>phase <select id="phase-filter"></select></label>
<label>step <select id="step-filter"></select></label>
<label>reward &ge; <input id="reward-min" type="number" step="any"></label>
<label>reward &le; <input id="reward-max" type="number" step="any"></label>
<span id="sample-count"></span>
</div>
<table id="samples-table"><thead><tr><th>phase</th><th>step</th><th>group</th><th>sample</th><th>reward</th>
<th>advantage</th><th>tokens</th><th>completion</th></tr></thead><tbody></tbody></table>
<div id="sample-detail"></div>
</section>
<section><h2>Config</h2><pre id="config"></pre></section>
<script id="report-data" type="application/json">{data}</script>
<script>{script}</script>
</body></html>
"""

SCRIPT = r"""
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const el = (tag, props = {}, text) => {
  const e = Object.assign(document.createElement(tag), props);
  if (text !== undefined) e.textContent = text;
  return e;
};
const fmt = (v) => {
  if (v === null || v === undefined) return "-";
  return typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : String(v);
};

const summary = document.querySelector("#summary tbody");
for (const [k, v] of Object.entries(DATA.summary)) {
  const tr = el("tr"); tr.append(el("th", {}, k), el("td", {}, typeof v === "object" ? JSON.stringify(v) : fmt(v)));
  summary.append(tr);
}
document.getElementById("config").textContent = DATA.config;

const curveBox = document.getElementById("curves");
DATA.curves.forEach((c, i) => {
  // the title sits above the chart, outside plotly's area, so the toolbar (top right, on hover) never covers it
  const div = el("div", {id: "curve-" + i, className: "curve"});
  curveBox.append(el("div", {className: "curve-box"}, undefined));
  curveBox.lastChild.append(el("div", {className: "curve-title"}, c.key), div);
  const traces = c.traces.map(t => ({x: t.x, y: t.y, name: t.phase, mode: "lines+markers", type: "scatter"}));
  const layout = {margin: {t: 30, r: 10, b: 45, l: 50}, xaxis: {title: {text: c.xlabel}},
                  showlegend: traces.length > 1};
  Plotly.newPlot(div, traces, layout, {displaylogo: false, responsive: true});
});

const samples = DATA.samples;
const phaseSel = document.getElementById("phase-filter"), stepSel = document.getElementById("step-filter");
const rmin = document.getElementById("reward-min"), rmax = document.getElementById("reward-max");
const addOptions = (sel, values) => {
  sel.append(el("option", {value: ""}, "all"));
  for (const v of values) sel.append(el("option", {value: String(v)}, String(v)));
};
addOptions(phaseSel, [...new Set(samples.map(s => s.phase))]);
addOptions(stepSel, [...new Set(samples.map(s => s.step))].sort((a, b) => a - b));

function showDetail(s) {
  const box = document.getElementById("sample-detail");
  box.replaceChildren();
  box.append(el("h3", {}, `${s.phase} step ${s.step}, group ${s.group}, sample ${s.sample}`));
  box.append(el("p", {}, "rewards: " + Object.entries(s.rewards).map(([k, v]) => `${k} = ${fmt(v)}`).join(", ")
                + `; reward ${fmt(s.reward)}; advantage ${fmt(s.advantage)}; finished ${s.finished}`));
  box.append(el("h4", {}, "prompt"), el("pre", {className: "prompt"}, s.prompt));
  if (s.agent) {
    const traj = el("div", {id: "trajectory"});
    traj.append(el("h4", {}, `trajectory (${s.agent.turns.length} turns, ${s.agent.finish_reason})`));
    s.agent.turns.forEach((t, i) => {
      traj.append(el("div", {className: "turn"}, `turn ${i + 1}: ${t.text}`));
      if (t.observation) traj.append(el("div", {className: "observation"}, t.observation));
    });
    box.append(traj);
  } else {
    box.append(el("h4", {}, "completion"), el("pre", {className: "completion"}, s.completion));
  }
  if (Object.keys(s.fields).length) {
    box.append(el("h4", {}, "fields"), el("pre", {}, JSON.stringify(s.fields, null, 1)));
  }
}

function renderSamples() {
  const body = document.querySelector("#samples-table tbody");
  body.replaceChildren();
  const lo = rmin.value === "" ? -Infinity : Number(rmin.value);
  const hi = rmax.value === "" ? Infinity : Number(rmax.value);
  const shown = samples.filter(s => (!phaseSel.value || s.phase === phaseSel.value)
    && (!stepSel.value || String(s.step) === stepSel.value)
    && ((lo === -Infinity && hi === Infinity) || (s.reward !== null && s.reward >= lo && s.reward <= hi)));
  for (const s of shown) {
    const tr = el("tr");
    for (const v of [s.phase, s.step, s.group, s.sample, fmt(s.reward), fmt(s.advantage), s.completion_tokens])
      tr.append(el("td", {}, String(v)));
    const text = s.completion.length > 300 ? s.completion.slice(0, 300) + "…" : s.completion;
    tr.append(el("td", {className: "text"}, text));
    tr.addEventListener("click", () => showDetail(s));
    body.append(tr);
  }
  document.getElementById("sample-count").textContent = `${shown.length} of ${samples.length} samples`;
}
for (const input of [phaseSel, stepSel, rmin, rmax]) input.addEventListener("input", renderSamples);
renderSamples();
"""

COMPARE_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{style}</style>
<script>{plotly}</script>
</head><body>
<h1>{title}</h1>
<section><h2>Held-out greedy accuracy after RL (mean over seeds, 95% interval)</h2>
<table id="compare-table"><thead><tr><th>variant</th><th>accuracy</th><th>std</th><th>95% interval</th>
<th>&Delta; vs first</th><th>seeds</th></tr></thead><tbody></tbody></table><p id="method"></p><p id="warm"></p>
</section>
<section><h2>Curves</h2><div id="curves"><div id="acc-steps" class="curve"></div><div id="passk" class="curve"></div>
</div></section>
<section><h2>Runs</h2><ul id="runs"></ul></section>
<section><h2>Plan</h2><pre id="plan"></pre></section>
<script id="report-data" type="application/json">{data}</script>
<script>{script}</script>
</body></html>
"""

COMPARE_SCRIPT = r"""
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const el = (tag, props = {}, text) => {
  const e = Object.assign(document.createElement(tag), props);
  if (text !== undefined) e.textContent = text;
  return e;
};
const f3 = (v) => (v === null || v === undefined || Number.isNaN(v)) ? "-" : v.toFixed(3);
const body = document.querySelector("#compare-table tbody");
const base = DATA.table.length ? DATA.table[0].accuracy : 0;
const signed = (v) => (v >= 0 ? "+" : "") + f3(v);
for (const r of DATA.table) {
  const tr = el("tr");
  const d = r.vs_first;
  const delta = d ? `${signed(d.diff)} [${signed(d.lo)}, ${signed(d.hi)}]${d.significant ? " *" : ""}`
                  : signed(r.accuracy - base);
  for (const v of [r.variant, f3(r.accuracy), f3(r.std), `[${f3(r.lo)}, ${f3(r.hi)}]`, delta, String(r.seeds)])
    tr.append(el("td", {}, v));
  body.append(tr);
}
if (DATA.table.length) {
  document.getElementById("method").textContent = DATA.table[0].interval === "bootstrap"
    ? "Intervals: percentile bootstrap over seeds; difference to the first variant: bootstrap over seeds, paired "
      + "by seed; * : its interval excludes 0."
    : "Intervals: Student t over seeds.";
}
if (DATA.warm_start_accuracy !== null) {
  document.getElementById("warm").textContent = `warm start (shared): ${f3(DATA.warm_start_accuracy)}`;
}
const cfg = {displaylogo: false, responsive: true};
const margin = {t: 40, r: 10, b: 40, l: 50};
Plotly.newPlot("acc-steps", DATA.steps.map(s => ({x: s.x, y: s.y, name: s.variant, mode: "lines+markers"})),
  {title: {text: "held-out accuracy vs RL step"}, margin, xaxis: {title: {text: "RL step"}}}, cfg);
const band = (p) => p.lo ? {type: "data", symmetric: false, array: p.hi.map((h, i) => h - p.y[i]),
                            arrayminus: p.y.map((y, i) => y - p.lo[i])} : undefined;
Plotly.newPlot("passk", DATA.passk.map(p => ({x: p.k, y: p.y, name: p.variant, mode: "lines+markers",
                                               error_y: band(p)})),
  {title: {text: "pass@k after RL (95% interval)"}, margin, xaxis: {title: {text: "k"}, type: "log"}}, cfg);
const runs = document.getElementById("runs");
for (const r of DATA.runs) {
  const li = el("li");
  li.append(el("a", {href: r.href}, r.run));
  runs.append(li);
}
document.getElementById("plan").textContent = JSON.stringify(DATA.plan, null, 1);
"""
