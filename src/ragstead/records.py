"""Typed results that still read like the dicts they replaced.

A public result (a citation's locator, an answer's gate, a search's filters) is a frozen dataclass with
`to_dict()`, the documented JSON. `Record` adds the read-only mapping protocol on top (`r["page"]`,
`r.get("url")`, `"url" in r`, `dict(r)`, `{**r}`), so code written against the dicts keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Record:
    """Mapping-style reads of a typed result, through its `to_dict()`."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def keys(self) -> Any:
        return self.to_dict().keys()

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())
