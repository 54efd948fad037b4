"""The offline auto-tagger keeps a tag only above a bar on precision (#47.12), measured on a folder's labelled
notes (tests/data/tagging: a fit half the thresholds were chosen on, a held-out half they are checked on)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ragstead.ingest.tagging import local_tags

SAMPLE = Path(__file__).parent / "data" / "tagging"
LABELS = tomllib.loads((SAMPLE / "labels.toml").read_text(encoding="utf-8"))
VOCABULARY = LABELS["vocabulary"]


def _note(name: str) -> str:
    return (SAMPLE / "notes" / f"{name}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["security-password-manager", "book-notes-deep-work"])
def test_a_kafka_setting_is_no_longer_offered_on_a_note_about_something_else(real_embedder, name):
    """The low-precision tag of the report: `retention-ms` (a Kafka setting, an existing tag of the folder) was
    offered on a password-manager note and on book notes (cosine 0.23, over the former 0.225)."""
    tags = local_tags(_note(name), VOCABULARY, real_embedder).tags
    assert "retention-ms" not in tags and "kafka" not in tags, tags


def test_the_kafka_note_keeps_its_own_tags(real_embedder):
    tags = local_tags(_note("kafka-retention-change"), VOCABULARY, real_embedder).tags
    assert {"kafka", "retention-ms"} <= set(tags), tags


def test_the_tags_offered_on_the_held_out_notes_clear_the_bar(real_embedder):
    """Held-out half: 0.60 of the tags offered were right with the former thresholds (4.2 a note), 0.86 now."""
    offered = right = 0
    for name, note in LABELS["notes"].items():
        if note["half"] != "held_out":
            continue
        tags = local_tags(_note(name), VOCABULARY, real_embedder).tags
        offered += len(tags)
        right += sum(tag in note["accept"] for tag in tags)
    assert offered >= 12  # still about one right tag a note or more, not a tagger that offers nothing
    assert right / offered >= 0.8, (right, offered)
