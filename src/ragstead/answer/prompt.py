"""Prompt templates: TOML files (built-ins in `answer/prompts/`) that turn a question and its retrieved
chunks into chat messages. Chunks always go in as a JSON array (`Context.to_dict`), never spliced into the
instructions, and templates are validated when loaded (docs/design.md, "Prompts and injection screening").
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ragstead.answer.base import REFUSAL, Context
from ragstead.answer.screening import screen
from ragstead.errors import RagsteadError

DEFAULT_TEMPLATE = "grounded"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_ALLOWED = {"system": ({"refusal"}, set()), "user": ({"question", "documents", "refusal"}, {"question", "documents"})}


class TemplateError(RagsteadError):
    """A template that cannot be found or does not validate."""


@dataclass(frozen=True)
class Example:
    """A worked few-shot example: a question, its documents (the JSON data shape) and the ideal answer."""

    question: str
    documents: list[dict[str, Any]]
    answer: str


@dataclass(frozen=True)
class PromptTemplate:
    """A validated template. `messages()` renders it as OpenAI-style chat messages."""

    name: str
    description: str
    system: str
    user: str
    examples: tuple[Example, ...] = ()
    source: str = ""
    refusal: str = REFUSAL  # the sentence it teaches for a refusal (the project's `refusal` setting)

    def messages(self, question: str, contexts: list[Context]) -> list[dict[str, str]]:
        """system, then (user, assistant) per example, then the real question with its documents."""
        out = [{"role": "system", "content": self.system.format(refusal=self.refusal)}]
        for example in self.examples:
            docs = [c.to_dict() for c in _example_contexts(example.documents)]
            out.append({"role": "user", "content": self._user(example.question, docs)})
            out.append({"role": "assistant", "content": example.answer.format(refusal=self.refusal)})
        out.append({"role": "user", "content": self._user(question, [c.to_dict() for c in contexts])})
        return out

    def _user(self, question: str, documents: list[dict[str, Any]]) -> str:
        data = json.dumps(documents, ensure_ascii=False, indent=1)
        return self.user.format(question=question, documents=data, refusal=self.refusal)


def _example_contexts(documents: list[dict[str, Any]]) -> list[Context]:
    """An example's documents in exactly the shape real chunks have, screened like them."""
    return [Context(i, d["text"], d["source"], {"page": d.get("page"), "section_path": d.get("section_path"),
                                                 "chunk_id": f"example-{i}"}, 1.0, screen(d["text"]))
            for i, d in enumerate(documents, 1)]


def catalog() -> dict[str, Path]:
    """The built-in templates by name."""
    folder = resources.files("ragstead.answer") / "prompts"
    return {Path(str(f)).stem: Path(str(f)) for f in folder.iterdir() if str(f).endswith(".toml")}


def load_template(name_or_path: str | None = None) -> PromptTemplate:
    """A built-in template by name (default `grounded`), or a template file by path (`./my.toml`)."""
    wanted = name_or_path or DEFAULT_TEMPLATE
    builtin = catalog()
    if wanted in builtin:
        path = builtin[wanted]
    elif wanted.endswith(".toml") and Path(wanted).is_file():
        path = Path(wanted)
    else:
        raise TemplateError(f"unknown template {wanted!r}; built-in: {', '.join(sorted(builtin))}, or a .toml path")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TemplateError(f"template {path}: {exc}") from exc
    return parse_template(raw, name=path.stem, source=str(path))


def parse_template(raw: dict[str, Any], name: str, source: str = "") -> PromptTemplate:
    """Validate a template's fields and placeholders; raise TemplateError naming what is wrong."""
    where = source or name
    unknown = set(raw) - {"description", "system", "user", "examples"}
    if unknown:
        raise TemplateError(f"template {where}: unknown keys {sorted(unknown)}")
    for key in ("system", "user"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise TemplateError(f"template {where}: {key!r} must be a non-empty string")
        allowed, required = _ALLOWED[key]
        fields = _placeholders(raw[key], f"template {where}: {key}")
        if fields - allowed or required - fields:
            raise TemplateError(f"template {where}: {key} may use {sorted(allowed)} and must use {sorted(required)}; "
                                f"it uses {sorted(fields)}")
    examples = []
    for i, ex in enumerate(raw.get("examples", []), 1):
        docs = ex.get("documents") if isinstance(ex, dict) else None
        if (not isinstance(ex, dict) or not isinstance(ex.get("question"), str) or not isinstance(ex.get("answer"), str)
                or not isinstance(docs, list) or not all(isinstance(d, dict) and isinstance(d.get("source"), str)
                                                         and isinstance(d.get("text"), str) for d in docs)):
            raise TemplateError(f"template {where}: example {i} needs question, answer and documents "
                                "(each with source and text)")
        if _placeholders(ex["answer"], f"template {where}: example {i}") - {"refusal"}:
            raise TemplateError(f"template {where}: example {i}'s answer may only use {{refusal}}")
        examples.append(Example(ex["question"], docs, ex["answer"]))
    return PromptTemplate(name, str(raw.get("description", "")), raw["system"], raw["user"], tuple(examples), source)


def _placeholders(text: str, where: str) -> set[str]:
    try:
        return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    except ValueError as exc:  # "Single '}' encountered", unclosed '{'
        raise TemplateError(f"{where}: {exc} (write literal braces as {{{{ and }}}})") from exc
