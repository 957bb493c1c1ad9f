"""JSON that every reader accepts: NaN and ±inf become null (Python's `json` writes bare `NaN`/`Infinity`,
which `JSON.parse` in a browser rejects: one NaN would blank a whole report page), numpy and torch scalars
become numbers, anything else its `str`.

>>> dumps({"loss": float("nan"), "acc": [0.5, float("inf")], "n": 3})
'{"loss": null, "acc": [0.5, null], "n": 3}'
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """`obj` with every non-finite float (nested in dicts, lists, tuples) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _default(obj: Any) -> Any:
    """numpy / torch scalars and arrays as plain numbers and lists (non-finite -> null); else str(obj)."""
    for method in ("tolist", "item"):
        if hasattr(obj, method):
            try:
                return finite(getattr(obj, method)())
            except (TypeError, ValueError, RuntimeError):
                pass
    return str(obj)


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` that never writes NaN/Infinity (see the module docstring)."""
    return json.dumps(finite(obj), allow_nan=False, default=_default, **kwargs)
