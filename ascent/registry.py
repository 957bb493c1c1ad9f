"""Name -> component registries, filled by decorators.

Every kind of algorithm piece (advantage estimator, policy loss, reward function, task, ...) has ONE
registry and ONE call signature. Registering a name twice is an error; looking up an unknown name fails
with the list of valid names.

A piece may declare its own parameters: a frozen dataclass with a docstring under each field and its range
checks in `__post_init__` (`Registry.register(name, params=TacoParams)`). Recipes and the command line set
them in the piece's spec, `taco(alpha=0.05)` (or, in YAML, `{taco: {alpha: 0.05}}`); `Registry.resolve`
builds and checks them and returns a `Piece` that calls the function with `params=` bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, Optional, TypeVar

from ascent.typed import ConfigError, build, fields_help, format_spec, parse_spec

F = TypeVar("F", bound=Callable)


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

    def register(
        self, name: str, description: str | None = None, params: type | None = None, state: type | None = None
    ) -> Callable[[F], F]:
        """Decorator: register `fn` under `name`; the description defaults to the docstring's first line;
        `params`: the frozen dataclass of its parameters, passed to it as `params=`; `state`: the class that
        holds what the piece keeps across steps or prepares before the first (a critic, a stage-1 estimate)."""

        def deco(fn: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            doc = description or (fn.__doc__ or "").strip().splitlines()[0:1]
            text = doc if isinstance(doc, str) else (doc[0] if doc else "")
            self._entries[name] = Entry(name=name, fn=fn, description=text.strip(), params=params, state=state)
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
            return Piece(name, entry.fn, None, name, entry.state)
        params = build(entry.params, kwargs, prefix=f"{key + ' ' if key else ''}{name}")
        changed = {
            f.name: getattr(params, f.name)
            for f in dataclasses.fields(params)
            if getattr(params, f.name) != _default(f)
        }
        return Piece(name, entry.fn, params, format_spec(name, changed), entry.state)

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
