"""Selective memory: decide what is worth remembering, keep secrets and PII out, write and index it."""

from ragstead.memory.decision import MemoryDecision, decide
from ragstead.memory.files import RememberResult, remember

__all__ = ["MemoryDecision", "RememberResult", "decide", "remember"]
