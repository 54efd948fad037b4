// ragstead's web page: plain JavaScript over the same /v1 endpoints as every client.
// Server data only ever reaches the page as text (textContent, text nodes): never as HTML.
"use strict";

const KEY = "ragstead-key";
const THEME = "ragstead-theme";
const $ = (id) => document.getElementById(id);
let lastCitations = [];
// The conversation the Ask button continues: its id on the server, the filters it was started with (another scope
// starts a new one), and the turn on show (moved into the thread when the next question is asked).
const conversation = { id: null, filters: null, shown: null };
let limitsLoaded = Promise.resolve();  // loadLimits(), started when the page loads

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

// -- errors: every API error becomes one readable line, never a blank page ---------------------------------
const STATUS_TEXT = {
  400: "The request was refused",
  401: "The API key was refused (unknown or revoked); enter a valid key",
  403: "This key may not do that",
  404: "Not found",
  413: "Too large for this server",
  415: "That file type is not supported",
  422: "The request is not valid",
  429: "Too many requests",
  503: "The index is busy; try again in a few seconds",
};

class ApiError extends Error {}

async function failure(response) {
  let detail = "";
  try {
    const body = await response.json();
    detail = body && body.error ? body.error.message : "";
  } catch (_) { /* not JSON */ }
  const head = STATUS_TEXT[response.status] || `The server answered HTTP ${response.status}`;
  const retry = response.headers.get("Retry-After");
  const wait = response.status === 429 && retry ? `; retry in ${retry} s` : "";
  return new ApiError(detail ? `${head}${wait}: ${detail}` : `${head}${wait}.`);
}

function showError(error) {
  const box = $("error");
  box.textContent = error instanceof ApiError ? error.message : `Could not reach the server: ${error.message}`;
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {}, { Authorization: `Bearer ${sessionStorage.getItem(KEY)}` });
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) throw await failure(response);
  return response;
}

async function postJson(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

// -- status, key and theme ---------------------------------------------------------------------------------
async function refreshStatus() {
  try {
    const response = await fetch("/readyz");
    const body = await response.json();
    $("status").textContent = response.ok
      ? `Index ready: ${body.documents} documents, ${body.chunks} chunks · model ${body.model}`
      : `Index not ready: ${body.error ? body.error.message : response.status}`;
  } catch (error) {
    $("status").textContent = `Server unreachable: ${error.message}`;
  }
}

function showApp() {
  const hasKey = Boolean(sessionStorage.getItem(KEY));
  $("key-section").hidden = hasKey;
  $("app").hidden = !hasKey;
  $("forget").hidden = !hasKey;
  if (hasKey) $("q").focus();
}

// A key is checked when it is given, not at the first search: a wrong one is refused here, and not kept.
async function useKey(key) {
  const response = await fetch("/v1/documents?limit=1", { headers: { Authorization: `Bearer ${key}` } });
  if (!response.ok) throw await failure(response);
  sessionStorage.setItem(KEY, key);
  await limitsLoaded;  // the fields show their limits before they can be used
  showApp();
  showNotice((await response.json()).note);
}

// A key whose user owns no document gets the server's note (what to index), not an empty base without a word.
function showNotice(note) {
  $("notice").textContent = note || "";
  $("notice").hidden = !note;
}

async function checkDocuments() {
  const response = await api("/v1/documents?limit=1");
  showNotice((await response.json()).note);
}

function applyTheme(theme) {
  const dark = theme === "dark" || (!theme && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  $("theme").setAttribute("aria-pressed", String(dark));
  $("theme").textContent = dark ? "Light theme" : "Dark theme";
}

// -- filters -----------------------------------------------------------------------------------------------
// The limits of the query and Results fields are the server's (GET /v1/limits, its field table), not written
// here: a page never refuses what the API accepts, nor lets through what it refuses. Without them (an older
// server), the fields stay open and the server's answer says what is wrong.
async function loadLimits() {
  try {
    const response = await fetch("/v1/limits");
    if (!response.ok) return;
    const fields = (await response.json()).fields;
    if (fields.query && fields.query.max_chars) $("q").maxLength = fields.query.max_chars;
    const topK = fields.top_k;
    if (topK) {
      $("top-k").min = topK.min;
      $("top-k").max = topK.max;
      if (!$("top-k").value) $("top-k").value = topK.default;
    }
  } catch (_) { /* the server checks every request anyway */ }
}

function list(value) {
  return value.split(",").map((v) => v.trim()).filter(Boolean);
}

function queryBody() {
  const body = {
    query: $("q").value,
    top_k: Number($("top-k").value) || undefined,  // none: the server's default
    scope: $("scope").value,
    doc_types: list($("doc-types").value),
    tags: list($("tags").value),
    include_archive: $("archive").checked,
  };
  if ($("mode").value) body.mode = $("mode").value;
  if ($("date-from").value) body.date_from = $("date-from").value;
  if ($("date-to").value) body.date_to = $("date-to").value;
  return body;
}

// -- search ------------------------------------------------------------------------------------------------
function highlighted(text, query) {
  // The query's words marked in the text, built from text nodes and <mark> elements only.
  const words = query.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length > 2);
  const out = document.createDocumentFragment();
  if (!words.length) {
    out.append(text);
    return out;
  }
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(${escaped.join("|")})`, "giu");
  text.split(pattern).forEach((part, i) => out.append(i % 2 ? el("mark", part) : document.createTextNode(part)));
  return out;
}

function place(item) {
  const parts = [];
  if (item.page) parts.push(`page ${item.page}`);
  if (item.section_path) parts.push(item.section_path);
  else if (item.heading) parts.push(item.heading);
  if (item.video_time !== null && item.video_time !== undefined) parts.push(`at ${clock(item.video_time)}`);
  return parts.join(" · ");
}

function clock(seconds) {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = String(seconds % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

function sourceLink(label, href) {
  // Only http(s) links are made clickable; anything else stays text.
  if (href && /^https?:\/\//i.test(href)) {
    const a = el("a", label);
    a.href = href;
    a.rel = "noopener noreferrer";
    a.target = "_blank";
    return a;
  }
  return el("span", label, "path");
}

function renderResults(data, query) {
  const ol = $("results-list");
  ol.replaceChildren();
  if (!data.results.length) ol.append(el("li", data.note ? `Nothing found: ${data.note}.` : "Nothing found in this scope.", "empty"));
  for (const hit of data.results) {
    const li = el("li", null, "result");
    const scores = [`score ${fmt(hit.score)}`];
    if (hit.vector_score !== null) scores.push(`vector ${fmt(hit.vector_score)}`);
    if (hit.lexical_score !== null) scores.push(`lexical ${fmt(hit.lexical_score)}`);
    li.title = scores.join(" · ");
    const head = el("div", null, "result-head");
    head.append(sourceLink(hit.source_url || hit.file_path, hit.link || hit.source_url));
    const where = place(hit);
    if (where) head.append(el("span", where, "meta"));
    const open = el("button", "Show in context", "small");
    open.type = "button";
    open.addEventListener("click", () => openPassage(hit.chunk_id, { source: hit.file_path }));
    head.append(open);
    const snippet = el("p", null, "snippet");
    snippet.append(highlighted(hit.snippet, query));
    li.append(head, snippet);
    ol.append(li);
  }
  $("results").hidden = false;
}

function fmt(value) {
  return value === null || value === undefined ? "-" : Number(value).toFixed(3);
}

// A search's results stand on their own: the answer on show (an earlier question's) and its open source are put
// away, so the results never read as that answer's. The conversation itself goes on: the next Ask continues it.
function putAnswerAway() {
  $("answer").hidden = true;
  $("passage").hidden = true;
}

async function search() {
  const body = queryBody();
  putAnswerAway();
  const response = await postJson("/v1/query", body);
  renderResults(await response.json(), body.query);
}

// -- ask: a conversation turn; the answer streams in, then every [n] becomes a button that opens its source ------
function citedText(box, result) {
  const numbers = new Set(result.citations.map((c) => c.n));
  box.replaceChildren();
  result.answer.split(/(\[\d{1,3}\])/).forEach((part) => {
    const n = /^\[(\d{1,3})\]$/.exec(part);
    if (n && numbers.has(Number(n[1]))) {
      const button = el("button", part, "cite");
      button.type = "button";
      button.dataset.n = n[1];
      const cited = result.citations.find((c) => c.n === Number(n[1]));
      button.title = cited.source;
      button.setAttribute("aria-label", `Source ${n[1]}: ${cited.source}`);
      button.addEventListener("click", () => openCitation(Number(n[1]), result.citations));
      box.append(button);
    } else {
      box.append(document.createTextNode(part));
    }
  });
}

// A list or count answer ("which notes mention the landlord?") cites every document it names, with no [n] in its
// text: each becomes a card, its name a button that opens the document in context (and its page's address a link),
// with the sentence that mentions the topic. Other answers' sources are their [n] buttons.
// A sum, average, earliest or latest over the records (#46) cites every unit it added: a card each too, with the
// unit's date and amount.
function wholeScope(result) {
  return result.kind === "list" || result.kind === "count" || result.figure !== undefined;
}

function renderFiles(box, result) {
  const listed = wholeScope(result) ? result.citations || [] : [];
  const units = new Map((result.units || []).map((u) => [u.n, u]));
  box.replaceChildren();
  for (const citation of listed) {
    const card = el("li", null, "file");
    const head = el("div", null, "result-head");
    const title = citation.locator.title || citation.locator.heading;
    const open = el("button", title && title !== citation.source ? `${title} — ${citation.source}` : citation.source,
      "file-open");
    open.type = "button";
    open.setAttribute("aria-label", `Open ${citation.source} in context`);
    open.addEventListener("click", () => openCitation(citation.n, listed));
    head.append(open);
    const where = place(Object.assign({}, citation.locator, { heading: null }));  // the heading is in the title
    if (where && where !== title) head.append(el("span", where, "meta"));
    const unit = units.get(citation.n);
    if (unit) head.append(el("span", [unit.date, unit.amount && `${unit.currency || ""} ${unit.amount}`.trim()]
      .filter(Boolean).join(" · "), "meta unit"));
    if (citation.locator.link || citation.locator.url) {
      head.append(sourceLink("page", citation.locator.link || citation.locator.url));
    }
    card.append(head, el("p", citation.quote || citation.snippet, "snippet"));
    box.append(card);
  }
  box.hidden = !listed.length;
}

function renderAnswer(result) {
  lastCitations = result.citations || [];
  citedText($("answer-text"), Object.assign({ citations: [] }, result));
  renderFiles($("answer-files"), result);
  const meta = [];
  if (result.kind === "memory") meta.push("A request to remember, not a question: the memory rule decided.");
  else if (result.figure !== undefined) {
    meta.push(result.complete ? "Added up from every document in scope." : "Added up from every document in scope; "
      + "not complete: see what was left out.");
  } else if (result.kind === "list" || result.kind === "count") meta.push("Listed from every document in scope.");
  else if (result.refused) meta.push(sentence(result.explanation || "nothing relevant was found"));
  else meta.push(`Answered by ${result.provider}.`);
  if (!result.refused && result.gate && result.gate.confidence === "tentative") {
    meta.push("Tentative: the sources may not hold this answer; check the citations.");
  }
  for (const f of result.fallbacks || []) meta.push(`Note: ${f.provider} failed (${f.error}).`);
  $("answer-meta").textContent = meta.join(" ");
  $("answer-sure").textContent = sureness(result);
}

// A turn of the conversation: the answer, and the question that was searched when a follow-up was rewritten.
function renderTurn(turn) {
  conversation.shown = turn;
  renderAnswer(turn.answer);
  const rewritten = turn.rewrite && turn.rewrite.method !== "none" && turn.rewritten !== turn.question;
  $("answer-asked-as").textContent = rewritten ? `Asked as: ${turn.rewritten}` : "";
  $("answer-asked-as").hidden = !rewritten;
}

// The turn on show moves into the thread above, its citations still buttons, when the next question is asked.
function archiveTurn() {
  const turn = conversation.shown;
  conversation.shown = null;
  if (!turn) return;
  const li = el("li");
  const said = el("p", null, "said");
  citedText(said, Object.assign({ citations: [] }, turn.answer));
  li.append(el("p", turn.question, "asked"), said);
  const files = el("ol", null, "files");
  renderFiles(files, turn.answer);
  if (!files.hidden) li.append(files);
  if (turn.rewrite && turn.rewrite.method !== "none" && turn.rewritten !== turn.question) {
    li.append(el("p", `Asked as: ${turn.rewritten}`, "meta"));
  }
  $("thread").append(li);
}

// A new conversation: the thread is cleared and the old one is forgotten on the server too (nothing can reopen it).
function newConversation() {
  const old = conversation.id;
  Object.assign(conversation, { id: null, filters: null, shown: null });
  $("thread").replaceChildren();
  for (const id of ["answer-question", "answer-text", "answer-meta", "answer-sure", "answer-asked-as"]) {
    $(id).textContent = "";
  }
  $("answer-asked-as").hidden = true;
  $("answer-files").replaceChildren();
  $("answer-files").hidden = true;
  $("answer").hidden = true;
  $("passage").hidden = true;
  if (old) api(`/v1/chat/${encodeURIComponent(old)}`, { method: "DELETE" }).catch(() => {});
}

// The ask JSON's explanation (why nothing answered, and which setting to change) as a sentence.
function sentence(text) {
  return text.charAt(0).toUpperCase() + text.slice(1) + ".";
}

// How sure the answer is, as the CLI says it: the gate's relevance and its verdict, then any note of the check.
function sureness(result) {
  const gate = result.gate;
  const parts = [];
  if (gate) {
    const verdict = { likely: "likely answered", tentative: "tentative", refused: "not answered" }[gate.confidence];
    parts.push(`Relevance ${gate.score.toFixed(2)}: ${verdict || gate.confidence}.`);
  }
  for (const note of result.notes || []) parts.push(`Note: ${note}.`);
  return parts.join(" ");
}

async function ask() {
  const body = Object.assign(queryBody(), { extractive: $("extractive").checked, stream: true });
  // A conversation keeps one scope: new filters (whose documents, types, dates, tags) start a new one.
  const filters = JSON.stringify(Object.assign({}, body, { query: null }));
  if (conversation.id && conversation.filters !== filters) newConversation();
  archiveTurn();
  if (conversation.id) body.conversation_id = conversation.id;
  conversation.filters = filters;
  $("answer").hidden = false;
  $("answer-question").textContent = body.query;
  $("answer-text").textContent = "";
  $("answer-files").replaceChildren();
  $("answer-files").hidden = true;
  $("answer-asked-as").hidden = true;
  $("answer-meta").textContent = "Answering…";
  $("answer-sure").textContent = "";
  const response = await postJson("/v1/chat", body);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (line) handleLine(JSON.parse(line));
    }
    if (done) break;
  }
  $("q").value = "";
}

function handleLine(event) {
  if (event.type === "text") $("answer-text").append(document.createTextNode(event.text));
  else if (event.type === "chat") {
    conversation.id = event.chat.conversation_id;
    renderTurn(event.chat.turn);
  } else if (event.type === "answer") renderAnswer(event.answer);
  else if (event.type === "error") throw new ApiError(`The answer failed: ${event.error.message}`);
}

// -- a source in context -----------------------------------------------------------------------------------
function openCitation(n, citations = lastCitations) {
  const citation = citations.find((c) => c.n === n);
  if (!citation) return;
  if (citation.locator.tool) {  // a tool's result (e.g. the weather): its text is the source
    showPassage(`[${n}] ${citation.source}`, citation.locator.link, "", [{ text: citation.snippet, focus: true }]);
    return;
  }
  openPassage(citation.locator.chunk_id, { n, source: citation.source, locator: citation.locator, citation });
}

async function openPassage(chunkId, cited) {
  try {
    const response = await api(`/v1/chunks/${encodeURIComponent(chunkId)}?around=1&scope=${$("scope").value}`);
    const data = await response.json();
    const doc = data.document;
    const focus = data.chunks.find((c) => c.chunk_id === data.focus) || {};
    const label = `${cited.n ? `[${cited.n}] ` : ""}${documentLabel(cited, doc)}`;
    const link = focus.link || (cited.locator && cited.locator.link) || doc.url;
    const quote = cited.citation || {};
    showPassage(label, link, place(focus), data.chunks.map((c) => ({ text: c.text, focus: c.chunk_id === data.focus,
      quote: c.chunk_id === data.focus ? quote : null })));
  } catch (error) {
    showError(error);
  }
}

// A cited document is named by the citation's title, which `ask` leaves out when the document's own is a placeholder
// ("Untitled", "Document1"), then by where it is: its URL, else its file. A search result has no citation: its
// document's title stands in.
function documentLabel(cited, doc) {
  const title = cited.locator ? cited.locator.title : doc.title;
  const where = doc.url || doc.file_path || cited.source;
  return title && title !== where ? `${title} — ${where}` : where;
}

function showPassage(label, link, where, chunks) {
  const head = $("passage-where");
  head.replaceChildren(sourceLink(label, link));
  if (where) head.append(el("span", ` · ${where}`));
  const box = $("passage-chunks");
  box.replaceChildren();
  for (const chunk of chunks) {
    const p = el("p", null, chunk.focus ? "chunk focus" : "chunk");
    p.append(...quoted(chunk.text, chunk.quote));
    if (chunk.focus) p.setAttribute("aria-current", "true");
    box.append(p);
  }
  const section = $("passage");
  section.hidden = false;
  section.focus();
  const target = box.querySelector("mark.quote.first") || box.querySelector("mark.quote")
    || box.querySelector(".focus");
  if (target) target.scrollIntoView({ block: "center" });
}

// The chunk's text with the cited sentence(s) marked, the one the answer cites first as `.first` (scrolled to).
// The API's offsets count code points and JavaScript's count UTF-16 units, so when the two disagree (an emoji
// before the quote) a quote is found by its text.
function quoted(text, citation) {
  const wanted = citation ? (citation.quotes && citation.quotes.length ? citation.quotes : [citation]) : [];
  const spans = [];
  wanted.forEach((q, order) => {
    if (!q.quote) return;
    let start = q.char_start;
    if (text.slice(start, start + q.quote.length) !== q.quote) start = text.indexOf(q.quote);
    if (start >= 0) spans.push({ start, end: start + q.quote.length, first: order === 0 });
  });
  spans.sort((a, b) => a.start - b.start);
  const nodes = [];
  let at = 0;
  for (const span of spans) {
    if (span.start < at) continue;  // overlapping quotes: the earlier mark covers it
    nodes.push(document.createTextNode(text.slice(at, span.start)));
    nodes.push(el("mark", text.slice(span.start, span.end), span.first ? "quote first" : "quote"));
    at = span.end;
  }
  nodes.push(document.createTextNode(text.slice(at)));
  return nodes;
}

function closePassage() {
  $("passage").hidden = true;
  const cite = document.querySelector(".cite");
  if (cite) cite.focus();
}

// -- upload and ingest -------------------------------------------------------------------------------------
async function upload() {
  const file = $("file").files[0];
  const form = new FormData();
  form.append("file", file, file.name);
  const response = await api("/v1/documents", { method: "POST", body: form });
  const body = await response.json();
  $("add-result").textContent = `${file.name}: ${body.status} (${body.document.file_path}, ${body.document.chunks} chunks)`;
  refreshStatus();
  await checkDocuments();
}

async function ingest() {
  let response;
  try {
    response = await postJson("/v1/ingest", { sources: [$("url").value] });
  } catch (error) {
    if (error instanceof ApiError && /^Not found/.test(error.message)) {
      throw new ApiError("This server cannot ingest URLs (no /v1/ingest endpoint).");
    }
    throw error;
  }
  const body = await response.json();
  $("add-result").textContent = body.results
    .map((r) => `${r.source || r.url}: ${r.status}${r.reason ? ` (${r.reason})` : ""}`).join("; ");
  refreshStatus();
  await checkDocuments();
}

// -- wiring ------------------------------------------------------------------------------------------------
function guarded(action) {
  return async (event) => {
    if (event) event.preventDefault();
    clearError();
    try {
      await action(event);
    } catch (error) {
      showError(error);
      if (error instanceof ApiError && /^The API key was refused/.test(error.message)) {
        $("answer-meta").textContent = "";
      }
    }
  };
}

document.addEventListener("DOMContentLoaded", () => {
  limitsLoaded = loadLimits();
  applyTheme(localStorage.getItem(THEME));
  $("theme").addEventListener("click", () => {
    const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    localStorage.setItem(THEME, next);
    applyTheme(next);
  });
  $("key-form").addEventListener("submit", guarded(async () => {
    await useKey($("key").value.trim());
    $("key").value = "";
  }));
  $("forget").addEventListener("click", () => {
    newConversation();  // forgotten on the server while the key still opens it
    sessionStorage.removeItem(KEY);
    showNotice("");
    $("results").hidden = true;
    $("answer").hidden = true;
    $("passage").hidden = true;
    showApp();
    $("key").focus();
  });
  $("query-form").addEventListener("submit", guarded((event) => {
    const which = event.submitter ? event.submitter.value : "search";
    return which === "ask" ? ask() : search();
  }));
  $("passage-close").addEventListener("click", closePassage);
  $("new-conversation").addEventListener("click", () => {
    newConversation();
    $("q").focus();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("passage").hidden) closePassage();
  });
  $("upload-form").addEventListener("submit", guarded(upload));
  $("ingest-form").addEventListener("submit", guarded(ingest));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("passage").hidden) $("passage-close").click();
  });
  refreshStatus();
  showApp();
  if (sessionStorage.getItem(KEY)) guarded(checkDocuments)();
  // `ragstead serve` prints the page's address with the owner's one-time token (`/?token=…`): it is the key.
  const token = new URLSearchParams(location.search).get("token");
  if (token) {
    history.replaceState(null, "", location.pathname);  // out of the address bar and the history
    guarded(() => useKey(token))();
  }
});
