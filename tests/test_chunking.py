import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragstead.chunking import ChunkingOptions, chunk_markdown, chunk_sentences, chunk_text, chunk_words
from ragstead.errors import ConfigError


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def test_word_windows_follow_seed_defaults():
    chunks = chunk_words(words(1000), ChunkingOptions())
    assert [(c.start_word, c.end_word) for c in chunks] == [(0, 400), (320, 720), (640, 1000)]
    assert chunks[1].text.split()[0] == "w320"
    assert chunks[-1].text.split()[-1] == "w999"


def test_word_windows_keep_char_offsets_into_the_original_text():
    text = "alpha  beta\n\ngamma delta\tepsilon " * 30
    for chunk in chunk_words(text, ChunkingOptions(chunk_size=7, overlap=2)):
        assert text[chunk.char_start : chunk.char_end] == chunk.text


@given(st.text(min_size=0, max_size=400), st.integers(1, 30), st.integers(0, 29))
def test_every_word_is_covered_and_offsets_hold(text, size, overlap):
    if overlap >= size:
        overlap = size - 1
    chunks = chunk_words(text, ChunkingOptions(chunk_size=size, overlap=overlap))
    covered = set()
    for chunk in chunks:
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        covered.update(range(chunk.start_word, chunk.end_word))
    assert covered == set(range(len(text.split())))


def test_sentence_chunks_merge_short_pieces_and_overlap():
    sentences = [f"Sentence number {i} talks about topic {i} in some detail here." for i in range(40)]
    text = " ".join(sentences)
    chunks = chunk_sentences(text, ChunkingOptions(strategy="sentences"))
    assert len(chunks) > 2
    for chunk in chunks:
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert len(chunk.text) <= 800 or chunk.text.count(".") == 1
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.char_start < prev.char_end  # overlap carried over
    tail = chunk_sentences(text + " Tiny.", ChunkingOptions(strategy="sentences"))
    assert tail[-1].text.endswith("Tiny.") and len(tail[-1].text) >= 100


def test_markdown_chunks_carry_section_path():
    text = "# Guide\nintro words\n## Install\n### Linux\napt install thing\n## Usage\nrun it\n"
    chunks = chunk_markdown(text, ChunkingOptions(strategy="markdown"))
    paths = [c.section_path for c in chunks]
    assert paths == ["Guide", "Guide > Install", "Guide > Install > Linux", "Guide > Usage"]
    linux = chunks[2]
    assert "apt install thing" in linux.text
    assert text[linux.char_start : linux.char_end] == linux.text


def test_empty_text_gives_no_chunks():
    assert chunk_text("   \n\t ") == []


@pytest.mark.parametrize("kwargs", [{"chunk_size": 0}, {"overlap": 400}, {"strategy": "magic"}])
def test_bad_options_are_rejected(kwargs):
    with pytest.raises(ConfigError):
        ChunkingOptions(**kwargs)
