"""Safe tool execution for `ask`: the allow-listed weather tool on recorded real Open-Meteo responses (served
through httpx.MockTransport, tests/data/open_meteo/SOURCE.md), strict arguments, refusals, the API down, and the
tool-calling loop of the LLM answerers against a fake chat server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.providers import GeminiAnswerer, OpenAICompatibleAnswerer
from ragstead.answer.tools import MAX_RESPONSE_BYTES, ToolRegistry
from ragstead.config import load_settings
from ragstead.errors import ConfigError, ToolError
from ragstead.knowledge_base import KnowledgeBase

DATA = Path(__file__).parent / "data" / "open_meteo"
GEOCODING = json.loads((DATA / "geocoding_berlin.json").read_text(encoding="utf-8"))
FORECAST = json.loads((DATA / "forecast_berlin.json").read_text(encoding="utf-8"))
FILES = {"kb/users/alice/trip.md": "# Trip\n\nAlice flies to Berlin on Friday for the heron survey workshop."}
QUESTION = "What weather should Alice expect in Berlin for her trip?"


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


class OpenMeteo:
    """The two Open-Meteo hosts, played from the recordings; `down` makes every request fail to connect."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.down = False
        self.body: bytes | None = None  # replaces the forecast's body when set

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if request.url.host == "geocoding-api.open-meteo.com" and request.url.path == "/v1/search":
            return httpx.Response(200, json=GEOCODING)
        if request.url.host == "api.open-meteo.com" and request.url.path == "/v1/forecast":
            return httpx.Response(200, content=self.body) if self.body is not None else httpx.Response(200,
                                                                                                      json=FORECAST)
        return httpx.Response(404, json={"error": True, "reason": "not found"})


@pytest.fixture
def meteo() -> OpenMeteo:
    return OpenMeteo()


@pytest.fixture
def registry(meteo) -> ToolRegistry:
    return ToolRegistry(["weather"], transport=httpx.MockTransport(meteo))


def test_the_weather_tool_geocodes_then_reads_the_forecast(registry, meteo):
    result = registry.call("weather", {"place": "Berlin", "days": 2})
    geo, forecast = meteo.requests
    assert (geo.url.host, geo.url.path) == ("geocoding-api.open-meteo.com", "/v1/search")
    assert dict(geo.url.params) == {"name": "Berlin", "count": "3", "language": "en", "format": "json"}
    assert (forecast.url.host, forecast.url.path) == ("api.open-meteo.com", "/v1/forecast")
    assert dict(forecast.url.params) == {
        "latitude": "52.52437", "longitude": "13.41053", "daily": "temperature_2m_max,temperature_2m_min",
        "current": "temperature_2m,relative_humidity_2m,weather_code,wind_speed_10m", "timezone": "auto"}
    assert result.source == "Open-Meteo weather: Berlin, State of Berlin, Germany"
    assert result.text.splitlines() == [
        "Weather for Berlin, State of Berlin, Germany (52.5244, 13.4105) from Open-Meteo, times in Europe/London.",
        "Now (2025-05-10T12:45): 15.4 °C, overcast, wind 11.5 km/h, humidity 60 %.",
        "2025-05-10: from 8.9 to 17.2 °C.",
        "2025-05-11: from 6.2 to 16.6 °C.",
    ]
    assert result.url.startswith("https://api.open-meteo.com/v1/forecast?latitude=52.52437&longitude=13.41053")


def test_the_argument_schema_is_strict_and_names_no_host(registry):
    spec, = registry.specs
    assert spec["name"] == "weather" and "Open-Meteo" in spec["description"]
    parameters = spec["parameters"]
    assert parameters["additionalProperties"] is False and parameters["required"] == ["place"]
    assert set(parameters["properties"]) == {"place", "days"}
    assert all(prop.get("description") for prop in parameters["properties"].values())
    assert parameters["properties"]["days"]["maximum"] == 7


@pytest.mark.parametrize(("arguments", "problem"), [
    ({"place": "https://evil.example/steal"}, "place"),  # a URL is not a place name
    ({"place": "evil.example:8080"}, "place"),
    ({"place": "Berlin", "host": "evil.example"}, "host"),  # no extra keys
    ({"place": "Berlin", "url": "http://169.254.169.254/"}, "url"),
    ({"place": 5}, "place"),  # no type coercion
    ({"place": "Berlin", "days": "3"}, "days"),
    ({"place": "Berlin", "days": 30}, "days"),
    ({"place": "B"}, "place"),
    ({"place": "x" * 81}, "place"),
    ({}, "place"),
    (["Berlin"], "arguments"),
    ("{not json", "not JSON"),
    ('{"place": "' + "a" * 3000 + '"}', "over 2000 characters"),
], ids=["url", "host-port", "extra-host", "extra-url", "int", "str-days", "days-range", "short", "long", "missing",
        "list", "bad-json", "huge"])
def test_malformed_arguments_are_refused_before_any_request(registry, meteo, arguments, problem):
    with pytest.raises(ToolError) as caught:
        registry.call("weather", arguments)
    assert problem in str(caught.value)
    assert meteo.requests == []


def test_only_allow_listed_tools_exist(registry, meteo):
    with pytest.raises(ToolError, match=r"'shell' is not allowed \(allowed: weather\)"):
        registry.call("shell", {"cmd": "cat /etc/passwd"})
    with pytest.raises(ConfigError, match="unknown tool"):
        ToolRegistry(["weather", "shell"])
    assert meteo.requests == []


def test_a_failing_api_is_a_tool_error(registry, meteo):
    meteo.down = True
    with pytest.raises(ToolError, match=r"geocoding-api.open-meteo.com is unreachable \(ConnectError\)"):
        registry.call("weather", {"place": "Berlin"})
    meteo.down = False
    meteo.body = b"[" + b"1," * MAX_RESPONSE_BYTES + b"1]"
    with pytest.raises(ToolError, match=f"over {MAX_RESPONSE_BYTES} bytes"):
        registry.call("weather", {"place": "Berlin"})
    meteo.body = b"<html>gateway timeout</html>"
    with pytest.raises(ToolError, match="not JSON"):
        registry.call("weather", {"place": "Berlin"})


def test_a_timeout_is_a_tool_error():
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("The read operation timed out", request=request)

    with pytest.raises(ToolError, match="no answer within 2s"):
        ToolRegistry(["weather"], transport=httpx.MockTransport(slow), timeout=2).call("weather", {"place": "Oslo"})


class ToolDouble:
    """A provider double that asks for tool calls (`calls`), then answers citing what it got back."""

    name = "tool-double"

    def __init__(self, *calls: tuple[str, Any]) -> None:
        self.calls = calls
        self.replies: list[dict[str, Any]] = []
        self.plain_answers = 0

    def answer(self, question, contexts, on_text=None) -> str:
        self.plain_answers += 1
        return f"Alice flies to Berlin on Friday [{contexts[0].n}]." if contexts else ""

    def answer_with_tools(self, question, contexts, tools, on_text=None) -> str:
        self.replies = [tools.call(name, arguments) for name, arguments in self.calls]
        cited = [f"[{r['n']}]" for r in self.replies if "n" in r]
        documents = f" Alice flies on Friday [{contexts[0].n}]." if contexts else ""
        return (f"It is overcast and 15.4 °C in Berlin {''.join(cited)}." if cited else "") + documents


@pytest.fixture
def kb_for(make_project, meteo):
    project = make_project(FILES)
    project.index()

    def build(*providers: Any) -> KnowledgeBase:
        return KnowledgeBase(project.settings, store=project.store, embedder=project.embedder,
                             providers=list(providers), transport=httpx.MockTransport(meteo))

    return build


def test_a_tool_result_is_cited_as_a_source_of_its_own(kb_for):
    double = ToolDouble(("weather", {"place": "Berlin", "days": 3}))
    result = kb_for(double).ask(QUESTION, user="alice", tools=["weather"], min_similarity=-1.0)
    assert result.provider == "tool-double" and not result.refused and result.fallbacks == ()
    # Numbered in the order the answer cites them (the tool result first), as every unstreamed answer is.
    assert result.text == "It is overcast and 15.4 °C in Berlin [1]. Alice flies on Friday [2]."
    tool, document = sorted(result.citations, key=lambda c: c.n)
    assert document.source == "kb/users/alice/trip.md"
    assert tool.n == 1 and tool.source == "Open-Meteo weather: Berlin, State of Berlin, Germany"
    assert tool.locator["tool"] == "weather" and tool.locator["link"].startswith("https://api.open-meteo.com/")
    assert tool.similarity is None and "15.4 °C" in tool.snippet
    data = result.to_dict()
    assert json.loads(json.dumps(data)) == data  # the ask JSON carries it as it is


def test_tools_are_off_by_default_and_on_from_the_config(kb_for, make_project, meteo):
    double = ToolDouble(("weather", {"place": "Berlin"}))
    result = kb_for(double).ask(QUESTION, user="alice", min_similarity=-1.0)
    assert double.replies == [] and double.plain_answers == 1 and meteo.requests == []
    assert [c.source for c in result.citations] == ["kb/users/alice/trip.md"]
    root = make_project({"ragstead.toml": '[ragstead]\ntools = ["weather"]\n'}).root
    assert KnowledgeBase(load_settings(root)).tool_registry().names == ("weather",)
    with pytest.raises(ConfigError, match="unknown tool"):
        kb_for(double).ask(QUESTION, user="alice", tools=["shell"])


def test_the_extractive_answerer_never_calls_tools(kb_for, meteo):
    result = kb_for(ToolDouble()).ask(QUESTION, user="alice", tools=["weather"], extractive=True,
                                      min_similarity=-1.0)
    assert result.provider == "extractive" and meteo.requests == []


def test_the_api_down_is_one_fallback_line_and_the_answer_goes_on(kb_for, meteo):
    meteo.down = True
    double = ToolDouble(("weather", {"place": "Berlin"}))
    result = kb_for(double).ask(QUESTION, user="alice", tools=["weather"], min_similarity=-1.0)
    assert double.replies == [{"error": "geocoding-api.open-meteo.com is unreachable (ConnectError)"}]
    assert result.fallbacks == ({"provider": "tool:weather",
                                 "error": "geocoding-api.open-meteo.com is unreachable (ConnectError)"},)
    assert not result.refused and result.text == "Alice flies on Friday [1]."


def test_a_model_asking_for_another_tool_or_bad_arguments_is_refused(kb_for, meteo):
    double = ToolDouble(("shell", {"cmd": "rm -rf /"}), ("weather", {"place": "http://169.254.169.254/latest"}))
    result = kb_for(double).ask(QUESTION, user="alice", tools=["weather"], min_similarity=-1.0)
    assert [r["error"] for r in double.replies] == [
        "tool 'shell' is not allowed (allowed: weather)",
        "weather: malformed arguments (place: String should match pattern '^[^\\W_][\\w .,'’()-]*$')"]
    assert [f["provider"] for f in result.fallbacks] == ["tool:refused", "tool:weather"]
    assert meteo.requests == [] and result.text == "Alice flies on Friday [1]."


def test_with_nothing_retrieved_only_a_tool_calling_answerer_is_tried(kb_for):
    double = ToolDouble(("weather", {"place": "Berlin"}))
    extractive = ExtractiveAnswerer()
    result = kb_for(double, extractive).ask("weather in Berlin tomorrow", user="bob", tools=["weather"])
    assert result.retrieval["relevant"] == 0
    assert result.provider == "tool-double" and [c.n for c in result.citations] == [1]
    off = kb_for(double, extractive).ask("weather in Berlin tomorrow", user="bob")
    assert off.refused and off.provider is None


SSE = {"content-type": "text/event-stream"}


def _openai_events(*deltas: dict[str, Any], finish: str) -> bytes:
    chunks = [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "local-model",
               "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]} for delta in deltas]
    chunks.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "local-model",
                   "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


class ChatServer:
    """An OpenAI-compatible and a Gemini endpoint that first ask for the weather tool, then answer citing the
    number the tool result came back with; Open-Meteo requests go to the recordings."""

    def __init__(self, meteo: OpenMeteo) -> None:
        self.meteo = meteo
        self.bodies: list[dict[str, Any]] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if "open-meteo.com" in request.url.host:
            return self.meteo(request)
        body = json.loads(request.content)
        self.bodies.append(body)
        if ":streamGenerateContent" in request.url.path:
            answered = [p["functionResponse"]["response"] for c in body["contents"] for p in c["parts"]
                        if "functionResponse" in p]
            if not answered:
                parts = [{"functionCall": {"name": "weather", "args": {"place": "Berlin", "days": 1}}}]
            else:
                parts = [{"text": f"Berlin is overcast at 15.4 °C [{answered[0]['n']}]."}]
            event = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}
            return httpx.Response(200, headers=SSE, content=f"data: {json.dumps(event)}\r\n\r\n".encode())
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return httpx.Response(200, headers=SSE, content=_openai_events(
                {"role": "assistant", "content": None, "tool_calls": [
                    {"index": 0, "id": "call_w1", "type": "function", "function": {"name": "weather",
                                                                                   "arguments": ""}}]},
                {"tool_calls": [{"index": 0, "function": {"arguments": '{"place": "Ber'}}]},
                {"tool_calls": [{"index": 0, "function": {"arguments": 'lin", "days": 1}'}}]},
                finish="tool_calls"))
        return httpx.Response(200, headers=SSE, content=_openai_events(
            {"role": "assistant", "content": "Berlin is overcast "},
            {"content": f"at 15.4 °C [{results[0]['n']}]."}, finish="stop"))


def test_the_openai_compatible_answerer_runs_the_tool_calling_loop(kb_for, meteo, make_project):
    server = ChatServer(meteo)
    project = make_project(FILES)
    project.index()
    answerer = OpenAICompatibleAnswerer("http://llm.invalid/v1", "local-model", "sk-test",
                                        transport=server.transport)
    kb = KnowledgeBase(project.settings, store=project.store, embedder=project.embedder, providers=[answerer],
                       transport=server.transport)
    pieces: list[str] = []
    result = kb.ask(QUESTION, user="alice", tools=["weather"], min_similarity=-1.0, on_text=pieces.append)
    assert result.provider == "openai-compatible:local-model"
    assert result.text == "Berlin is overcast at 15.4 °C [2]." and pieces == ["Berlin is overcast ",
                                                                              "at 15.4 °C [2]."]
    assert [c.source for c in result.citations] == ["Open-Meteo weather: Berlin, State of Berlin, Germany"]
    first, second = server.bodies
    assert first["tools"] == [{"type": "function", "function": ToolRegistry(["weather"]).specs[0]}]
    assert "Tools: you may call" in first["messages"][0]["content"]
    call, reply = second["messages"][-2:]
    assert call["tool_calls"] == [{"id": "call_w1", "type": "function",
                                   "function": {"name": "weather", "arguments": '{"place": "Berlin", "days": 1}'}}]
    assert reply["role"] == "tool" and reply["tool_call_id"] == "call_w1"
    assert json.loads(reply["content"])["source"] == "Open-Meteo weather: Berlin, State of Berlin, Germany"


def test_the_gemini_answerer_runs_function_calls(meteo, make_project):
    server = ChatServer(meteo)
    project = make_project(FILES)
    project.index()
    answerer = GeminiAnswerer("g-key", "gemini-test", "http://llm.invalid/v1beta", transport=server.transport)
    kb = KnowledgeBase(project.settings, store=project.store, embedder=project.embedder, providers=[answerer],
                       transport=server.transport)
    result = kb.ask(QUESTION, user="alice", tools=["weather"], min_similarity=-1.0)
    assert result.provider == "gemini:gemini-test" and result.text == "Berlin is overcast at 15.4 °C [1]."
    first, second = server.bodies
    declaration, = first["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "weather" and "additionalProperties" not in declaration["parameters"]
    model_turn, tool_turn = second["contents"][-2:]
    assert model_turn == {"role": "model", "parts": [{"functionCall": {"name": "weather",
                                                                       "args": {"place": "Berlin", "days": 1}}}]}
    assert tool_turn["parts"][0]["functionResponse"]["response"]["n"] == 2


def test_the_cli_refuses_tools_with_the_extractive_answerer(make_project, cli):
    project = make_project(FILES)
    result = cli(project, "ask", "weather in Berlin", "--tools", "weather", "--extractive", expect=2)
    assert result.stderr.splitlines() == ["error: --tools needs an LLM answerer; --extractive never calls tools"]
