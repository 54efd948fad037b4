"""Registries: a name maps to a "module:attr" reference, imported the first time that name is used (llm's shape).

Each kind of plugin has a group, e.g. "ragstead.stores". The built-ins are declared once in code, in the same
"module:attr" form and loaded the same way; another package adds a name with an entry point in that group:

    [project.entry-points."ragstead.stores"]
    mystore = "mypackage.store:BACKEND"

The built-ins stay in code, not in ragstead's own entry points, so a source tree or an install whose metadata is
older than the code still opens its stores. A built-in name wins over an entry point of the same name, in any
case or width ("OpenAI", full-width "ｏｐｅｎａｉ" are dropped): a plugin adds a store, it does not replace the embedded
one, nor pass for it in a list. The installed metadata is read only when a name is not a built-in (or the names are
listed for an error), so opening the default store reads no dist-info at all. A plugin that fails to import is one
ConfigError line naming it, never a traceback.
"""

from __future__ import annotations

import importlib
import unicodedata
from collections.abc import Mapping
from typing import Any

from ragstead.errors import ConfigError

__all__ = ["Registry", "error_line"]


class Registry:
    """The names of one plugin group; `get(name)` imports and returns what the name points at, once."""

    def __init__(self, group: str, builtins: Mapping[str, str]) -> None:
        self.group = group
        self._builtins = dict(builtins)
        self._plugins: dict[str, str] | None = None  # read from the entry points on first need
        self._loaded: dict[str, Any] = {}
        self._failed: dict[str, str] = {}  # the error line of a plugin that could not be imported

    @property
    def builtins(self) -> Mapping[str, str]:
        """The names declared in code, each with its "module:attr"."""
        return dict(self._builtins)

    def get(self, name: str) -> Any | None:
        """What `name` points at (imported on this first use), or None for a name nobody registered."""
        if name in self._loaded:
            return self._loaded[name]
        if name in self._failed:  # tried once: a broken plugin's import (and its side effects) does not run per file
            raise ConfigError(self._failed[name])
        reference = self._builtins.get(name) or self._entry_points().get(name)
        if reference is None:
            return None
        try:
            self._loaded[name] = _import(reference)
        except Exception as exc:  # a plugin's import error, or a reference to nothing: its name, not a traceback
            self._failed[name] = f"the {self.group} plugin {name!r} ({reference}) cannot be loaded: {error_line(exc)}"
            raise ConfigError(self._failed[name]) from exc
        return self._loaded[name]

    def has(self, name: str) -> bool:
        """Whether `name` is registered, without importing what it points at."""
        return name in self._builtins or name in self._entry_points()

    def names(self) -> tuple[str, ...]:
        """Every registered name, built-ins and plugins, sorted."""
        return tuple(sorted({*self._builtins, *self._entry_points()}))

    def plugin_names(self) -> tuple[str, ...]:
        """The names other packages added (not the built-ins), sorted."""
        return tuple(sorted(set(self._entry_points()) - set(self._builtins)))

    def _entry_points(self) -> dict[str, str]:
        if self._plugins is None:
            from importlib.metadata import entry_points

            # A plugin's name is kept folded, as consent and the settings read names ("Echo" is `--llm echo`).
            taken = {_folded(name) for name in self._builtins}
            self._plugins = {(point.name if point.name in self._builtins else _folded(point.name)): point.value
                             for point in entry_points(group=self.group)
                             if point.name in self._builtins or _folded(point.name) not in taken}
        return self._plugins


def error_line(exc: BaseException) -> str:
    """What a plugin raised, as one line of a message: its type and text, blanks folded, at most 300 characters."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def _folded(name: str) -> str:
    """A name as a person reads it: compatibility forms (full-width letters), case and surrounding blanks folded."""
    return unicodedata.normalize("NFKC", name).casefold().strip()


def _import(reference: str) -> Any:
    module_name, _, attr = reference.partition(":")
    target: Any = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        target = getattr(target, part)
    return target
