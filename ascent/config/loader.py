"""Recipes (YAML) + `key=value` overrides -> a checked `RunConfig`.

Every key is checked against the schema: an unknown key fails with the valid keys at that level, a value
of the wrong type or outside its choices fails naming the key and what it accepts.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path
from typing import Any

import yaml

from ascent.config.schema import Derived, RunConfig
from ascent.typed import ConfigError, build, format_spec, parse_spec, spec_from_raw, spec_to_raw

__all__ = ["ConfigError", "build", "config_from_dict", "derived", "load_config", "merge", "parse_overrides"]

RECIPE_DIR = Path(__file__).resolve().parent.parent / "recipes"


def recipe_names() -> list[str]:
    """The recipes shipped with the package."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def read_recipe(recipe: str | Path) -> dict[str, Any]:
    """The raw mapping of a shipped recipe name or a YAML path."""
    path = Path(recipe)
    if not path.suffix:
        path = RECIPE_DIR / f"{recipe}.yaml"
        if not path.exists():
            import difflib

            close = difflib.get_close_matches(str(recipe), recipe_names(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"no recipe {str(recipe)!r}{hint}; shipped recipes: {', '.join(recipe_names())}")
    if not path.exists():
        raise ConfigError(f"recipe file {str(path)!r} does not exist")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"recipe {str(path)!r} is not valid YAML{yaml_problem(err)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"recipe {str(path)!r} must be a mapping of keys to values, got {type(raw).__name__}")
    return raw


def yaml_problem(err: yaml.YAMLError) -> str:
    """` (line L, column C): what is wrong` for a YAML error, in one line.

    >>> try:
    ...     yaml.safe_load("steps: [1, 2")
    ... except yaml.YAMLError as err:
    ...     yaml_problem(err)
    " (line 1, column 13): expected ',' or ']', but got '<stream end>'"
    """
    mark = getattr(err, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if "'\\t'" in problem:  # PyYAML names the tab it found as '\t'
        problem += " (YAML indents with spaces, not tabs)"
    return f"{where}: {problem}"


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`["train.lr=1e-4", "data.task=addition"]` -> nested mapping; values are parsed as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. train.steps=100)")
        key, _, text = item.partition("=")
        try:
            value = yaml.safe_load(text) if text != "" else None
        except yaml.YAMLError:
            value = text
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} sets a key below a scalar")
        node[parts[-1]] = value
    return out


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge, everything else is replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


SPEC_KEYS = (
    "algorithm.advantage",
    "algorithm.loss",
    "algorithm.filter",
    "data.task",
    "classic.algorithm",
    "co.policy",
    "co.loss",
)
"""Config keys whose value is one registered piece's spec, `name` or `name(key=value, ...)`; a recipe may write
it as a mapping `{name: {key: value}}`, and `key.name.param=value` overrides merge into it."""


def load_config(recipe: str | Path = "default", overrides: list[str] | None = None) -> RunConfig:
    """The checked config of a recipe with `key=value` overrides applied."""
    base, over = _specs_to_raw(read_recipe(recipe)), _specs_to_raw(parse_overrides(overrides or []))
    raw = merge(base, over)
    for key in SPEC_KEYS:  # an override naming another piece replaces the recipe's (parameters do not carry over)
        b, last = _at(base, key)
        o, _ = _at(over, key)
        if (
            b is not None
            and o is not None
            and isinstance(b.get(last), dict)
            and isinstance(o.get(last), dict)
            and set(b[last]) != set(o[last])
        ):
            _at(raw, key)[0][last] = o[last]
    return config_from_dict(raw)


def config_from_dict(raw: dict[str, Any]) -> RunConfig:
    """A checked config from a plain mapping (e.g. a run directory's config.yaml); piece specs come back in
    their canonical string form with checked parameters."""
    raw = _specs_from_raw(raw)
    if raw.get("device") == "cpu":  # the old top-level default every earlier run's config.yaml carries
        raw = {k: v for k, v in raw.items() if k != "device"}
    check_removed_keys(raw)
    cfg = build(RunConfig, raw)
    cfg = resolve_specs(cfg)
    validate(cfg)
    return cfg


def _at(raw: dict[str, Any], key: str) -> tuple[dict[str, Any] | None, str]:
    """(the mapping holding the dotted `key`, its last part), or (None, last part) when a level is missing."""
    *parents, last = key.split(".")
    node: Any = raw
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), last


def _specs_to_raw(raw: dict[str, Any]) -> dict[str, Any]:
    raw = merge(raw, {})
    for key in SPEC_KEYS:
        node, last = _at(raw, key)
        if node is not None and last in node:
            node[last] = spec_to_raw(node[last])
    return raw


def _specs_from_raw(raw: dict[str, Any]) -> dict[str, Any]:
    raw = merge(raw, {})
    for key in SPEC_KEYS:
        node, last = _at(raw, key)
        if node is not None and last in node:
            node[last] = spec_from_raw(node[last], key)
    classic = raw.get("classic")
    if isinstance(classic, dict) and isinstance(classic.get("wrappers"), list):
        classic["wrappers"] = [
            spec_from_raw(w, f"classic.wrappers[{i}]") if isinstance(w, dict) else w
            for i, w in enumerate(classic["wrappers"])
        ]
    rewards = raw.get("reward")
    if isinstance(rewards, dict):
        raw["reward"] = spec_from_raw(rewards, "reward")
    elif isinstance(rewards, list):
        raw["reward"] = [spec_from_raw(r, f"reward[{i}]") if isinstance(r, dict) else r for i, r in enumerate(rewards)]
    return raw


def register_classic_families() -> None:
    """Import the packages that register classic algorithms outside `ascent.classic`: the offline algorithms and
    the evolved loss-graph DQN (`dqn_loss_graph`), so that a recipe or the command line can name them."""
    import ascent.incontext.evolve  # noqa: F401
    import ascent.offline  # noqa: F401


def spec_registries() -> dict[str, Any]:
    """The registry each piece-spec key resolves in."""
    register_classic_families()
    from ascent.algorithms import ADVANTAGES, FILTERS, LOSSES
    from ascent.classic import CLASSIC
    from ascent.data.samplers import SAMPLERS
    from ascent.rollout.explorers import EXPLORERS
    from ascent.rollout.speculative import DRAFTERS
    from ascent.tasks import TASKS

    return {
        "algorithm.advantage": ADVANTAGES,
        "algorithm.loss": LOSSES,
        "algorithm.filter": FILTERS,
        "data.task": TASKS,
        "data.sampler": SAMPLERS,
        "rollout.explorer": EXPLORERS,
        "rollout.speculative": DRAFTERS,
        "classic.algorithm": CLASSIC,
    }


def resolve_specs(cfg: RunConfig) -> RunConfig:
    """Check every piece spec against its registry (name, parameters, ranges) and write it back in the
    canonical form (`taco(alpha=0.05)`: non-default parameters only, numbers typed)."""
    if cfg.classic is not None:  # a Gymnasium run: its algorithm only (the language-model pieces are unused)
        register_classic_families()
        from ascent.classic import CLASSIC
        from ascent.classic.wrappers import canonical_wrappers

        spec = CLASSIC.resolve(cfg.classic.algorithm, key="classic.algorithm").spec
        wrappers = canonical_wrappers(cfg.classic.wrappers)
        return dataclasses.replace(cfg, classic=dataclasses.replace(cfg.classic, algorithm=spec, wrappers=wrappers))
    if cfg.co is not None:  # a routing run (ascent.co): its policy and loss only
        from ascent.co import CO_LOSSES, CO_POLICIES

        policy = CO_POLICIES.resolve(cfg.co.policy, key="co.policy").spec
        loss = CO_LOSSES.resolve(cfg.co.loss, key="co.loss").spec
        return dataclasses.replace(cfg, co=dataclasses.replace(cfg.co, policy=policy, loss=loss))
    for key, registry in spec_registries().items():
        section, name = key.split(".")
        part = getattr(cfg, section)
        if part is None:  # an optional section the run does not have (classic)
            continue
        spec = registry.resolve(getattr(part, name), key=key).spec
        cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(part, **{name: spec})})
    return cfg


REMOVED_KEYS = {
    "device": "model.device=VALUE",
    "algorithm.rebel_eta": "algorithm.loss=rebel(eta=VALUE)",
    "algorithm.rebel_pairs": "algorithm.loss=rebel(pairs=VALUE)",
    "algorithm.agro_beta": "algorithm.loss=agro(beta=VALUE)",
    "algorithm.agro_score_coef": "algorithm.loss=agro(score_coef=VALUE)",
    "algorithm.teacher": "algorithm.loss=distil(teacher=VALUE)",
    "algorithm.a_star_beta": "algorithm.loss=a_star_po(beta=VALUE)",
    "algorithm.a_star_beta2": "algorithm.loss=a_star_po(beta2=VALUE)",
    "algorithm.a_star_k": "algorithm.loss=a_star_po(k=VALUE)",
    "algorithm.gae_gamma": "algorithm.advantage=gae(gamma=VALUE)",
    "algorithm.gae_lambda": "algorithm.advantage=gae(lam=VALUE)",
    "algorithm.gae_whiten": "algorithm.advantage=gae(whiten=VALUE)",
    "algorithm.value_lr": "algorithm.advantage=gae(value_lr=VALUE)",
    "algorithm.value_clip": "algorithm.advantage=gae(value_clip=VALUE)",
    "algorithm.taco_alpha": "algorithm.advantage=taco(alpha=VALUE)",
    "algorithm.taco_floor": "algorithm.advantage=taco(floor=VALUE)",
    "algorithm.taco_window": "algorithm.advantage=taco(window=VALUE)",
    "algorithm.exppo_strength": "algorithm.advantage=exppo(strength=VALUE)",
    "algorithm.exppo_threshold": "algorithm.advantage=exppo(threshold=VALUE)",
    "algorithm.aem_strength": "algorithm.advantage=aem(strength=VALUE)",
    "algorithm.success_adaptive_threshold": "algorithm.advantage=success_adaptive(threshold=VALUE)",
    "algorithm.success_adaptive_strength": "algorithm.advantage=success_adaptive(strength=VALUE)",
    "algorithm.sa_mrpo_power": "algorithm.advantage=sa_mrpo(power=VALUE)",
    "algorithm.tmn_difficulty": "algorithm.advantage=tmn(difficulty=VALUE)",
    "algorithm.rapo_power": "algorithm.advantage=rapo(power=VALUE)",
    "algorithm.maxrl_threshold": "algorithm.advantage=maxrl(threshold=VALUE)",
    "algorithm.maxrl_order": "algorithm.advantage=maxrl(order=VALUE)",
    "algorithm.maxrl_baseline": "algorithm.advantage=maxrl(baseline=VALUE)",
    "algorithm.tree_normalize": "algorithm.advantage=tree(normalize=VALUE)",
    "algorithm.progress_prior": "algorithm.advantage=progress(prior=VALUE)",
    "algorithm.progress_normalize": "algorithm.advantage=progress(normalize=VALUE)",
    "algorithm.serl_strength": "algorithm.advantage=turn_feedback(strength=VALUE)",
    "algorithm.serl_temperature": "algorithm.advantage=turn_feedback(temperature=VALUE)",
    "algorithm.explore_group_step_coef": "algorithm.advantage=explore_group(step_coef=VALUE)",
    "algorithm.dynamic_sampling": "algorithm.filter=dapo (VALUE=true) or algorithm.filter=none",
    "algorithm.max_refill_rounds": "algorithm.filter=dapo(max_refill_rounds=VALUE)",
    "data.digits": "data.task=addition(digits=VALUE)",
    "data.teacher_carry_drop": "data.task=addition(teacher_carry_drop=VALUE)",
    "data.search_world": "data.task=search_world(KEY=VALUE, ...)",
    "data.textworld": "data.task=textworld(KEY=VALUE, ...)",
}
"""Keys that were flat technique or task knobs, and their spelling now (a piece's parameters live in its spec).
An entry whose new spelling takes `KEY=VALUE, ...` was a whole section: it matches any key below it."""


def check_removed_keys(raw: dict[str, Any]) -> None:
    """Fail on a key that no longer exists with the message naming its new spelling."""
    for key, new in REMOVED_KEYS.items():
        node, last = _at(raw, key)
        if node is None or last not in node:
            continue
        value, where = node[last], key
        target, _, spec = new.partition("=")
        if "KEY=VALUE, ..." in spec:  # a removed section: its keys become the piece's parameters
            piece = spec.partition("(")[0]
            if isinstance(value, dict) and value:
                spec = format_spec(piece, value)
                where = f"{key}.{next(iter(value))}" if len(value) == 1 else key
        else:
            spec = spec.replace("VALUE", str(value).lower() if isinstance(value, bool) else str(value))
        if "(" not in spec:  # a plain key that moved
            raise ConfigError(f"{where} was moved: write {target}={spec}")
        if target.startswith("data."):
            hint = f"(YAML: {_yaml_hint(target, spec)})"
            raise ConfigError(
                f"{where} was removed: a task's parameters now live in its spec; write {target}={spec} {hint}"
            )
        hint = "(in YAML the mapping form works too, e.g. advantage: {taco: {alpha: 0.05}})"
        raise ConfigError(
            f"{where} was removed: a piece's parameters now live in its spec; write {target}={spec} {hint}"
        )


def _yaml_hint(target: str, spec: str) -> str:
    """The recipe spelling of `target=spec`, e.g. `task: {addition: {digits: 3}}`."""
    try:
        name, kwargs = parse_spec(spec)
        inner = (
            yaml.safe_dump(kwargs, default_flow_style=True, sort_keys=False, width=10_000).strip() if kwargs else "{}"
        )
    except ConfigError:  # the placeholder KEY=VALUE, ...
        name, inner = spec.partition("(")[0], "{KEY: VALUE, ...}"
    return f"{target.rpartition('.')[2]}: {{{name}: {inner}}}"


def _positive(cfg: RunConfig) -> list[tuple[str, float]]:
    return [
        ("train.prompts_per_step", cfg.train.prompts_per_step),
        ("train.micro_batch_size", cfg.train.micro_batch_size),
        ("rollout.samples_per_prompt", cfg.rollout.samples_per_prompt),
        ("rollout.max_new_tokens", cfg.rollout.max_new_tokens),
        ("algorithm.ppo_epochs", cfg.algorithm.ppo_epochs),
        ("algorithm.mini_batches", cfg.algorithm.mini_batches),
        ("train.optim.lr", cfg.train.optim.lr),
        ("eval.batch_size", cfg.eval.batch_size),
        ("logging.samples_max_mb", cfg.logging.samples_max_mb),
    ]


RUN_NAME = re.compile(r"[A-Za-z0-9_=-][A-Za-z0-9_.=-]*")
"""A run name: one folder under output_dir (letters, digits, _ . = -; no separator, not `.`/`..`, no leading dot)."""


def check_run_name(name: Any, key: str = "name") -> None:
    """Raise ConfigError unless `name` is one folder name that stays inside its parent (see RUN_NAME).

    >>> check_run_name("grpo-seed1")
    >>> check_run_name("..")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ascent.typed.ConfigError: name='..' cannot be a run name: use letters, digits and _ . = - ...
    """
    if not isinstance(name, str) or not RUN_NAME.fullmatch(name):
        raise ConfigError(
            f"{key}={name!r} cannot be a run name: use letters, digits and _ . = - (no '/', no leading '.', "
            f"not an absolute path); the run directory is output_dir/{key}"
        )


def validate(cfg: RunConfig) -> None:
    """Cross-field checks; each failure says what to change."""
    check_run_name(cfg.name)
    _check_learner(cfg)
    if cfg.classic is not None:  # a Gymnasium run (ascent.classic) uses none of the language-model sections
        from ascent.classic.checks import check_classic

        check_classic(cfg.classic)
        return
    if cfg.co is not None:  # a routing run (ascent.co) uses none of the language-model sections either
        from ascent.co.train import check_co

        try:
            check_co(cfg.co)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return
    for key, value in _positive(cfg):
        if value <= 0:
            raise ConfigError(f"{key} must be > 0, got {value}")
    for key, value in [
        ("train.steps", cfg.train.steps),
        ("warmstart.steps", cfg.warmstart.steps),
        ("warmstart.checkpoint_every", cfg.warmstart.checkpoint_every),
        ("logging.samples_every", cfg.logging.samples_every),
        ("logging.samples_groups", cfg.logging.samples_groups),
    ]:
        if value < 0:
            raise ConfigError(f"{key} must be >= 0, got {value}")
    if cfg.rollout.temperature < 0:
        raise ConfigError(f"rollout.temperature must be >= 0, got {cfg.rollout.temperature}")
    if not 0 < cfg.rollout.top_p <= 1:
        raise ConfigError(f"rollout.top_p must be in (0, 1], got {cfg.rollout.top_p}")
    if cfg.rollout.speculative != "none" and (cfg.rollout.backend != "ascent" or cfg.rollout.max_active_sequences):
        raise ConfigError(
            f"rollout.speculative={cfg.rollout.speculative} needs rollout.backend=ascent and "
            f"rollout.max_active_sequences=0 (got {cfg.rollout.backend}, {cfg.rollout.max_active_sequences})"
        )
    if cfg.rollout.max_active_sequences < 0 or (
        cfg.rollout.max_active_sequences and cfg.rollout.backend not in ("ascent", "vllm")
    ):
        raise ConfigError(
            "rollout.max_active_sequences must be >= 0 (0: no cap) and needs backend ascent or vllm; "
            f"got {cfg.rollout.max_active_sequences} with {cfg.rollout.backend!r}"
        )
    if cfg.rollout.shards < 0 or (cfg.rollout.shards > 1 and cfg.rollout.backend != "ascent"):
        raise ConfigError(
            "rollout.shards must be >= 0 (0: automatic) and values above 1 need rollout.backend=ascent; "
            f"got {cfg.rollout.shards} with {cfg.rollout.backend!r}"
        )
    if cfg.rollout.attention != "auto" and cfg.rollout.backend != "ascent":
        raise ConfigError(
            f"rollout.attention={cfg.rollout.attention!r} needs rollout.backend=ascent, got {cfg.rollout.backend!r}"
        )
    if cfg.rollout.decode_step != "auto" and cfg.rollout.backend != "ascent":
        raise ConfigError(
            f"rollout.decode_step={cfg.rollout.decode_step!r} needs rollout.backend=ascent, got {cfg.rollout.backend!r}"
        )
    if cfg.rollout.decode_step == "native" and (
        cfg.rollout.attention == "torch" or cfg.rollout.precision == "bfloat16"
    ):
        raise ConfigError(
            "rollout.decode_step=native runs the fp32 step with the native attention; it cannot be combined with "
            f"rollout.attention={cfg.rollout.attention!r}, rollout.precision={cfg.rollout.precision!r}"
        )
    if cfg.rollout.precision == "bfloat16" and cfg.rollout.backend != "ascent":
        raise ConfigError(
            f"rollout.precision={cfg.rollout.precision!r} needs rollout.backend=ascent, got {cfg.rollout.backend!r}"
        )
    if cfg.rollout.precision == "bfloat16" and cfg.algorithm.tis_cap is None:  # auto sets a cap when it picks bf16
        warnings.warn(
            f"rollout.precision={cfg.rollout.precision} without algorithm.tis_cap: the sampler/learner mismatch "
            "(logged as rollout/logprob_mismatch) goes uncorrected; set e.g. algorithm.tis_cap=2.0",
            UserWarning,
            stacklevel=2,
        )
    piece_warnings(cfg)
    _check_group_signal(cfg)
    rollouts = cfg.train.prompts_per_step * cfg.rollout.samples_per_prompt
    if rollouts % cfg.algorithm.mini_batches:
        raise ConfigError(
            f"train.prompts_per_step x rollout.samples_per_prompt = {rollouts} rollouts per step is not divisible "
            f"by algorithm.mini_batches={cfg.algorithm.mini_batches}; change one of them"
        )
    if cfg.algorithm.clip_low < 0 or cfg.algorithm.clip_high < 0:
        raise ConfigError("algorithm.clip_low and algorithm.clip_high must be >= 0")
    if cfg.algorithm.tis_cap is not None and cfg.algorithm.tis_cap < 1:
        raise ConfigError(f"algorithm.tis_cap must be >= 1 (or null), got {cfg.algorithm.tis_cap}")
    if cfg.algorithm.dual_clip is not None and cfg.algorithm.dual_clip <= 1:
        raise ConfigError(f"algorithm.dual_clip must be > 1 (or null), got {cfg.algorithm.dual_clip}")
    _check_runtime(cfg)
    no_warmstart = cfg.warmstart.steps == 0 and not cfg.warmstart.init_from
    if cfg.control.enabled and cfg.control.kind == "imitation" and no_warmstart:
        raise ConfigError(
            "control.kind=imitation continues the warm start's imitation: set warmstart.steps > 0, "
            "control.kind=rft (rejection-sampling fine-tuning from the same weights) or control.enabled=false"
        )
    if cfg.model.source == "hf" and not cfg.model.path:
        raise ConfigError("model.source=hf needs model.path (a Hugging Face model folder)")
    if cfg.model.hidden_size % cfg.model.num_heads or cfg.model.num_heads % cfg.model.num_kv_heads:
        raise ConfigError("model.hidden_size must be divisible by model.num_heads, and num_heads by num_kv_heads")
    rewards = [cfg.reward] if isinstance(cfg.reward, str) else cfg.reward
    if cfg.reward_weights is not None and len(cfg.reward_weights) != len(rewards):
        raise ConfigError(f"reward_weights has {len(cfg.reward_weights)} entries for {len(rewards)} rewards")
    if cfg.reward_weights is not None and not any(w != 0 for w in cfg.reward_weights):
        raise ConfigError("reward_weights are all 0: nothing would be trained on (a 0 weight only logs a reward)")
    _check_reward_models(rewards)
    for key, o in (("train.optim", cfg.train.optim), ("warmstart.optim", cfg.warmstart.optim)):
        if not 0 <= o.decay_frac <= 1:
            raise ConfigError(f"{key}.decay_frac must be in [0, 1], got {o.decay_frac}")
    _check_agent(cfg)
    specs = [cfg.reward] if isinstance(cfg.reward, str) else list(cfg.reward)
    if any(isinstance(s, str) and s.split("(")[0].strip() == "rm_online" for s in specs) and not cfg.eval.reward:
        raise ConfigError(
            "reward rm_online learns from the completions it scores, so evaluation with it would train its copy on "
            "held-out completions: set eval.reward to a verifier (e.g. eval.reward=exact_answer)"
        )
    if (cfg.data.train is None) != (cfg.data.eval is None) and cfg.data.task == "jsonl":
        raise ConfigError("data.task=jsonl needs both data.train and data.eval")


def _check_reward_models(specs: list[str]) -> None:
    """A `reward=rm:PATH` must name a reward model folder (`ascent train-rm`): fail now, not when the run starts
    scoring (its weights load when the reward runner is built)."""
    from ascent.rewards.judge import check_judge_spec
    from ascent.rewards.online_rm import check_online_spec
    from ascent.rewards.reward_model import read_meta

    for spec in specs:
        if isinstance(spec, str) and spec.startswith("rm:"):
            read_meta(Path(spec[len("rm:") :].split("(")[0]))
        elif isinstance(spec, str):
            check_judge_spec(spec)  # a `judge(...)`'s parameters and model path
            check_online_spec(spec)  # an `rm_online(...)`'s parameters and folder


def _check_agent(cfg: RunConfig) -> None:
    """Ranges of the agent loop (agent.*), and that a scratch model holds a search_world episode (the task's
    own parameters are checked by its params dataclass)."""
    from ascent.tasks import task_piece

    a = cfg.agent
    if a.max_turns < 1 or a.max_turn_tokens < 1 or a.max_total_tokens < 2:
        raise ConfigError(
            "agent.max_turns and agent.max_turn_tokens must be >= 1 and agent.max_total_tokens >= 2, "
            f"got {a.max_turns}, {a.max_turn_tokens}, {a.max_total_tokens}"
        )
    if "{answer}" not in a.igpo_template:
        raise ConfigError(f"agent.igpo_template must contain {{answer}}, got {a.igpo_template!r}")
    if a.round_multiple < 0:
        raise ConfigError(f"agent.round_multiple must be >= 0 (0: train.micro_batch_size), got {a.round_multiple}")
    if a.context == "workspace" and a.turn_rewards != "env":
        raise ConfigError(f"agent.context=workspace needs agent.turn_rewards=env, got {a.turn_rewards!r}")
    task = task_piece(cfg.data)
    too_long = a.max_total_tokens > cfg.model.max_position_embeddings
    if task.name == "search_world" and cfg.model.source == "scratch" and too_long:
        raise ConfigError(
            f"agent.max_total_tokens={a.max_total_tokens} exceeds "
            f"model.max_position_embeddings={cfg.model.max_position_embeddings}; raise the latter or lower the former"
        )


def _check_learner(cfg: RunConfig) -> None:
    """learner.world_size: at least 1; more only for the language-model RL learner."""
    n, timeout = cfg.learner.world_size, cfg.learner.timeout_s
    if n < 1 or timeout <= 0:
        raise ConfigError(f"learner.world_size must be >= 1 and learner.timeout_s > 0, got {n} and {timeout}")
    if cfg.learner.shard not in ("none", "fsdp2"):
        raise ConfigError(f"learner.shard must be 'none' or 'fsdp2', got {cfg.learner.shard!r}")
    if cfg.learner.shard == "fsdp2" and n < 2:
        raise ConfigError(
            "learner.shard=fsdp2 shards the learner over its ranks: set learner.world_size >= 2, or learner.shard=none"
        )
    if cfg.learner.shard == "fsdp2" and cfg.model.lora.enabled:
        raise ConfigError(
            "learner.shard=fsdp2 does not shard LoRA adapters (their reference is the policy with adapters off, run "
            "by rank 0 alone): set learner.shard=none with model.lora.enabled=true"
        )
    if n > 1 and (cfg.classic is not None or cfg.co is not None):
        kind = "classic" if cfg.classic is not None else "co"
        raise ConfigError(
            f"learner.world_size={n}: data parallelism covers the language-model learner, not {kind} runs"
        )
    if n > 1:
        from ascent.algorithms import ADVANTAGES, FILTERS, LOSSES

        a = cfg.algorithm
        for key, reg, spec in [
            ("algorithm.advantage", ADVANTAGES, a.advantage),
            ("algorithm.loss", LOSSES, a.loss),
            ("algorithm.filter", FILTERS, a.filter),
        ]:
            piece = reg.resolve(spec, key=key)
            if piece.state is not None:
                raise ConfigError(
                    f"learner.world_size={n}: {key}={piece.name} keeps a state of its own ({piece.state.__name__}), "
                    "which is not sharded across learner ranks yet; set learner.world_size=1 for it"
                )


def _check_runtime(cfg: RunConfig) -> None:
    """runtime=ray: worker counts and the off-policy correction that stale batches need."""
    r = cfg.ray
    if r.rollout_workers < 1 or r.max_staleness < 0 or r.num_cpus_per_worker <= 0:
        raise ConfigError(
            "ray.rollout_workers must be >= 1, ray.max_staleness >= 0 and ray.num_cpus_per_worker > 0; "
            f"got {r.rollout_workers}, {r.max_staleness}, {r.num_cpus_per_worker}"
        )
    if r.reward_workers < 0 or r.partial_rollout_tokens < 0:
        raise ConfigError(
            "ray.reward_workers and ray.partial_rollout_tokens must be >= 0 (0: off); "
            f"got {r.reward_workers}, {r.partial_rollout_tokens}"
        )
    if cfg.runtime == "ray" and r.partial_rollout_tokens > 0 and r.max_staleness < 2:
        raise ConfigError(
            f"ray.partial_rollout_tokens={r.partial_rollout_tokens} continues a batch under later policy versions, "
            "and a batch finishes with the version before the learner's (no wait): "
            f"that needs ray.max_staleness >= 2 (got {r.max_staleness}); raise it or set ray.partial_rollout_tokens=0"
        )
    if r.broadcast_chunk_mb <= 0:
        raise ConfigError(f"ray.broadcast_chunk_mb must be > 0; got {r.broadcast_chunk_mb}")
    if cfg.runtime == "ray" and r.handoff == "sample" and (r.reward_workers or r.partial_rollout_tokens):
        raise ConfigError(
            "ray.handoff=sample streams each group from the rollout worker that sampled and scored it: "
            f"ray.reward_workers={r.reward_workers} and ray.partial_rollout_tokens={r.partial_rollout_tokens} "
            "work with ray.handoff=batch only; set them to 0 or ray.handoff=batch"
        )
    if cfg.runtime == "ray" and r.max_staleness > 0 and cfg.algorithm.tis_cap is None:
        raise ConfigError(
            f"runtime=ray with ray.max_staleness={r.max_staleness} trains on samples of older policies: "
            "set algorithm.tis_cap "
            "(e.g. 2.0; truncated importance weights against the sampling-time log-probs) or ray.max_staleness=0"
        )


def derived(cfg: RunConfig) -> Derived:
    """Batch semantics spelled out."""
    a, t = cfg.algorithm, cfg.train
    rollouts = t.prompts_per_step * cfg.rollout.samples_per_prompt
    per_opt = rollouts // a.mini_batches
    return Derived(
        prompts_per_step=t.prompts_per_step,
        samples_per_prompt=cfg.rollout.samples_per_prompt,
        rollouts_per_step=rollouts,
        optimizer_steps_per_rollout_batch=a.ppo_epochs * a.mini_batches,
        sequences_per_optimizer_step=per_opt,
        micro_batches_per_optimizer_step=-(-per_opt // t.micro_batch_size),
        total_rl_optimizer_steps=t.steps * a.ppo_epochs * a.mini_batches,
        total_rollouts=t.steps * rollouts,
    )


def to_dict(cfg: Any) -> dict[str, Any]:
    """A plain mapping of a config (for config.yaml)."""
    return dataclasses.asdict(cfg)


def _check_group_signal(cfg: RunConfig) -> None:
    """One sample per prompt with an estimator whose baseline is the prompt's own group (GRPO, RLOO, ...) gives
    every sample a zero advantage: the run would train on nothing. Found by asking the estimator itself: a
    stateless one that returns all zeros for singleton groups with distinct rewards has no signal to give."""
    if cfg.rollout.samples_per_prompt != 1:
        return
    import torch

    from ascent.algorithms import ADVANTAGES, LOSSES
    from ascent.algorithms.types import AdvantageInput

    loss = LOSSES.resolve(cfg.algorithm.loss, key="algorithm.loss")
    if loss.requires & {"rewards", "teacher", "v_star", "edge"}:  # a loss with a signal of its own (A*-PO, OPD)
        return
    piece = ADVANTAGES.resolve(cfg.algorithm.advantage, key="algorithm.advantage")
    if piece.state is not None or piece.requires:  # needs a critic, a model or extras: it has its own baseline
        return
    rewards = torch.tensor([0.0, 1.0, 0.5, 0.25])
    probe = AdvantageInput(rewards, torch.ones(4, dtype=torch.bool), torch.arange(4), torch.ones(4, 3))
    try:
        adv = piece(probe, cfg.algorithm)
    except Exception:  # an estimator that needs more than rewards and groups: no verdict from the probe
        return
    if not bool(torch.any(adv != 0)):
        raise ConfigError(
            f"rollout.samples_per_prompt=1 with algorithm.advantage={piece.name}: its baseline is the prompt's own "
            "group of samples, so one sample per prompt gives every advantage 0 and nothing is trained; set "
            "rollout.samples_per_prompt >= 2 (e.g. 8) or an advantage with another baseline (reinforce_pp, rft)"
        )


def piece_warnings(cfg: RunConfig) -> None:
    """Warnings that pieces declare about the rest of the config: an off-policy explorer without a TIS cap, a
    loss that acts only from the second update on a batch (KL-Cov) with one update per batch."""
    from ascent.algorithms import LOSSES
    from ascent.rollout.explorers import EXPLORERS

    explorer = EXPLORERS.resolve(cfg.rollout.explorer, key="rollout.explorer")
    if getattr(explorer.fn, "off_policy", False) and cfg.algorithm.tis_cap is None:
        warnings.warn(
            f"rollout.explorer={explorer.name} samples from another distribution than the policy; without "
            "algorithm.tis_cap that mismatch goes uncorrected; set e.g. algorithm.tis_cap=2.0",
            UserWarning,
            stacklevel=3,
        )
    loss = LOSSES.resolve(cfg.algorithm.loss, key="algorithm.loss")
    if getattr(loss.fn, "several_updates", False) and cfg.algorithm.ppo_epochs * cfg.algorithm.mini_batches == 1:
        warnings.warn(
            f"algorithm.loss={loss.name} acts only once the policy has moved within a batch (pi != pi_old); with "
            "one update per rollout batch it equals ppo_clip; set algorithm.mini_batches or ppo_epochs > 1",
            UserWarning,
            stacklevel=3,
        )
