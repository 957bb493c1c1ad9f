"""Provenance lives in the registry: every registered piece declares its paper, its fidelity and its departures
(`Registry.register(paper=, fidelity=, departures=)`), malformed declarations fail at registration, and
docs/references.md is generated from them (`ascent references --write`)."""

from __future__ import annotations

import pytest

from ascent.app.references import import_all, missing_provenance, registries, unlisted_registries
from ascent.registry import Paper, Provenance, Registry

PAPER = Paper("X", "A et al.", 2025, "A title", "arXiv:2501.00001")

# Pieces registered before provenance existed and not yet declared: this set only shrinks (a piece added
# now must declare its provenance at registration; see test_every_piece_declares_its_provenance).
NOT_YET_DECLARED = frozenset(
    [
        "advantages aem",
        "advantages explore_group",
        "advantages exppo",
        "advantages gae",
        "advantages lite_ppo",
        "advantages maxrl",
        "advantages prm",
        "advantages progress",
        "advantages q_evolve",
        "advantages rapo",
        "advantages reinforce_pp",
        "advantages relax",
        "advantages rft",
        "advantages sa_mrpo",
        "advantages spa",
        "advantages staged",
        "advantages success_adaptive",
        "advantages taco",
        "advantages tmn",
        "advantages tree",
        "losses a_star_po",
        "losses agro",
        "losses cispo",
        "losses clip_cov",
        "losses edge",
        "losses entropy_bonus",
        "losses gspo",
        "losses kl_cov",
        "losses opd",
        "losses pg",
        "losses ppo_clip",
        "losses rebel",
        "filters dapo",
        "filters none",
        "samplers coba",
        "samplers pass_rate",
        "samplers rapo_prune",
        "samplers staged",
        "samplers uniform",
        "explorers branch",
        "explorers edge",
        "explorers exit",
        "explorers iib",
        "explorers mcts",
        "explorers param_noise",
        "explorers plain",
        "explorers prefix",
        "explorers probe",
        "explorers replay",
        "rewards answer_em",
        "rewards answer_f1",
        "rewards answer_is",
        "rewards base_and_bonus",
        "rewards brier",
        "rewards code_tests",
        "rewards confidence",
        "rewards constraints",
        "rewards darl",
        "rewards evidence_recall",
        "rewards evidence_rm",
        "rewards exact_answer",
        "rewards format",
        "rewards game_score",
        "rewards game_won",
        "rewards gated_diversity",
        "rewards igpo",
        "rewards judge",
        "rewards last_number",
        "rewards lp_solver",
        "rewards math_verify",
        "rewards meta_tags",
        "rewards overlong",
        "rewards peer_consensus",
        "rewards reward_model",
        "rewards rm_ensemble",
        "rewards rm_online",
        "rewards round_discount",
        "rewards self_judge",
        "rewards source_consistency",
        "rewards source_similarity",
        "rewards trace",
        "constraints contains",
        "constraints ends_with",
        "constraints lowercase",
        "constraints max_chars",
        "constraints max_words",
        "constraints min_chars",
        "constraints min_words",
        "constraints no_commas",
        "constraints not_contains",
        "constraints regex",
        "constraints starts_with",
        "constraints uppercase",
        "tasks addition",
        "tasks code_functions",
        "tasks cues",
        "tasks gsm_symbolic",
        "tasks jsonl",
        "tasks search_world",
        "tasks textworld",
        "tasks word_problems",
        "backends ascent",
        "backends cached",
        "backends hf",
        "backends vllm",
        "runtimes local",
        "runtimes ray",
        "preference dpo",
        "preference ipo",
        "preference simpo",
        "warmstart-data calibsft",
        "warmstart-data teacher",
        "classic dqn",
        "classic md3qn",
        "classic mrq",
        "classic ovm_dqn",
        "classic ppo",
        "classic retrieval_dqn",
        "classic sac",
        "classic sqirl",
        "classic_wrappers action_repeat",
        "classic_wrappers arli",
        "classic_wrappers contextual",
        "classic_wrappers discrete_actions",
        "classic_wrappers distractors",
        "classic_wrappers latency",
        "classic_wrappers mujoco_channels",
        "classic_wrappers pendulum_channels",
        "classic_wrappers seek",
    ]
)


def test_every_registry_is_listed_and_every_module_imports():
    assert import_all() == []
    assert unlisted_registries() == [], "add the registry to ascent.app.references.registries()"


def test_every_piece_declares_its_provenance():
    import_all()
    missing = sorted(set(missing_provenance()) - NOT_YET_DECLARED)
    assert not missing, (
        f"pieces without provenance: {', '.join(missing)}. Declare it at registration: "
        '`register("name", ..., paper=papers.X or Paper(key, authors, year, title, "arXiv:..."), '
        'fidelity="faithful" | "reduced" | "ascent", departures=("what differs from the paper, and why", ...))` '
        '(ascent/registry.py: Provenance; ascent\'s own piece: paper=None, fidelity="ascent"); then '
        "`ascent references --write`"
    )


def test_a_declared_provenance_travels_to_the_resolved_piece():
    r = Registry("test piece")
    r.register("a", paper=PAPER, fidelity="reduced", departures=("no critic: a group baseline",))(lambda: 1)
    r.register("b", paper=None, fidelity="ascent")(lambda: 2)
    r.register("c")(lambda: 3)
    assert r.resolve("a").provenance == Provenance((PAPER,), "reduced", ("no critic: a group baseline",))
    assert r.entry("b").provenance == Provenance((), "ascent")
    assert r.entry("c").provenance is None  # not declared: the strict test above fails on such a piece
    r.register("d", paper=(PAPER, PAPER), fidelity="faithful")(lambda: 4)
    assert r.entry("d").provenance.papers == (PAPER, PAPER)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"paper": PAPER, "fidelity": "faithfull"}, "is not one of faithful, reduced, ascent"),
        ({"paper": None, "fidelity": "faithful"}, "needs the paper"),
        ({"paper": PAPER, "fidelity": "reduced"}, "needs its departures"),
        ({"paper": PAPER, "fidelity": "reduced", "departures": "one string"}, "tuple of lines"),
        ({"paper": PAPER, "fidelity": "reduced", "departures": ("two\nlines",)}, "one non-empty line"),
        ({"paper": PAPER, "fidelity": "reduced", "departures": ("",)}, "one non-empty line"),
        ({"paper": PAPER}, "without fidelity"),
        ({"departures": ("x",)}, "without fidelity"),
        ({"fidelity": "faithful"}, "without paper"),
        ({"paper": "Shao et al. 2024", "fidelity": "faithful"}, "must be a Paper"),
    ],
)
def test_a_malformed_provenance_fails_at_registration(kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        Registry("test piece").register("p", **kwargs)
    assert str(err.value).startswith("test piece 'p': ")


@pytest.mark.parametrize(
    "fields, message",
    [
        (("X", "", 2025, "T", "arXiv:1"), "authors is empty"),
        (("X", "A", 2025, "T", " "), "ref is empty"),
    ],
)
def test_a_malformed_paper_fails(fields, message):
    with pytest.raises(ValueError, match=message):
        Paper(*fields)
    with pytest.raises(ValueError, match="section"):
        Paper("X", "A", 2025, "T", "arXiv:1", section="misc")


def test_registries_cover_every_list_kind():
    from ascent.cli import LIST_KINDS

    assert set(registries()) == set(LIST_KINDS) - {"recipes"}
