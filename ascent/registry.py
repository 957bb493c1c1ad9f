"""Name -> component registries, filled by decorators.

Every kind of algorithm piece (advantage estimator, policy loss, reward function, ...) has ONE registry
and ONE call signature. Registering a name twice is an error; looking up an unknown name fails with the
list of valid names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


class UnknownNameError(KeyError):
    """An unknown component name; the message lists the valid ones."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0])


@dataclass(frozen=True)
class Entry(Generic[F]):
    """A registered component: its name, the callable, and a one-line description."""

    name: str
    fn: F
    description: str


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

    def register(self, name: str, description: str | None = None) -> Callable[[F], F]:
        """Decorator: register `fn` under `name`; the description defaults to the docstring's first line."""

        def deco(fn: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            doc = description or (fn.__doc__ or "").strip().splitlines()[0:1]
            text = doc if isinstance(doc, str) else (doc[0] if doc else "")
            self._entries[name] = Entry(name=name, fn=fn, description=text.strip())
            return fn

        return deco

    def get(self, name: str) -> F:
        """The component registered as `name`; raises UnknownNameError listing the valid names."""
        if name not in self._entries:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; valid names: {', '.join(self.names())}"
            )
        return self._entries[name].fn

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def entries(self) -> Iterator[Entry[F]]:
        """Registered entries, sorted by name."""
        return (self._entries[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._entries
