"""Compare the OCR engines on pages made here (#39): Pillow renders known text, slightly rotated, blurred and
noisy like a phone scan; each engine reads it; word accuracy = share of the true words found, in order-free
bag-of-words terms. Run: python bench/ocr_compare.py [pages]."""

from __future__ import annotations

import random
import re
import sys
import time
from collections import Counter

from PIL import Image, ImageDraw, ImageFilter, ImageFont

WORDS = ("the harbour committee agreed to repair the northern breakwater before winter storms arrive and "
         "asked the treasurer to publish quarterly accounts for every member household invoices receipts "
         "ledger pension insurance contract tenant landlord deposit meeting minutes signature").split()


def make_page(rng: random.Random, lines: int = 18) -> tuple[Image.Image, list[str]]:
    font = ImageFont.load_default(size=26)
    page = Image.new("L", (1240, 60 + lines * 44), 250)
    draw = ImageDraw.Draw(page)
    truth = []
    for n in range(lines):
        line = [rng.choice(WORDS) for _ in range(rng.randint(6, 10))]
        truth.extend(line)
        draw.text((70, 40 + n * 44), " ".join(line).capitalize() + ".", fill=20, font=font)
    page = page.rotate(rng.uniform(-1.5, 1.5), fillcolor=250, expand=False).filter(ImageFilter.GaussianBlur(0.6))
    noise = Image.effect_noise(page.size, 18)
    return Image.blend(page, noise, 0.12).convert("RGB"), truth


def accuracy(text: str, truth: list[str]) -> float:
    found = Counter(re.findall(r"[a-z]+", text.lower()))
    want = Counter(truth)
    return sum(min(found[w], c) for w, c in want.items()) / sum(want.values())


def rapid(image: Image.Image) -> str:
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR

    engine = rapid.engine = getattr(rapid, "engine", None) or RapidOCR()  # type: ignore[attr-defined]
    result, _ = engine(np.asarray(image))
    return " ".join(line[1] for line in result or [])


def tesseract(image: Image.Image) -> str:
    import pytesseract

    return pytesseract.image_to_string(image)


def main(pages: int = 4) -> None:
    rng = random.Random(39)
    samples = [make_page(rng) for _ in range(pages)]
    for name, engine in (("rapidocr-onnxruntime", rapid), ("tesseract", tesseract)):
        engine(samples[0][0])  # load the models once, outside the timing
        start = time.perf_counter()
        scores = [accuracy(engine(image), truth) for image, truth in samples]
        seconds = time.perf_counter() - start
        print(f"{name}: {pages / seconds:.2f} pages/s, word accuracy {sum(scores) / len(scores):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
