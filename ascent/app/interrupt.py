"""Ctrl-C during a run: stop at the next clean point (the end of a step or an evaluation batch), save, and say
how to continue, instead of a KeyboardInterrupt traceback from deep inside the model's forward pass.

The first SIGINT only sets a flag that the run checks after each step; a second one stops at once (the last
checkpoint stands). Installed only in the main thread, for the length of a `with graceful_stop():` block.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


class StopRequested(Exception):
    """Ctrl-C asked the run to stop; raised at a clean point, after what is done has been saved."""

    def __init__(self, where: str) -> None:
        super().__init__(f"stopped by Ctrl-C at {where}")
        self.where = where


class _Flag:
    requested = False


_FLAG = _Flag()


def stop_requested() -> bool:
    """Whether Ctrl-C was pressed since the current `graceful_stop` block began."""
    return _FLAG.requested


def check_stop(where: str) -> None:
    """Raise StopRequested when Ctrl-C was pressed (call where stopping loses nothing, e.g. mid-evaluation)."""
    if _FLAG.requested:
        raise StopRequested(where)


def _handler(signum: int, frame: Any) -> None:
    if _FLAG.requested:
        raise KeyboardInterrupt
    _FLAG.requested = True
    from ascent.logging.metrics import console

    console.print("\nCtrl-C: stopping after this step and saving (press Ctrl-C again to stop at once)", markup=False)


@contextmanager
def graceful_stop() -> Iterator[None]:
    """SIGINT sets the stop flag for the length of the block (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _FLAG.requested = False
    previous = signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _FLAG.requested = False
