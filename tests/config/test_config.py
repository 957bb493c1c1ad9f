"""Recipes, overrides, checking of every key and value, cross-field validation, derived quantities."""

from __future__ import annotations

import re

import pytest

from ascent.config import ConfigError, RunConfig, derived, load_config, recipe_names
from ascent.config.loader import config_from_dict, parse_overrides, to_dict


def config_error(overrides=None, recipe="default") -> str:
    """The message of the ConfigError that loading raises; it must be a single line."""
    with pytest.raises(ConfigError) as info:
        load_config(recipe, overrides or [])
    msg = str(info.value)
    assert "\n" not in msg and "\r" not in msg, msg
    assert msg.strip(), "empty error message"
    return msg


def test_default_recipe_loads():
    cfg = load_config("default")
    assert isinstance(cfg, RunConfig)
    assert "default" in recipe_names()
    # values from default.yaml (not just the schema defaults)
    assert cfg.warmstart.steps == 800
    assert cfg.rollout.max_new_tokens == 5
    assert cfg.train.optim.lr == pytest.approx(3e-5)
    assert cfg.warmstart.optim.lr == pytest.approx(3e-3)
    assert cfg.control.enabled is True
    # and schema defaults for what the recipe leaves out
    assert cfg.algorithm.clip_low == 0.2 and cfg.algorithm.dual_clip is None


def test_round_trip_through_dict():
    cfg = load_config("default", ["rollout.temperature=0.5"])
    assert config_from_dict(to_dict(cfg)) == cfg


def test_dotted_overrides():
    cfg = load_config(
        "default",
        [
            "train.optim.lr=0.0001",
            "rollout.temperature=0.7",
            "train.steps=12",
            "algorithm.dual_clip=3",
            "reward=[exact_answer, last_number]",
            "reward_weights=[1, 0.5]",
        ],
    )
    assert cfg.train.optim.lr == pytest.approx(1e-4)
    assert cfg.rollout.temperature == pytest.approx(0.7)
    assert cfg.train.steps == 12 and isinstance(cfg.train.steps, int)
    assert cfg.algorithm.dual_clip == 3.0 and isinstance(cfg.algorithm.dual_clip, float)
    assert cfg.reward == ["exact_answer", "last_number"]
    assert cfg.reward_weights == [1.0, 0.5] and all(isinstance(w, float) for w in cfg.reward_weights)
    # an override merges into the recipe's mapping, it does not replace the whole section
    assert cfg.train.optim.schedule == "constant" and cfg.train.prompts_per_step == 32
    # the rest is untouched
    assert cfg.warmstart.optim.lr == pytest.approx(3e-3)


def test_ints_become_floats():
    cfg = load_config("default", ["rollout.temperature=1", "train.optim.lr=2"])
    assert cfg.rollout.temperature == 1.0 and type(cfg.rollout.temperature) is float
    assert cfg.train.optim.lr == 2.0 and type(cfg.train.optim.lr) is float


@pytest.mark.parametrize("text,want", [("1e-4", 1e-4), ("3E-5", 3e-5), ("2e3", 2000.0)])
def test_scientific_notation_override(text, want):
    # PyYAML (YAML 1.1) reads 1e-4 (no dot) as a string; float fields must still accept it
    cfg = load_config("default", [f"train.optim.lr={text}"])
    assert cfg.train.optim.lr == pytest.approx(want)


def test_scientific_notation_in_recipe_file(tmp_path):
    path = tmp_path / "sci.yaml"
    path.write_text("train:\n  optim:\n    lr: 1e-4\n")
    assert load_config(str(path)).train.optim.lr == pytest.approx(1e-4)


def test_recipe_file_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntrain:\n  steps: 7\n")
    cfg = load_config(str(path), ["seed=3"])
    assert (cfg.name, cfg.train.steps, cfg.seed) == ("mine", 7, 3)
    assert cfg.warmstart.steps == 0  # schema default, not default.yaml's 800


def test_unknown_top_level_key():
    msg = config_error(["trian.steps=5"])
    assert "trian" in msg
    for key in ("train", "rollout", "algorithm", "model", "data", "seed"):
        assert key in msg
    assert "valid keys" in msg


def test_unknown_nested_key():
    msg = config_error(["train.optim.learning_rate=1.0"])
    assert "train.optim.learning_rate" in msg
    for key in ("lr", "warmup_steps", "schedule", "weight_decay"):
        assert key in msg
    msg = config_error(["algorithm.clip=0.3"])
    assert "algorithm.clip" in msg and "clip_low" in msg and "clip_high" in msg


def test_unknown_key_in_recipe_file(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("rollout:\n  temprature: 0.5\n")
    msg = config_error(recipe=str(path))
    assert "rollout.temprature" in msg and "temperature" in msg


@pytest.mark.parametrize(
    "override,needles",
    [
        ("train.steps=abc", ["train.steps", "abc", "integer"]),
        ("train.steps=1.5", ["train.steps", "1.5", "integer"]),
        ("train.steps=1e3", ["train.steps", "integer"]),
        ("train.steps=true", ["train.steps", "integer"]),
        ("logging.tensorboard=maybe", ["logging.tensorboard", "maybe", "true or false"]),
        ("logging.tensorboard=1", ["logging.tensorboard", "true or false"]),
        ("rollout.temperature=hot", ["rollout.temperature", "hot", "number"]),
        ("rollout.temperature=.nan", ["rollout.temperature", "finite"]),
        ("name=[a, b]", ["name", "string"]),
        ("train.optim=3", ["train.optim", "mapping"]),
        ("reward_weights=oops", ["reward_weights", "oops"]),
    ],
)
def test_wrong_types(override, needles):
    msg = config_error([override])
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_literal_choices_listed():
    msg = config_error(["rollout.backend=xyz"])
    assert "rollout.backend" in msg and "xyz" in msg and "'ascent'" in msg and "'hf'" in msg
    msg = config_error(["algorithm.loss_agg=mean"])
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        assert mode in msg
    msg = config_error(["algorithm.kl_estimator=k9"])
    assert "k1" in msg and "k3" in msg


def test_unknown_advantage_and_loss_names():
    msg = config_error(["algorithm.advantage=ppo_gae_nope"])
    assert "algorithm.advantage" in msg and "ppo_gae_nope" in msg
    assert all(n in msg for n in ("grpo", "dr_grpo", "rloo"))
    msg = config_error(["algorithm.loss=trpo"])
    assert "algorithm.loss" in msg and "trpo" in msg and "ppo_clip" in msg and "pg" in msg


def test_nonexistent_recipe_lists_shipped():
    msg = config_error(recipe="no_such_recipe")
    assert "no_such_recipe" in msg and "default" in msg
    for name in recipe_names():
        assert name in msg


def test_missing_recipe_file(tmp_path):
    msg = config_error(recipe=str(tmp_path / "absent.yaml"))
    assert "absent.yaml" in msg and "does not exist" in msg


def test_malformed_yaml_is_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  steps: [1, 2\nseed: 3\n")
    msg = config_error(recipe=str(path))
    assert "bad.yaml" in msg and "YAML" in msg


def test_recipe_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    msg = config_error(recipe=str(path))
    assert "mapping" in msg and "list" in msg


def test_override_without_equals():
    msg = config_error(["train.steps"])
    assert "train.steps" in msg and "key=value" in msg


def test_override_below_scalar():
    with pytest.raises(ConfigError) as info:
        parse_overrides(["seed=1", "seed.x=2"])
    assert "\n" not in str(info.value) and "seed.x=2" in str(info.value)


def test_parse_overrides_nesting_and_yaml_scalars():
    assert parse_overrides(["a.b.c=1", "a.b.d=x", "a.e=true", "f=", "g=[1, 2]"]) == {
        "a": {"b": {"c": 1, "d": "x"}, "e": True},
        "f": None,
        "g": [1, 2],
    }


def test_rollouts_not_divisible_by_mini_batches():
    msg = config_error(["train.prompts_per_step=3", "rollout.samples_per_prompt=8", "algorithm.mini_batches=5"])
    assert "24" in msg and "algorithm.mini_batches=5" in msg
    # divisible is fine
    assert load_config("default", ["train.prompts_per_step=3", "algorithm.mini_batches=6"]).algorithm.mini_batches == 6


def test_control_needs_warm_start():
    msg = config_error(["warmstart.steps=0", "control.enabled=true"])
    assert "control.enabled" in msg and "warmstart.steps" in msg
    cfg = load_config("default", ["warmstart.steps=0", "control.enabled=false"])
    assert cfg.control.enabled is False


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["train.prompts_per_step=0"], "train.prompts_per_step"),
        (["train.optim.lr=-1"], "train.optim.lr"),
        (["train.steps=-1"], "train.steps"),
        (["rollout.top_p=0"], "rollout.top_p"),
        (["rollout.temperature=-0.5"], "rollout.temperature"),
        (["algorithm.dual_clip=0.5"], "algorithm.dual_clip"),
        (["algorithm.clip_low=-0.1"], "clip_low"),
        (["model.source=hf"], "model.path"),
        (["model.num_heads=3"], "num_heads"),
        (["reward_weights=[1, 2]"], "reward_weights"),
        (["reward=[exact_answer,last_number]", "reward_weights=[0, 0]"], "reward_weights are all 0"),
    ],
)
def test_other_cross_field_checks(overrides, needle):
    assert needle in config_error(overrides)


def test_derived_numbers():
    cfg = load_config(
        "default",
        [
            "train.prompts_per_step=4",
            "rollout.samples_per_prompt=8",
            "algorithm.mini_batches=2",
            "algorithm.ppo_epochs=2",
            "train.micro_batch_size=5",
            "train.steps=10",
        ],
    )
    d = derived(cfg)
    assert d.prompts_per_step == 4
    assert d.samples_per_prompt == 8
    assert d.rollouts_per_step == 32  # 4 * 8
    assert d.optimizer_steps_per_rollout_batch == 4  # 2 epochs * 2 mini-batches
    assert d.sequences_per_optimizer_step == 16  # 32 / 2
    assert d.micro_batches_per_optimizer_step == 4  # ceil(16 / 5)
    assert d.total_rl_optimizer_steps == 40  # 10 steps * 4
    assert d.total_rollouts == 320  # 10 * 32


def test_derived_exact_micro_batches():
    cfg = load_config("default", ["train.prompts_per_step=4", "algorithm.mini_batches=2", "train.micro_batch_size=8"])
    assert derived(cfg).micro_batches_per_optimizer_step == 2  # 16 / 8 exactly, no extra


@pytest.mark.parametrize(
    "override,message",
    [
        ("algorithm.loss=rebel(eta=0)", "eta must be > 0"),
        ("algorithm.advantage=gae(lam=1.5)", "lam must be in"),
        ("algorithm.advantage=taco(floor=0)", "floor must be in"),
        ("algorithm.loss=a_star_po(k=0)", "k must be >= 1"),
        ("algorithm.loss=distil", "needs a teacher"),
        ("algorithm.filter=dapo(max_refill_rounds=-1)", "max_refill_rounds must be >= 0"),
    ],
)
def test_technique_knobs_are_range_checked(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("default", [override])


def test_rollout_precision_checks():
    with pytest.raises(ConfigError, match="rollout.precision='bfloat16' needs rollout.backend=ascent"):
        load_config("default", ["rollout.precision=bfloat16", "rollout.backend=hf", "algorithm.tis_cap=2.0"])
    with pytest.warns(UserWarning, match="without algorithm.tis_cap"):
        load_config("default", ["rollout.precision=bfloat16"])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            load_config("default", ["rollout.precision=bfloat16", "algorithm.tis_cap=2.0"]).rollout.precision
            == "bfloat16"
        )
        assert load_config("default").rollout.precision == "model"


def test_rollout_shards_checks():
    with pytest.raises(ConfigError, match="rollout.shards must be >= 0"):
        load_config("default", ["rollout.shards=-1"])
    with pytest.raises(ConfigError, match="need rollout.backend=ascent"):
        load_config("default", ["rollout.shards=2", "rollout.backend=hf"])
    assert load_config("default", ["rollout.shards=1", "rollout.backend=hf"]).rollout.shards == 1
    assert load_config("default").rollout.shards == 0


def test_rollout_attention_checks():
    assert load_config("default").rollout.attention == "auto"
    assert load_config("default", ["rollout.attention=torch"]).rollout.attention == "torch"
    with pytest.raises(ConfigError, match="rollout.attention"):
        load_config("default", ["rollout.attention=flash"])
    with pytest.raises(ConfigError, match="rollout.attention='native' needs rollout.backend=ascent"):
        load_config("default", ["rollout.attention=native", "rollout.backend=hf"])
    assert load_config("default", ["rollout.backend=hf"]).rollout.attention == "auto"


@pytest.mark.parametrize(
    "override,new",
    [
        ("algorithm.rebel_eta=0.5", "algorithm.loss=rebel(eta=0.5)"),
        ("algorithm.a_star_k=4", "algorithm.loss=a_star_po(k=4)"),
        ("algorithm.teacher=runs/t", "algorithm.loss=distil(teacher=runs/t)"),
        ("algorithm.dynamic_sampling=true", "algorithm.filter=dapo"),
        ("algorithm.max_refill_rounds=2", "algorithm.filter=dapo(max_refill_rounds=2)"),
        ("algorithm.gae_lambda=0.9", "algorithm.advantage=gae(lam=0.9)"),
    ],
)
def test_old_flat_knobs_fail_naming_the_new_spelling(override, new):
    with pytest.raises(ConfigError, match=re.escape(new)):
        load_config("default", [override])


def test_piece_specs_in_both_spellings_resolve_to_one_canonical_string():
    a = load_config(
        "default", ["algorithm.loss=a_star_po(k=4, beta=0.5)", "algorithm.filter=dapo(max_refill_rounds=2)"]
    )
    b = load_config("default", ["algorithm.loss.a_star_po.k=4", "algorithm.filter.dapo.max_refill_rounds=2"])
    assert a.algorithm.loss == b.algorithm.loss == "a_star_po(k=4)"  # beta=0.5 is the default: dropped
    assert a.algorithm.filter == b.algorithm.filter == "dapo(max_refill_rounds=2)"
    assert config_from_dict(to_dict(a)) == a  # config.yaml round trip
    with pytest.raises(ConfigError, match="takes no parameters"):
        load_config("default", ["algorithm.advantage=grpo(alpha=1)"])
    with pytest.raises(ConfigError, match="unknown key .*nope"):
        load_config("default", ["algorithm.loss=a_star_po(nope=1)"])
    with pytest.raises(ConfigError, match="name one piece"):
        load_config("default", ["algorithm.loss.a_star_po.k=4", "algorithm.loss.rebel.eta=2"])


def test_device_moved_into_the_model_section():
    from ascent.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="device was moved: write model.device=cuda"):
        load_config("default", ["device=cuda"])
    assert load_config("default", ["model.device=cuda:1"]).model.device == "cuda:1"
    assert load_config("default", ["device=cpu"]).model.device == "cpu"  # earlier runs' config.yaml say so


def test_pieces_warn_about_settings_they_need():
    import warnings

    from ascent.config import load_config

    with pytest.warns(UserWarning, match="kl_cov acts only once the policy has moved"):
        load_config("default", ["algorithm.loss=kl_cov"])
    with pytest.warns(UserWarning, match="explorer=param_noise samples from another distribution"):
        load_config("default", ["rollout.explorer=param_noise"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # paired as they should be: silent
        load_config("default", ["algorithm.loss=kl_cov", "algorithm.mini_batches=2"])
        load_config("default", ["rollout.explorer=param_noise", "algorithm.tis_cap=2"])
        load_config("default", ["rollout.explorer=prefix"])
