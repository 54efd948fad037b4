"""Selective memory: decide what is worth remembering, keep secrets and PII out, write and index it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragstead.memory.decision import MemoryDecision, decide
    from ragstead.memory.files import RememberResult, remember

# Each name imported on first use (PEP 562): `status` reads memory.files' file names without the decision rules.
_LAZY = {"MemoryDecision": "ragstead.memory.decision", "decide": "ragstead.memory.decision",
         "RememberResult": "ragstead.memory.files", "remember": "ragstead.memory.files"}

__all__ = ["MemoryDecision", "RememberResult", "decide", "remember"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
