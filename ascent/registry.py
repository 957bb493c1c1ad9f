"""Name -> component registries, filled by decorators.

Every kind of algorithm piece (advantage estimator, policy loss, reward function, task, ...) has ONE
registry and ONE call signature. Registering a name twice is an error; looking up an unknown name fails
with the list of valid names.

A piece may declare its own parameters: a frozen dataclass with a docstring under each field and its range
checks in `__post_init__` (`Registry.register(name, params=TacoParams)`). Recipes and the command line set
them in the piece's spec, `taco(alpha=0.05)` (or, in YAML, `{taco: {alpha: 0.05}}`); `Registry.resolve`
builds and checks them and returns a `Piece` that calls the function with `params=` bound.

Every piece also declares its provenance at registration (`Provenance`): the `paper` it implements (a `Paper`,
a tuple of them, or None for ascent's own design), its `fidelity` (`faithful`: the paper's mechanism;
`reduced`: part of it or a reading of it, each difference listed; `ascent`: ascent's own piece, built on the
papers named if any) and its `departures` from the paper, one line each with the reason. A malformed
declaration raises at registration; a piece registered without one is recorded as lacking provenance and
fails `tests/test_provenance.py`. `ascent list KIND --params` prints it and docs/references.md is generated
from it (`ascent references --write`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, Optional, TypeVar

from ascent.typed import ConfigError, build, fields_help, format_spec, parse_spec

F = TypeVar("F", bound=Callable)

FIDELITIES = ("faithful", "reduced", "ascent")
"""`faithful`: does what the paper describes (defaults and engineering details may differ, listed as departures);
`reduced`: implements part of the paper's mechanism, or a reading of it where the paper leaves the form open,
every difference listed as a departure; `ascent`: ascent's own piece, no paper (or the papers it builds on)."""

_ALL_REGISTRIES: list["Registry"] = []


@dataclass(frozen=True)
class Paper:
    """A paper a piece implements: how docs/references.md lists it.

    >>> Paper("GRPO", "Shao et al.", 2024, "DeepSeekMath", "arXiv:2402.03300").cite()
    'Shao et al. 2024, arXiv:2402.03300'
    """

    key: str
    """Short name used in tables ("GRPO", "REBEL")."""
    authors: str
    """"Shao et al.", "Bradley & Terry"; "not found" when the search found none."""
    year: Optional[int]
    """Year of the arXiv version or of publication; None when unknown."""
    title: str
    """The title (with the venue in parentheses where known)."""
    ref: str
    """"arXiv:2402.03300", or the venue / "not found" with what is known when there is no arXiv id."""
    note: str = ""
    """Where ascent uses the paper outside registered pieces (a command, a config key); free text."""
    section: str = "methods"
    """docs/references.md section: `methods`, `baselines`, `systems` or `related` (named, not implemented)."""

    def __post_init__(self) -> None:
        for name in ("key", "authors", "title", "ref"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"Paper {self.key!r}: {name} is empty")
        if self.section not in PAPER_SECTIONS:
            raise ValueError(f"Paper {self.key!r}: section {self.section!r} is not one of {', '.join(PAPER_SECTIONS)}")

    def cite(self) -> str:
        """`authors year, ref`, the short form used by `ascent list --params` (what is not known is left out).

        >>> Paper("ExPPO", "not found", None, "not found (ExPPO)", "not found").cite()
        'arXiv id not found'
        """
        who = "" if self.authors == "not found" else self.authors
        head = f"{who} {self.year or ''}".strip()
        where = "arXiv id not found" if self.ref == "not found" else self.ref
        return f"{head}, {where}" if head else where


PAPER_SECTIONS = ("methods", "baselines", "systems", "related")

_MISSING: Any = object()


@dataclass(frozen=True)
class Provenance:
    """What a piece implements and how closely (see FIDELITIES); checked when it is built."""

    papers: tuple[Paper, ...]
    fidelity: str
    departures: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.fidelity not in FIDELITIES:
            raise ValueError(f"fidelity {self.fidelity!r} is not one of {', '.join(FIDELITIES)}")
        if not all(isinstance(p, Paper) for p in self.papers):
            raise ValueError(f"paper must be a Paper, a tuple of Papers or None, got {self.papers!r}")
        if self.fidelity in ("faithful", "reduced") and not self.papers:
            raise ValueError(f"fidelity {self.fidelity!r} needs the paper; ascent's own pieces are fidelity 'ascent'")
        if self.fidelity == "reduced" and not self.departures:
            raise ValueError("fidelity 'reduced' needs its departures: one line each, what differs and why")
        for line in self.departures:
            if not isinstance(line, str) or not line.strip() or "\n" in line:
                raise ValueError(f"each departure is one non-empty line of text, got {line!r}")

    @classmethod
    def declare(cls, paper: Any, fidelity: Optional[str], departures: Any) -> Optional["Provenance"]:
        """The provenance of `register(paper=, fidelity=, departures=)`; None when nothing was declared."""
        if fidelity is None and paper is _MISSING and not departures:
            return None
        if fidelity is None:
            raise ValueError("paper/departures given without fidelity (faithful, reduced or ascent)")
        if paper is _MISSING:
            raise ValueError("fidelity given without paper (a Paper, a tuple of Papers, or None for ascent's own)")
        if isinstance(departures, str):
            raise ValueError("departures is a tuple of lines, not one string")
        papers = () if paper is None else (paper,) if isinstance(paper, Paper) else tuple(paper)
        return cls(papers, fidelity, tuple(departures))

    def lines(self) -> list[str]:
        """What `ascent list --params` prints.

        >>> p = Paper("GRPO", "Shao et al.", 2024, "DeepSeekMath", "arXiv:2402.03300")
        >>> Provenance((p,), "reduced", ("no critic: group baseline",)).lines()
        ['paper: GRPO (Shao et al. 2024, arXiv:2402.03300)', 'fidelity: reduced', 'departs: no critic: group baseline']
        """
        out = [f"paper: {p.key} ({p.cite()})" for p in self.papers] or ["paper: none (ascent's own)"]
        return out + [f"fidelity: {self.fidelity}"] + [f"departs: {d}" for d in self.departures]


class UnknownNameError(KeyError):
    """An unknown component name; the message lists the valid ones."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0])


@dataclass(frozen=True)
class Entry(Generic[F]):
    """A registered component: its name, the callable, a one-line description, its parameter class."""

    name: str
    fn: F
    description: str
    params: Optional[type] = None
    """Frozen dataclass of the piece's parameters (None: it takes none)."""
    state: Optional[type] = None
    """Class of the piece's run state and stages (`ascent.algorithms.state.PieceState`), None: stateless."""
    provenance: Optional[Provenance] = None
    """Paper, fidelity and departures declared at registration; None: not declared (a test fails on it)."""


@dataclass(frozen=True)
class Piece(Generic[F]):
    """A resolved spec: the registered callable with its checked parameters bound.

    Calling it calls `fn(*args, params=params)` (or `fn(*args)` for a piece without parameters); attributes
    of the function (`requires`, ...) are readable on the piece.
    """

    name: str
    fn: F
    params: Any = None
    spec: str = ""
    """The canonical spec string, `name(key=value, ...)` with the non-default parameters."""
    state: Optional[type] = None
    """The piece's state class (see `Entry.state`); the trainer makes one per run: `state(params, services)`."""
    provenance: Optional[Provenance] = None
    """The registered piece's paper, fidelity and departures (see `Entry.provenance`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.params is not None:
            kwargs["params"] = self.params
        return self.fn(*args, **kwargs)

    @property
    def requires(self) -> frozenset[str]:
        """What the piece declares it needs beyond its kind's default inputs (`fn.requires`)."""
        return frozenset(getattr(self.fn, "requires", ()))


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


class Registry(Generic[F]):
    """A named collection of components of one kind.

    >>> r = Registry("greetings")
    >>> @r.register("hello")
    ... def hello():
    ...     '''Say hello.'''
    ...     return "hi"
    >>> r.get("hello")()
    'hi'
    >>> r.names()
    ['hello']
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[F]] = {}
        _ALL_REGISTRIES.append(self)

    def register(
        self,
        name: str,
        description: str | None = None,
        params: type | None = None,
        state: type | None = None,
        *,
        paper: Any = _MISSING,
        fidelity: str | None = None,
        departures: tuple[str, ...] = (),
    ) -> Callable[[F], F]:
        """Decorator: register `fn` under `name`; the description defaults to the docstring's first line;
        `params`: the frozen dataclass of its parameters, passed to it as `params=`; `state`: the class that
        holds what the piece keeps across steps or prepares before the first (a critic, a stage-1 estimate);
        `paper`, `fidelity`, `departures`: its provenance (see `Provenance`; a malformed one raises here)."""
        try:
            provenance = Provenance.declare(paper, fidelity, departures)
        except ValueError as e:
            raise ValueError(f"{self.kind} {name!r}: {e}") from None

        def deco(fn: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            doc = description or (fn.__doc__ or "").strip().splitlines()[0:1]
            text = doc if isinstance(doc, str) else (doc[0] if doc else "")
            self._entries[name] = Entry(
                name=name, fn=fn, description=text.strip(), params=params, state=state, provenance=provenance
            )
            return fn

        return deco

    def entry(self, name: str) -> Entry[F]:
        """The entry registered as `name`; raises UnknownNameError listing the valid names."""
        if name not in self._entries:
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {', '.join(self.names())}")
        return self._entries[name]

    def get(self, name: str) -> F:
        """The component registered as `name`; raises UnknownNameError listing the valid names."""
        return self.entry(name).fn

    def resolve(self, spec: str, key: str = "") -> Piece[F]:
        """`name` or `name(key=value, ...)` -> a Piece with its parameters built and checked; a bad name,
        an unknown parameter or a value out of range raises ConfigError naming `key` and the piece.

        >>> import dataclasses
        >>> from dataclasses import dataclass
        >>> r = Registry("scale")
        >>> @dataclass(frozen=True)
        ... class TimesParams:
        ...     k: float = 2.0
        ...     '''The factor.'''
        >>> @r.register("times", params=TimesParams)
        ... def times(x, params):
        ...     return x * params.k
        >>> r.resolve("times(k=3)")(2), r.resolve("times")(2), r.resolve("times(k=3)").spec
        (6.0, 4.0, 'times(k=3.0)')
        """
        where = f"{key}: " if key else ""
        name, kwargs = parse_spec(spec)
        if name not in self._entries:
            raise ConfigError(f"{where}unknown {self.kind} {name!r}; valid names: {', '.join(self.names())}")
        entry = self._entries[name]
        if entry.params is None:
            if kwargs:
                raise ConfigError(f"{where}{self.kind} {name!r} takes no parameters, got {', '.join(kwargs)}")
            return Piece(name, entry.fn, None, name, entry.state, entry.provenance)
        params = build(entry.params, kwargs, prefix=f"{key + ' ' if key else ''}{name}")
        changed = {
            f.name: getattr(params, f.name)
            for f in dataclasses.fields(params)
            if getattr(params, f.name) != _default(f)
        }
        return Piece(name, entry.fn, params, format_spec(name, changed), entry.state, entry.provenance)

    def params_help(self, name: str) -> list[tuple[str, str, Any, str]]:
        """(parameter, type, default, help) of a piece's parameters (empty when it takes none)."""
        cls = self.entry(name).params
        return fields_help(cls) if cls is not None else []

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def entries(self) -> Iterator[Entry[F]]:
        """Registered entries, sorted by name."""
        return (self._entries[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def all_registries() -> list[Registry]:
    """Every Registry made so far (in the modules imported so far), in creation order."""
    return list(_ALL_REGISTRIES)
