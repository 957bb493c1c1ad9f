"""Config checks of a classic run (called by the config loader): counts in range, the environment known to
Gymnasium, the algorithm fit for the environment's action space."""

from __future__ import annotations

from ascent.classic.base import CLASSIC
from ascent.classic.envs import check_env_id, make_env
from ascent.classic.wrappers import canonical_wrappers
from ascent.config.schema import ClassicConfig
from ascent.typed import ConfigError


def check_classic(cfg: ClassicConfig) -> None:
    """Raise a ConfigError saying what to change when `cfg` cannot run."""
    for key in ("num_envs", "total_steps", "eval_episodes", "keep_checkpoints", "log_every"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(f"classic.{key} must be > 0, got {getattr(cfg, key)}")
    for key in ("eval_every", "checkpoint_every"):
        if getattr(cfg, key) < 0:
            raise ConfigError(f"classic.{key} must be >= 0 (0: off), got {getattr(cfg, key)}")
    if cfg.clip_obs <= 0 or cfg.clip_reward <= 0:
        raise ConfigError("classic.clip_obs and classic.clip_reward must be > 0")
    check_env_id(cfg.env)
    piece = CLASSIC.resolve(cfg.algorithm, key="classic.algorithm")
    if hasattr(piece.fn, "check"):  # the algorithm's own cross-checks with the run (mini-batch vs rollout, ...)
        try:
            piece.fn.check(piece.params, cfg.num_envs)
        except ValueError as err:
            raise ConfigError(f"classic.algorithm={piece.spec}: {err}") from None
    try:
        wrappers = canonical_wrappers(cfg.wrappers)
    except TypeError as err:
        raise ConfigError(f"classic.wrappers: {err}") from None
    env = make_env(cfg.env, wrappers)
    kind = "discrete" if hasattr(env.action_space, "n") else "continuous"
    env.close()
    if kind not in piece.fn.action_spaces:
        fits = [e.name for e in CLASSIC.entries() if kind in e.fn.action_spaces]
        raise ConfigError(
            f"classic.algorithm={piece.name} needs a {' or '.join(sorted(piece.fn.action_spaces))} action space; "
            f"{cfg.env} has a {kind} one; use one of: {', '.join(fits)}"
        )
