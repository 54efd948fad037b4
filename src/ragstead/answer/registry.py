"""The answerers by name: the "ragstead.answerers" registry (ragstead/plugins.py, llm's shape) and the chain `ask`
tries, in the configured order.

A name maps to an `AnswererKind`: how to build the answerer from the environment (its keys, endpoint and model),
whether that environment sets it up at all, and whether it sends text off the machine. The built-ins are declared
below; another package adds one with an entry point whose value is an `AnswererKind`:

    [project.entry-points."ragstead.answerers"]
    echo = "ragstead_echo:ANSWERER"

Privacy is the product, so an answerer is remote unless it says otherwise (`local=True`, or an `endpoint` on
loopback). A remote one joins the chain only when the user consented to it by name (the project's `answerers`,
`ask --llm`, a library override: answer/consent.py); a key in the environment is never consent. It is handed no
local-only document, and a plugin's is wrapped so that each call to it is written to the egress log (its own HTTP
client need not carry ragstead's hook; the built-ins' clients log each request themselves). A plugin cannot take
a built-in's name: the built-in wins (ragstead/plugins.py). A plugin's answer is shown under the name consented to;
what it raises while answering is a fallback to the next answerer, while being set up one error line naming it.

This module is light (no HTTP client, no model): the settings read its names to check a configured order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ragstead.core import egress
from ragstead.errors import ConfigError, ProviderError, RagsteadError
from ragstead.plugins import Registry, error_line

if TYPE_CHECKING:
    import httpx

    from ragstead.answer.base import AnswerProvider, Context, ToolBox
    from ragstead.answer.prompt import PromptTemplate

__all__ = ["ANSWERERS", "DEFAULT_ORDER", "LOCAL_NAMES", "AnswererKind", "AnswererSetup", "answerer_chain",
           "check_names", "kind_of"]


@dataclass(frozen=True)
class AnswererSetup:
    """What building an answerer may read: the answerers' environment (the process's over the project's .env),
    the prompt template (None: the `grounded` one), the timeout, and the HTTP transport (tests pass a mock)."""

    env: Mapping[str, str]
    template: PromptTemplate | None = None
    timeout: float = 60.0
    transport: httpx.BaseTransport | None = None


def _always(env: Mapping[str, str]) -> bool:
    return True


@dataclass(frozen=True)
class AnswererKind:
    """What an answerer's name resolves to. `build(setup)` returns the `AnswerProvider` (import its heavy code
    inside: the registry imports this object when the name is first used); it is called only when
    `configured(env)` says the environment sets it up (a key, an endpoint). `local`: it never sends text off the
    machine; else `endpoint(env)`, where its text goes, makes it local when on loopback. Neither: it is remote,
    and used only with the user's consent."""

    build: Callable[[AnswererSetup], AnswerProvider]
    local: bool = False
    endpoint: Callable[[Mapping[str, str]], str] | None = None
    configured: Callable[[Mapping[str, str]], bool] = _always

    def is_local(self, env: Mapping[str, str]) -> bool:
        """Whether what it is handed stays on this machine (in this environment)."""
        if self.local or self.endpoint is None:
            return self.local
        return egress.is_local_url(self.endpoint(env))


def _extractive(setup: AnswererSetup) -> AnswerProvider:
    from ragstead.answer.extractive import ExtractiveAnswerer

    return ExtractiveAnswerer()


# The offline one: it quotes retrieved sentences, never fails, and ends every chain.
EXTRACTIVE = AnswererKind(_extractive, local=True)

# The built-ins, in the order `ask` tries them when the configuration orders none.
ANSWERERS = Registry("ragstead.answerers", {
    "openai": "ragstead.answer.providers:OPENAI",
    "gemini": "ragstead.answer.providers:GEMINI",
    "extractive": "ragstead.answer.registry:EXTRACTIVE",
})
DEFAULT_ORDER = tuple(ANSWERERS.builtins)
# Names that consent to nothing: "local" (in `--llm local`) and the offline answerer.
LOCAL_NAMES = ("local", "extractive")


def check_names(names: Collection[str], *, extra: Sequence[str] = ()) -> None:
    """Raise one ConfigError line naming the known answerers when a name in `names` is none of them (`extra`:
    other words the caller takes, such as "local"). Reads the installed entry points only for a name that is
    not a built-in."""
    unknown = [n for n in dict.fromkeys(names) if n not in ANSWERERS.builtins and n not in extra]
    plugins = ANSWERERS.plugin_names() if unknown else ()
    missing = [n for n in unknown if n not in plugins]
    if missing:
        more = f", or a plugin's: {', '.join(plugins)}" if plugins else ""
        raise ConfigError(f"unknown answerer {', '.join(missing)}; use {', '.join((*extra, *ANSWERERS.builtins))}"
                          f"{more}")


def kind_of(name: str) -> AnswererKind:
    """The `AnswererKind` a name resolves to (a plugin's value is checked); ConfigError for an unknown name."""
    check_names((name,))
    kind = ANSWERERS.get(name)
    if not isinstance(kind, AnswererKind):
        raise ConfigError(f"the answerer {name!r} ({ANSWERERS.group} entry point) is not an AnswererKind")
    return kind if name in ANSWERERS.builtins else _guarded(name, kind)


def _guarded(name: str, kind: AnswererKind) -> AnswererKind:
    """A plugin's kind whose `build`, `configured` and `endpoint` fail as one ConfigError line naming the plugin
    (a careless plugin's KeyError is no traceback)."""
    def guard(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def run(arg: Any) -> Any:
            try:
                return call(arg)
            except RagsteadError:
                raise
            except Exception as exc:
                raise ConfigError(f"the {ANSWERERS.group} plugin {name!r} failed: {error_line(exc)}") from exc
        return run

    return replace(kind, build=guard(kind.build), configured=guard(kind.configured),
                   endpoint=None if kind.endpoint is None else guard(kind.endpoint))


def answerer_chain(setup: AnswererSetup, order: Sequence[str], consented: Collection[str]) -> list[AnswerProvider]:
    """The answerers `ask` tries, in `order`: each one its environment sets up, a remote one only when
    `consented` names it; the offline extractive answerer ends the chain when the order leaves it out."""
    chain: list[AnswerProvider] = []
    names = tuple(dict.fromkeys((*order, "extractive")))
    for name in names:
        kind = kind_of(name)
        if not kind.configured(setup.env):
            continue
        local = kind.is_local(setup.env)
        if not local and name not in consented:
            continue  # consent before egress: a key or an installed plugin alone sends nothing
        provider = kind.build(setup)
        chain.append(provider if name in ANSWERERS.builtins else _plugin(name, provider, remote=not local))
    return chain


def _plugin(name: str, provider: AnswerProvider, *, remote: bool) -> AnswerProvider:
    """A plugin's answerer as the chain hands it on: named as consented to, what it raises a ProviderError (the
    next answerer answers); a remote one marked remote (no local-only document reaches it), each call logged."""
    if callable(getattr(provider, "answer_with_tools", None)):
        return _PluginWithTools(name, provider, remote)
    return _Plugin(name, provider, remote)


class _Plugin:
    """A plugin's answerer; `remote` unless it declared itself local: what it is handed is taken to leave the
    machine."""

    def __init__(self, name: str, inner: AnswerProvider, remote: bool) -> None:
        self.name = name  # the name consented to, not the one it gives itself ("extractive" would say offline)
        self.inner = inner
        self.remote = remote
        self.host = f"plugin:{name}"

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        return self._call(question, contexts, lambda: self.inner.answer(question, contexts, on_text))

    def _call(self, question: str, contexts: list[Context], call: Callable[[], Any]) -> str:
        if self.remote:
            _log_sent(self.host, question, contexts)
        try:
            return str(call())
        except ProviderError:
            raise
        except Exception as exc:  # a plugin's own client error: a fallback, like a built-in's ProviderError
            raise ProviderError(f"{self.name}: {error_line(exc)}") from exc


class _PluginWithTools(_Plugin):
    def answer_with_tools(self, question: str, contexts: list[Context], tools: ToolBox,
                          on_text: Callable[[str], None] | None = None) -> str:
        inner: Any = self.inner
        return self._call(question, contexts, lambda: inner.answer_with_tools(question, contexts, tools, on_text))


def _log_sent(host: str, question: str, contexts: list[Context]) -> None:
    """One egress record for a call to a plugin's answerer: the question and the contexts it was handed (their
    size and hash, never the text), under the purpose `ask` set (the documents they came from)."""
    body = json.dumps({"question": question, "contexts": [c.to_dict() for c in contexts]},
                      ensure_ascii=False).encode("utf-8")
    egress.sent(host, "ANSWER", len(body), hashlib.sha256(body).hexdigest())
