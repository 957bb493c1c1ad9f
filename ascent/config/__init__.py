"""Typed config schema, recipe loading, overrides and derived quantities."""

from ascent.config.loader import ConfigError, config_from_dict, derived, load_config, recipe_names, to_dict
from ascent.config.schema import RunConfig

__all__ = ["ConfigError", "RunConfig", "config_from_dict", "derived", "load_config", "recipe_names", "to_dict"]
