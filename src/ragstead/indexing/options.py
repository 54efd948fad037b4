"""`IndexingOptions`: what an index run reads and how it cuts it. Apart from the index run (build.py) so the
settings can name its defaults without loading the indexer (numpy, the file readers): `ls` and `status` read
the settings too."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ragstead.documents.chunking import ChunkingOptions
from ragstead.documents.loaders import LoadLimits
from ragstead.documents.metadata import DEFAULT_PATH_RULES, PathRule
from ragstead.errors import ConfigError

# `follow_symlinks`: "scope" follows a symlink only to a target under the same root with the same user and
# privacy (path rules); "project" follows it anywhere inside the project root.
FOLLOW_SYMLINKS = ("scope", "project")
_LIMITS = LoadLimits()


@dataclass(frozen=True)
class IndexingOptions:
    """What an index run reads and how it cuts it (the project settings, narrowed to indexing).

    The limits bound what one file may cost (docs/design.md, "Hostile files"); the chunk length cap is
    `chunking.max_chunk_chars`."""

    root: Path
    roots: tuple[str, ...] = ("kb", "artifacts")
    lock_file: Path = Path("kb/rag/index.lock")
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)
    path_rules: tuple[PathRule, ...] = DEFAULT_PATH_RULES
    skip_dirs: tuple[Path, ...] = ()  # the index's own folders, never indexed
    skip_files: tuple[Path, ...] = ()  # the project's own files (its config), never indexed nor reported
    max_file_bytes: int = _LIMITS.max_file_bytes
    max_unzipped_bytes: int = _LIMITS.max_unzipped_bytes
    max_zip_ratio: float = _LIMITS.max_zip_ratio
    max_pdf_pages: int = _LIMITS.max_pdf_pages
    max_file_chars: int = _LIMITS.max_chars
    max_html_depth: int = _LIMITS.max_html_depth
    file_seconds: float = _LIMITS.seconds
    follow_symlinks: str = "scope"
    ocr: bool = True  # images and scanned PDF pages are read with OCR (Tesseract)
    max_reader_bytes: int = _LIMITS.max_reader_bytes  # the reader process's memory (0: read in this process)
    exclude: tuple[str, ...] = ()  # gitignore-style patterns, relative to the project root

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_unzipped_bytes", "max_zip_ratio", "max_pdf_pages", "max_file_chars",
                     "max_html_depth", "file_seconds"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be above 0, got {getattr(self, name)!r}")
        if self.max_reader_bytes < 0:
            raise ConfigError(f"max_reader_mb must be 0 or above, got {self.max_reader_bytes >> 20!r}")
        if self.follow_symlinks not in FOLLOW_SYMLINKS:
            raise ConfigError(f"follow_symlinks must be one of {FOLLOW_SYMLINKS}, got {self.follow_symlinks!r}")

    @property
    def load_limits(self) -> LoadLimits:
        return LoadLimits(max_file_bytes=self.max_file_bytes, max_unzipped_bytes=self.max_unzipped_bytes,
                          max_zip_ratio=self.max_zip_ratio, max_pdf_pages=self.max_pdf_pages,
                          max_chars=self.max_file_chars, max_html_depth=self.max_html_depth,
                          seconds=self.file_seconds, ocr=self.ocr, max_reader_bytes=self.max_reader_bytes)
