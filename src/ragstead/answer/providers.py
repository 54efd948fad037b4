"""LLM answerers over HTTP (httpx): any OpenAI-compatible endpoint, and Google Gemini, with their entries in the
answerer registry (`OPENAI`, `GEMINI`: answer/registry.py).

Both stream (server-sent events) so the terminal shows the answer as it arrives. Any transport error,
timeout, non-2xx status or empty reply raises ProviderError, which moves the chain to the next provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx

from ragstead.answer.base import Context, ProviderError, ToolBox
from ragstead.answer.consent import is_loopback_url
from ragstead.answer.prompt import PromptTemplate, load_template
from ragstead.answer.registry import AnswererKind, AnswererSetup
from ragstead.answer.tools import MAX_CALLS as MAX_TOOL_ROUNDS
from ragstead.answer.tools import TOOL_RULES
from ragstead.core import egress


def _sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            yield json.loads(payload)
        except ValueError as exc:
            raise ProviderError(f"malformed stream event: {payload[:80]!r}") from exc


class _HttpAnswerer:
    name = "http"

    def __init__(self, timeout: float, template: PromptTemplate | None, *,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.timeout = timeout
        self.template = template or load_template()
        self.transport = transport  # None: httpx's own network transport; tests pass an httpx.MockTransport

    def _stream(self, url: str, body: dict[str, Any], headers: dict[str, str],
                pieces: Callable[[dict[str, Any]], str], on_text: Callable[[str], None] | None) -> str:
        answer = self._stream_text(url, body, headers, pieces, on_text)
        if not answer:
            raise ProviderError(f"{self.name}: empty answer")
        return answer

    def _stream_text(self, url: str, body: dict[str, Any], headers: dict[str, str],
                     pieces: Callable[[dict[str, Any]], str], on_text: Callable[[str], None] | None) -> str:
        """One streamed request: the text it produced ("" when the model only asked for tool calls)."""
        text: list[str] = []
        try:
            with httpx.Client(timeout=httpx.Timeout(self.timeout), transport=self.transport,
                              event_hooks={"request": [egress.hook]}) as client, client.stream(
                "POST", url, json=body, headers=headers
            ) as response:
                if response.status_code >= 400:
                    detail = response.read().decode("utf-8", "replace")[:200]
                    raise ProviderError(f"{self.name}: HTTP {response.status_code}: {detail}")
                for event in _sse_events(response):
                    piece = pieces(event)
                    if piece:
                        text.append(piece)
                        if on_text:
                            on_text(piece)
        except httpx.TimeoutException as exc:
            raise ProviderError(f"{self.name}: timed out after {self.timeout:.0f}s") from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ProviderError(f"{self.name}: unexpected response shape ({exc})") from exc
        return "".join(text).strip()


class OpenAICompatibleAnswerer(_HttpAnswerer):
    """`POST {base_url}/chat/completions` with `stream: true`: OpenAI, Ollama, llama.cpp server, vLLM."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 template: PromptTemplate | None = None, *, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(timeout, template, transport=transport)
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key
        self.name = f"openai-compatible:{model}"
        self.remote = not is_loopback_url(base_url)  # its prompts leave the machine (answer/consent.py)

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        body = {"model": self.model, "temperature": 0, "stream": True,
                "messages": self.template.messages(question, contexts)}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return self._stream(f"{self.base_url}/chat/completions", body, headers,
                            lambda e: (e["choices"][0].get("delta") or {}).get("content") or "" if e.get("choices")
                            else "", on_text)

    def answer_with_tools(self, question: str, contexts: list[Context], tools: ToolBox,
                          on_text: Callable[[str], None] | None = None) -> str:
        """The chat completions tool-calling loop: the model may answer with `tool_calls` (streamed in pieces);
        each is run through `tools` and sent back as a `tool` message, until it answers in text. The last
        round offers no tools, so it must."""
        messages: list[dict[str, Any]] = self.template.messages(question, contexts)
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n{TOOL_RULES}"}
        offered = [{"type": "function", "function": spec} for spec in tools.specs]
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            calls: dict[int, dict[str, str]] = {}

            def pieces(event: dict[str, Any], calls: dict[int, dict[str, str]] = calls) -> str:
                if not event.get("choices"):
                    return ""
                delta = event["choices"][0].get("delta") or {}
                for part in delta.get("tool_calls") or []:
                    slot = calls.setdefault(int(part.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                    slot["id"] = part.get("id") or slot["id"]
                    function = part.get("function") or {}
                    slot["name"] += function.get("name") or ""
                    slot["arguments"] += function.get("arguments") or ""
                return delta.get("content") or ""

            body: dict[str, Any] = {"model": self.model, "temperature": 0, "stream": True, "messages": messages}
            if round_ < MAX_TOOL_ROUNDS:
                body["tools"] = offered
            text = self._stream_text(f"{self.base_url}/chat/completions", body, headers, pieces, on_text)
            if not calls:
                if not text:
                    raise ProviderError(f"{self.name}: empty answer")
                return text
            ordered = [calls[i] | {"id": calls[i]["id"] or f"call_{i}"} for i in sorted(calls)]
            messages.append({"role": "assistant", "content": text or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in ordered]})
            for c in ordered:
                result = tools.call(c["name"], c["arguments"])
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": json.dumps(result)})
        raise ProviderError(f"{self.name}: still calling tools after {MAX_TOOL_ROUNDS} rounds")


class GeminiAnswerer(_HttpAnswerer):
    """`POST {base_url}/models/{model}:streamGenerateContent?alt=sse` (Google AI Studio's Gemini API)."""

    def __init__(self, api_key: str, model: str = "gemini-2.0-flash",
                 base_url: str = "https://generativelanguage.googleapis.com/v1beta", timeout: float = 60.0,
                 template: PromptTemplate | None = None, *, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(timeout, template, transport=transport)
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key
        self.name = f"gemini:{model}"
        self.remote = not is_loopback_url(base_url)

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        system, *turns = self.template.messages(question, contexts)
        body = {
            "systemInstruction": {"parts": [{"text": system["content"]}]},
            # Gemini calls the assistant "model"; few-shot examples become earlier turns of the chat.
            "contents": [{"role": "model" if t["role"] == "assistant" else "user", "parts": [{"text": t["content"]}]}
                         for t in turns],
            "generationConfig": {"temperature": 0},
        }

        def pieces(event: dict[str, Any]) -> str:
            if "error" in event:
                raise ProviderError(f"{self.name}: {event['error'].get('message', event['error'])}")
            parts = (event.get("candidates") or [{}])[0].get("content", {}).get("parts", [])
            return "".join(p.get("text", "") for p in parts)

        return self._stream(f"{self.base_url}/models/{self.model}:streamGenerateContent?alt=sse", body,
                            {"x-goog-api-key": self.api_key}, pieces, on_text)

    def answer_with_tools(self, question: str, contexts: list[Context], tools: ToolBox,
                          on_text: Callable[[str], None] | None = None) -> str:
        """Gemini's function calling: `functionCall` parts are run through `tools` and answered with
        `functionResponse` parts, until the model answers in text. The last round offers no tools."""
        system, *turns = self.template.messages(question, contexts)
        contents: list[dict[str, Any]] = [
            {"role": "model" if t["role"] == "assistant" else "user", "parts": [{"text": t["content"]}]}
            for t in turns]
        declarations = [{**spec, "parameters": _gemini_schema(spec["parameters"])} for spec in tools.specs]
        url = f"{self.base_url}/models/{self.model}:streamGenerateContent?alt=sse"
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            calls: list[dict[str, Any]] = []

            def pieces(event: dict[str, Any], calls: list[dict[str, Any]] = calls) -> str:
                if "error" in event:
                    raise ProviderError(f"{self.name}: {event['error'].get('message', event['error'])}")
                parts = (event.get("candidates") or [{}])[0].get("content", {}).get("parts", [])
                calls.extend(p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict))
                return "".join(p.get("text", "") for p in parts)

            body: dict[str, Any] = {"systemInstruction": {"parts": [{"text": f"{system['content']}\n{TOOL_RULES}"}]},
                                    "contents": contents, "generationConfig": {"temperature": 0}}
            if round_ < MAX_TOOL_ROUNDS:
                body["tools"] = [{"functionDeclarations": declarations}]
            text = self._stream_text(url, body, {"x-goog-api-key": self.api_key}, pieces, on_text)
            if not calls:
                if not text:
                    raise ProviderError(f"{self.name}: empty answer")
                return text
            contents.append({"role": "model", "parts": [{"functionCall": c} for c in calls]})
            contents.append({"role": "user", "parts": [
                {"functionResponse": {"name": str(c.get("name", "")),
                                      "response": tools.call(str(c.get("name", "")), c.get("args") or {})}}
                for c in calls]})
        raise ProviderError(f"{self.name}: still calling tools after {MAX_TOOL_ROUNDS} rounds")


def _gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Gemini's function declarations take an OpenAPI subset without `additionalProperties`; the registry
    enforces it anyway."""
    return {k: _gemini_schema(v) if isinstance(v, dict) else v for k, v in schema.items()
            if k != "additionalProperties"}


def _openai_url(env: Mapping[str, str]) -> str:
    return env.get("RAGSTEAD_OPENAI_BASE_URL") or "https://api.openai.com/v1"


def _gemini_url(env: Mapping[str, str]) -> str:
    return env.get("RAGSTEAD_GEMINI_BASE_URL") or "https://generativelanguage.googleapis.com/v1beta"


def _openai(setup: AnswererSetup) -> OpenAICompatibleAnswerer:
    env = setup.env
    return OpenAICompatibleAnswerer(_openai_url(env), env.get("RAGSTEAD_OPENAI_MODEL", "gpt-4o-mini"),
                                    env.get("OPENAI_API_KEY"), setup.timeout, setup.template, transport=setup.transport)


def _gemini(setup: AnswererSetup) -> GeminiAnswerer:
    env = setup.env
    return GeminiAnswerer(env["GEMINI_API_KEY"], env.get("RAGSTEAD_GEMINI_MODEL", "gemini-2.0-flash"),
                          _gemini_url(env), setup.timeout, setup.template, transport=setup.transport)


# Any OpenAI-compatible server (RAGSTEAD_OPENAI_BASE_URL, + RAGSTEAD_OPENAI_MODEL and OPENAI_API_KEY), or
# api.openai.com with OPENAI_API_KEY alone; on loopback (Ollama, llama.cpp's server) it is local.
OPENAI = AnswererKind(_openai, endpoint=_openai_url,
                      configured=lambda env: bool(env.get("RAGSTEAD_OPENAI_BASE_URL") or env.get("OPENAI_API_KEY")))
# Google's Gemini API: GEMINI_API_KEY (+ RAGSTEAD_GEMINI_MODEL, RAGSTEAD_GEMINI_BASE_URL).
GEMINI = AnswererKind(_gemini, endpoint=_gemini_url, configured=lambda env: bool(env.get("GEMINI_API_KEY")))
