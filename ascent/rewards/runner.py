"""Score completions with one or several reward functions, robustly.

A reward that raises, hangs past its timeout, returns the wrong number of values, or returns anything but a
finite real number or None (NaN, inf, 10**400, the string "1.0", True) does not crash the run: the affected
samples are recorded as failed (`valid` false, counted in metrics, the first error of each reward logged once
with its traceback) and leave the loss. Rewards get copies of the prompts, completions and fields; a call that
times out is stopped (a thread spinning in Python code gets an exception; a stateless reward that timed out
runs in a killable worker process from then on).
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import importlib.util
import inspect
import logging
import math
import pickle
import queue
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ascent.rewards.builtin import REWARDS
from ascent.typed import ConfigError, parse_spec

log = logging.getLogger(__name__)
RewardFn = Callable[..., list]


class RewardSpecError(ValueError):
    """A reward spec that cannot be resolved."""


def parse_spec_args(spec: str) -> tuple[str, dict[str, Any]]:
    """`name(key=value, ...)` -> (name, {key: value}); values are Python literals (numbers, strings, lists), or,
    when the arguments are not all Python literals, the YAML scalars of piece specs (bare words and paths).

    >>> parse_spec_args("overlong(max_len=64, cache_len=16)")
    ('overlong', {'max_len': 64, 'cache_len': 16})
    >>> parse_spec_args("exact_answer")
    ('exact_answer', {})
    >>> parse_spec_args("rm_online(path=/tmp/rm, label_noise=0.2)")
    ('rm_online', {'path': '/tmp/rm', 'label_noise': 0.2})
    """
    spec = spec.strip()
    if not spec.endswith(")") or "(" not in spec:
        return spec, {}
    name, _, args = spec[:-1].partition("(")
    try:
        call = ast.parse(f"f({args})", mode="eval").body
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError) as err:
        try:
            return parse_spec(spec)  # bare words and paths: judge(model=smollm2), rm_online(path=out/rm)
        except ConfigError:
            raise RewardSpecError(
                f"reward spec {spec!r}: arguments must be key=value pairs, e.g. overlong(max_len=64): {err}"
            ) from err
    if call.args or any(k is None for k in kwargs):
        raise RewardSpecError(f"reward spec {spec!r}: arguments must be named (key=value)")
    return name.strip(), kwargs


def resolve_reward(spec: str) -> RewardFn:
    """A registered name, `package.module:function`, `path/to/file.py:function` or `rm:PATH` (a reward model
    trained by `ascent train-rm`) -> the callable;
    any of them may carry keyword arguments, `name(key=value, ...)`, bound with functools.partial
    (an unknown keyword fails here, not at the first step). A class (a stateful reward such as `trace`)
    is instantiated with the keywords: each runner gets its own instance and state."""
    name, kwargs = parse_spec_args(spec)
    if name.startswith("rm:"):  # a trained reward model's folder: `rm:PATH` = `reward_model(path=PATH)`
        name, kwargs = "reward_model", {"path": name[len("rm:") :], **kwargs}
    fn = _resolve_callable(name)
    if isinstance(fn, type):  # a stateful reward (e.g. `trace`): one fresh instance per runner, knobs to __init__
        _check_kwargs(name, fn.__init__, kwargs)
        return fn(**kwargs)
    if not kwargs:
        return fn
    _check_kwargs(name, fn, kwargs)
    bound = functools.partial(fn, **kwargs)
    bound.__name__ = name  # type: ignore[attr-defined]
    return bound


def _check_kwargs(name: str, fn: Callable, kwargs: dict[str, Any]) -> None:
    """Fail now when the spec names a keyword `fn` does not take."""
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in kwargs if k not in params and not takes_any]
    if unknown or any(k in params and params[k].kind is inspect.Parameter.VAR_KEYWORD for k in kwargs):
        raise RewardSpecError(
            f"reward {name!r} takes no argument {unknown[0] if unknown else list(kwargs)[0]!r}; "
            f"its parameters: {', '.join(p for p in params if p != 'self')}"
        )


def _resolve_callable(spec: str) -> RewardFn:
    if spec in REWARDS:
        return REWARDS.get(spec)
    if ":" not in spec:
        raise RewardSpecError(
            f"unknown reward {spec!r}; use a registered name ({', '.join(REWARDS.names())}), "
            "package.module:function or file.py:function"
        )
    target, _, name = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target)
        if not path.exists():
            raise RewardSpecError(f"reward file {target!r} does not exist")
        mod_spec = importlib.util.spec_from_file_location(f"ascent_user_reward_{path.stem}", path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = module  # dataclasses and pickling look their module up here
        try:
            mod_spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[mod_spec.name]
            raise RewardSpecError(f"reward file {target!r} failed to import: {type(err).__name__}: {err}") from err
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise RewardSpecError(f"reward module {target!r} cannot be imported: {err}") from err
    fn = getattr(module, name, None)
    if not callable(fn):
        raise RewardSpecError(f"{target!r} has no callable {name!r}")
    return fn


class RewardTimeout(BaseException):
    """Raised inside a reward's thread once its call has timed out (see `call_with_timeout`)."""


def _stop_thread(thread: threading.Thread) -> None:
    """Ask the interpreter to raise RewardTimeout in `thread` at its next bytecode: ends a reward spinning in
    Python code; one blocked inside a C call (a sleep, a regex) is reached only when that call returns."""
    import ctypes

    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(RewardTimeout))


def call_with_timeout(fn: Callable, timeout_s: float, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """Run fn in a daemon thread: ("ok", result), ("error", traceback text) or ("timeout", None).

    A daemon thread, so a reward that never returns cannot keep the process from exiting; on timeout the thread
    is stopped at its next Python bytecode (`_stop_thread`), so a spinning reward does not keep running.
    """
    box: queue.Queue = queue.Queue(maxsize=1)

    def target() -> None:
        try:
            box.put(("ok", fn(*args, **kwargs)))
        except RewardTimeout:
            pass
        except BaseException:  # noqa: BLE001 - everything a user function raises is recorded
            box.put(("error", traceback.format_exc()))

    thread = threading.Thread(target=target, name=f"reward-{getattr(fn, '__name__', 'fn')}", daemon=True)
    thread.start()
    try:
        return box.get(timeout=timeout_s)
    except queue.Empty:
        _stop_thread(thread)
        return "timeout", None


def _in_child(conn: Any, fn: Callable, args: tuple, kwargs: dict) -> None:
    try:
        conn.send(("ok", fn(*args, **kwargs)))
    except BaseException:  # noqa: BLE001
        conn.send(("error", traceback.format_exc()))


def call_in_process(fn: Callable, timeout_s: float, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """`call_with_timeout` in a forked worker process that is killed at the timeout: for a reward that timed out
    before, so that a reward hanging in C code (where a thread cannot be stopped) leaves nothing running.
    The result must be picklable (a list of numbers is)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_in_child, args=(child, fn, args, kwargs), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(timeout_s):
            try:
                return parent.recv()
            except (EOFError, OSError, pickle.UnpicklingError) as err:
                return "error", f"the reward's worker process ended without a result ({type(err).__name__})"
        return "timeout", None
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join()


@dataclass
class RewardResult:
    """Scores of N samples."""

    rewards: torch.Tensor
    """(N,) weighted sum of the rewards that had an opinion; NaN where invalid."""
    valid: torch.Tensor
    """(N,) bool: at least one reward scored the sample and none failed on it."""
    components: torch.Tensor
    """(N, K) each reward's value (NaN: failed or no opinion)."""
    stats: dict[str, float] = field(default_factory=dict)
    """reward/ metrics."""


def columns(fields: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Row dicts -> column lists (None where a row lacks the key)."""
    keys = sorted({k for row in fields for k in row})
    return {k: [row.get(k) for row in fields] for k in keys}


def _as_value(v: Any) -> tuple[float, bool]:
    """(the reward value, NaN for no opinion or a failure; whether it failed). A value is None (no opinion) or a
    real number (int, float, numpy or 0-d tensor scalar); a bool, a string such as "1.0", an int too large
    for a float (10**400), NaN and inf are failures, never silently read as numbers.

    >>> [_as_value(v) for v in (0.5, 2, None)]
    [(0.5, False), (2.0, False), (nan, False)]
    >>> [_as_value(v)[1] for v in (True, "1.0", 10**400, float("inf"), [1.0])]
    [True, True, True, True, True]
    """
    if v is None:
        return math.nan, False
    if isinstance(v, (bool, np.bool_, str, bytes)) or not hasattr(v, "__float__"):
        return math.nan, True
    try:
        x = float(v)
    except (TypeError, ValueError, ArithmeticError, RuntimeError):  # RuntimeError: a tensor of several values
        return math.nan, True
    return (x, False) if math.isfinite(x) else (math.nan, True)


class RewardRunner:
    """Calls each reward with a per-call timeout and turns failures into recorded, skipped samples."""

    def __init__(
        self, specs: list[str], weights: list[float] | None = None, timeout_s: float = 60.0, device: str = "cpu"
    ) -> None:
        self.names = list(specs)
        self.fns = [resolve_reward(s) for s in specs]
        for fn in self.fns:  # rewards that hold a model (`rm:PATH`) score on the learner's device
            if hasattr(fn, "place"):
                fn.place(device)
        self.weights = list(weights) if weights is not None else [1.0] * len(specs)
        self.timeout_s = timeout_s
        self._reported: set[str] = set()
        self._hung: set[int] = set()
        """Rewards that timed out: stateless ones are called in a killable worker process from then on."""
        self.failure_log: list[str] = []

    def attach_policy(self, model: torch.nn.Module, tokenizer: Any) -> None:
        """Hand the live policy to the rewards that judge with it (`self_judge`: the policy as its own referee)."""
        for fn in self.fns:
            if hasattr(fn, "attach_policy"):
                fn.attach_policy(model, tokenizer)

    def state_dict(self) -> dict[str, Any]:
        """The state of stateful rewards (objects with `state_dict`, e.g. `trace`), keyed "k:spec"; the
        trainer checkpoints it so a resumed run continues with the same reward state."""
        return {
            f"{k}:{name}": fn.state_dict()
            for k, (name, fn) in enumerate(zip(self.names, self.fns))
            if hasattr(fn, "state_dict")
        }

    def summary_fields(self) -> dict[str, Any]:
        """What the rewards report about themselves for summary.json (rewards with `summary_fields()`, e.g. a
        reward model's held-out pair accuracy `rm_pair_accuracy`); with two of a kind the later one gets "_k"."""
        out: dict[str, Any] = {}
        for k, fn in enumerate(self.fns):
            for key, value in (fn.summary_fields() if hasattr(fn, "summary_fields") else {}).items():
                out[key if key not in out else f"{key}_{k}"] = value
        return out

    def share_frozen(self, other: "RewardRunner") -> None:
        """Rewards whose state is part of their definition (they have `adopt`, e.g. `rm_ensemble`'s frozen
        standardisation) take it from the same reward in `other` when they have none yet, both ways: the
        evaluator's runner and the training runner then score with one function (the training runner's state
        is checkpointed, so a resumed run's evaluation gets it back)."""
        theirs = dict(zip(other.names, other.fns))
        for name, fa in zip(self.names, self.fns):
            fb = theirs.get(name)
            if fb is not None and hasattr(fa, "adopt") and hasattr(fb, "adopt"):
                fa.adopt(fb)
                fb.adopt(fa)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; rewards missing from it keep their fresh state."""
        for k, (name, fn) in enumerate(zip(self.names, self.fns)):
            if hasattr(fn, "load_state_dict") and f"{k}:{name}" in state:
                fn.load_state_dict(state[f"{k}:{name}"])

    def _fail(self, name: str, message: str) -> None:
        self.failure_log.append(f"{name}: {message.strip().splitlines()[-1] if message.strip() else 'failed'}")
        if name not in self._reported:
            self._reported.add(name)
            log.warning("reward %r failed; its samples are skipped (shown once):\n%s", name, message)

    def _call(
        self, k: int, prompts: list[str], completions: list[str], cols: dict[str, list[Any]]
    ) -> tuple[list[float], list[bool]]:
        """One reward's values (NaN: failed or no opinion) and which samples it failed on."""
        n, name = len(completions), self.names[k]
        bound = (
            getattr(self.fns[k], "keywords", None) or {}
        )  # knobs from the spec `name(k=v)` win over same-named columns
        status, values = self._invoke(k, prompts, completions, {c: v for c, v in cols.items() if c not in bound})
        if status == "timeout":
            self._fail(name, f"timed out after {self.timeout_s:g}s (reward_timeout_s); the call is abandoned")
            return [math.nan] * n, [True] * n
        if status == "error":
            self._fail(name, values)
            if n > 1 and not hasattr(self.fns[k], "state_dict"):  # find the samples it fails on; score the rest
                return self._one_by_one(k, prompts, completions, {c: v for c, v in cols.items() if c not in bound})
            return [math.nan] * n, [True] * n
        if not isinstance(values, (list, tuple)) or len(values) != n:
            got = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
            self._fail(name, f"returned {got} values for {n} completions")
            return [math.nan] * n, [True] * n
        out, failed = [], []
        for v in values:
            x, bad = _as_value(v)
            out.append(x)
            failed.append(bad)
        if any(failed):
            self._fail(name, f"returned {sum(failed)} non-finite or non-numeric values")
        return out, failed

    def _invoke(
        self, k: int, prompts: list[str], completions: list[str], cols: dict[str, list[Any]]
    ) -> tuple[str, Any]:
        """One call of reward k on copies of the data (a reward that mutates its arguments changes neither what
        the next reward sees nor the trainer's batch or dataset), in a thread; in a killable worker process once
        a stateless reward has timed out."""
        fn = self.fns[k]
        try:
            cols = copy.deepcopy(cols)
        except Exception:  # noqa: BLE001 - an uncopyable field value: at least the lists are the reward's own
            cols = {c: list(v) for c, v in cols.items()}
        call = call_in_process if k in self._hung else call_with_timeout
        status, values = call(fn, self.timeout_s, list(prompts), list(completions), **cols)
        if status == "timeout" and not hasattr(fn, "state_dict"):
            self._hung.add(k)
        return status, values

    def _one_by_one(
        self, k: int, prompts: list[str], completions: list[str], cols: dict[str, list[Any]]
    ) -> tuple[list[float], list[bool]]:
        """After a batched call raised: the reward on each sample alone, so that only the samples it fails on
        are skipped (stateless rewards only; a per-sample timeout ends the search, the rest count as failed)."""
        out, failed = [], []
        for i in range(len(completions)):
            status, value = self._invoke(k, [prompts[i]], [completions[i]], {c: [v[i]] for c, v in cols.items()})
            if status == "timeout":
                rest = len(completions) - i
                return out + [math.nan] * rest, failed + [True] * rest
            if status == "ok" and isinstance(value, (list, tuple)) and len(value) == 1:
                x, bad = _as_value(value[0])
            else:
                x, bad = math.nan, True
            out.append(x)
            failed.append(bad)
        return out, failed

    def score(self, prompts: list[str], completions: list[str], fields: list[dict[str, Any]]) -> RewardResult:
        """Score N samples with every reward; weighted sum over the weighted rewards (weight != 0) that had an
        opinion. A reward with weight 0 is only logged: its opinion does not make a sample valid (a sample the
        trained rewards have no opinion on stays out of the loss) and its failure does not skip one."""
        cols = columns(fields)
        before = len(self.failure_log)
        calls = [self._call(k, prompts, completions, cols) for k in range(len(self.fns))]
        comps = torch.tensor([c[0] for c in calls], dtype=torch.float32).T.reshape(
            len(completions), len(self.fns)
        )  # (N, K)
        w = torch.tensor(self.weights, dtype=torch.float32)  # (K,)
        trained = w != 0  # (K,)
        failed = (
            torch.tensor([c[1] for c in calls], dtype=torch.bool).T.reshape(len(completions), len(self.fns)) & trained
        ).any(-1)  # (N,)
        has = ~torch.isnan(comps) & trained  # (N, K)
        total = torch.where(has, comps * w, torch.zeros_like(comps)).sum(-1)  # (N,)
        valid = has.any(-1) & ~failed
        total = torch.where(valid, total, torch.full_like(total, math.nan))
        stats = {
            "reward/failed_frac": float(failed.float().mean()),
            "reward/no_opinion_frac": float((~has.any(-1) & ~failed).float().mean()),
            "reward/errors": float(len(self.failure_log) - before),
        }
        logged = ~torch.isnan(comps)  # (N, K): every reward's own opinions, weighted or not
        for k, name in enumerate(self.names):
            if len(self.names) > 1 and logged[:, k].any():
                stats[f"reward/{name}"] = float(comps[logged[:, k], k].mean())
        for fn in self.fns:  # rewards that report on themselves (e.g. `judge`: failed judgements, cache hits)
            stats.update(fn.metrics() if hasattr(fn, "metrics") else {})
        return RewardResult(rewards=total, valid=valid, components=comps, stats=stats)


def concat_results(results: list[RewardResult]) -> RewardResult:
    """Stack reward results; stats are averaged weighted by sample counts (counts of errors summed)."""
    sizes = [len(r.rewards) for r in results]
    keys = {k for r in results for k in r.stats}
    stats = {k: sum(r.stats.get(k, 0.0) * n for r, n in zip(results, sizes)) / max(sum(sizes), 1) for k in keys}
    stats["reward/errors"] = sum(r.stats.get("reward/errors", 0.0) for r in results)
    return RewardResult(
        torch.cat([r.rewards for r in results]),
        torch.cat([r.valid for r in results]),
        torch.cat([r.components for r in results]),
        stats,
    )
