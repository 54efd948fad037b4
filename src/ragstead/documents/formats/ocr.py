"""OCR of images and of scanned PDF pages, with Tesseract (Debian's tesseract-ocr, through pytesseract).

Chosen by measurement (bench/ocr_compare.py, docs/benchmarks.md): on made scans Tesseract read every word,
RapidOCR's wheel (rapidocr-onnxruntime, Chinese PP-OCR models) about one in eight English words, as it
glues words without spaces, and it was slower. Every call runs under the file's remaining time budget
(pytesseract kills the process at the timeout); an image's pixel count is checked before it is decoded.
`ocr = false` turns it off: images are skipped, scanned PDF pages stay empty. Off, or without Tesseract, an
image is skipped as an unsupported file (with the reason), not a failure: the run still exits 0.
"""

from __future__ import annotations

import io
import time
from typing import Any

from ragstead.documents.formats.parts import Meter, Nested, Parts, check_count
from ragstead.errors import LoadError, UnsupportedFileError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".heic", ".heif")
MAX_PIXELS = 64_000_000  # a 8000 x 8000 scan; a decompression bomb claims billions
_MIN_SIDE = 16  # an icon or a spacer image holds no text worth reading
# What to install, naming only what is missing (#47.8): the Python extra, or the Tesseract program it drives.
INSTALL_EXTRA = "OCR needs pip install 'ragstead[ocr]' (pytesseract)"
INSTALL_PROGRAM = "OCR needs the Tesseract program: apt-get install tesseract-ocr (Debian, Ubuntu)"


def _engine(budget: Meter) -> Any:
    """pytesseract, or UnsupportedFileError naming the extra to install."""
    try:
        import pytesseract
    except ImportError:
        raise UnsupportedFileError(f"{budget.name}: {INSTALL_EXTRA}, skipped") from None
    return pytesseract


def _open(data: bytes, budget: Meter) -> Any:
    from PIL import Image

    if data[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1", b"ftypheif", b"ftyphevc"):  # a phone's HEIC photo
        try:
            import pillow_heif
        except ImportError:
            raise UnsupportedFileError(f"{budget.name}: a HEIC image needs pip install 'ragstead[ocr]', "
                                       "skipped") from None
        pillow_heif.register_heif_opener()  # idempotent: Pillow then opens HEIF like any format
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise LoadError(f"{budget.name}: {width} x {height} pixels, over the {MAX_PIXELS:,}-pixel OCR limit, skipped")
    return image


def recognise(image: Any, budget: Meter) -> str:
    """The text Tesseract reads in one image (a PIL image), within the file's remaining time budget."""
    engine = _engine(budget)
    if min(image.size) < _MIN_SIDE:
        return ""
    budget.tick()
    remaining = max(1.0, getattr(budget, "deadline", time.monotonic() + 60) - time.monotonic())
    if image.mode not in ("RGB", "L") or getattr(image, "format", None) not in (None, "PNG", "JPEG", "TIFF", "WEBP"):
        image = image.convert("RGB")  # a plain image: pytesseract refuses formats it does not know (HEIF)
    try:
        text = engine.image_to_string(image, timeout=remaining)
    except RuntimeError as exc:  # pytesseract's timeout
        raise LoadError(f"{budget.name}: OCR took over the per-file time budget (file_seconds), skipped") from exc
    except engine.TesseractNotFoundError:
        raise UnsupportedFileError(f"{budget.name}: {INSTALL_PROGRAM}, skipped") from None
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def read_image(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """An image's recognised text; a multi-page TIFF is a part per page ("page 2")."""
    if not getattr(budget.limits, "ocr", True):
        raise UnsupportedFileError(f"{budget.name}: an image, and OCR is off (ocr = false), skipped")
    _engine(budget)  # the extra first: it brings Pillow too (pytesseract needs it)
    from PIL import ImageSequence

    image = _open(data, budget)
    frames = getattr(image, "n_frames", 1)
    check_count(frames, "pages", budget)
    found = Parts()
    for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
        text = recognise(frame, budget)
        found.add(f"page {number}" if frames > 1 else "image", text, budget)
    return found


def scanned_page(page: Any, budget: Meter) -> str:
    """The text of a PDF page without a text layer, read from its images ("" with OCR off or no images)."""
    if not getattr(budget.limits, "ocr", True):
        return ""
    pixels = 0  # declared by each image XObject, summed before any image is decoded
    resources = page.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    for ref in (xobjects.get_object().values() if xobjects is not None else ()):
        xobject = ref.get_object()
        if xobject.get("/Subtype") == "/Image":
            pixels += int(xobject.get("/Width", 0)) * int(xobject.get("/Height", 0))
    if pixels > MAX_PIXELS:
        raise LoadError(f"{budget.name}: a page's images hold {pixels:,} pixels, over the {MAX_PIXELS:,}-pixel "
                        "OCR limit, skipped")
    if pixels:
        _engine(budget)  # before pypdf decodes an image, which needs Pillow (the `ocr` extra)
    texts = []
    for picture in page.images:
        budget.tick()
        if picture.image is not None:
            texts.append(recognise(picture.image, budget))
    return "\n".join(text for text in texts if text)
