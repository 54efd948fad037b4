"""Consent before egress: which answerers may send text off the machine, and which documents never go.

A remote answerer (OpenAI, Gemini, an OpenAI-compatible server that is not on this machine, a plugin's that does not
declare itself local: answer/registry.py) is used only when
the project's config names it in `answerers = ["openai", ...]` (or the older `answerer = "openai"`) or a flag
does (`ask --llm openai`): a key in the environment alone, set for some other program, never sends private
text anywhere, and neither does RAGSTEAD_ANSWERERS there (it only orders the chain). An endpoint on loopback (Ollama,
llama.cpp's server, LM Studio) is local and needs no consent. A document marked local-only (front matter
`local_only: true`, or a `local_only` pattern of the config) never goes into a remote prompt.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pathspec

from ragstead.answer.registry import DEFAULT_ORDER, LOCAL_NAMES, check_names, kind_of
from ragstead.core.egress import is_local_url
from ragstead.documents.loaders import LOCAL_ONLY_TAG


def remote_names(names: Collection[str]) -> tuple[str, ...]:
    """The answerers `names` consents to (config `answerers`, `--llm`), checked against the registry
    (answer/registry.py: the built-ins and the plugins' entry points); "local" and "extractive" consent to none.
    A plugin named here is consented to whether or not it needs it: one that declared itself local never asks."""
    chosen = tuple(dict.fromkeys(n.strip().lower() for n in names if n.strip()))
    check_names(chosen, extra=("local",))
    return tuple(n for n in chosen if n not in LOCAL_NAMES)


def is_loopback_url(url: str) -> bool:
    """Whether `url` points at this machine (localhost, 127.0.0.0/8, ::1): a local answerer."""
    return is_local_url(url)


def consent_hint(env: Mapping[str, str], remote: Collection[str], order: Collection[str] | None = None) -> str | None:
    """One line for a person whose environment sets up a remote answerer that was not used (no consent), else
    None. An answerer the configured `order` (default: the built-ins' order) leaves out was declined, not
    overlooked: no line for it."""
    unused = [name for name in (DEFAULT_ORDER if order is None else order) if name not in remote
              and (kind := kind_of(name)).configured(env) and not kind.is_local(env)]
    if not unused:
        return None
    name = unused[0]
    verb = "is" if len(unused) == 1 else "are"
    return (f"answered on this machine: {' and '.join(unused)} {verb} set up (a key or an endpoint), but nothing "
            f"is sent to a remote LLM "
            f"unless you opt in (ragstead.toml: answerers = [\"{name}\", \"extractive\"], or the older "
            f"answerer = \"{name}\"; or ask --llm {name}); see docs/privacy.md")


class LocalOnly:
    """Which documents stay on the machine: `patterns` (gitignore syntax, project-relative) or the tag."""

    def __init__(self, patterns: Collection[str] = ()) -> None:
        self.spec = pathspec.GitIgnoreSpec.from_lines(list(patterns)) if patterns else None

    def __call__(self, file_path: str, tags: Collection[str] = ()) -> bool:
        return LOCAL_ONLY_TAG in tags or (self.spec is not None and self.spec.match_file(file_path))
