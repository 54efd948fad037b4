import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragstead.documents.chunking import ChunkingOptions, chunk_markdown, chunk_sentences, chunk_text, chunk_words
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


GIANT = "intro words here. " + "x" * 50_000 + " outro words.\n\n# Head\n\nbody " + "y" * 9_000


@pytest.mark.parametrize("strategy", ["words", "sentences", "markdown"])
def test_no_chunk_is_longer_than_max_chunk_chars_even_inside_a_giant_token(strategy):
    options = ChunkingOptions(strategy=strategy)
    chunks = chunk_text(GIANT, options)
    assert chunks and max(len(c.text) for c in chunks) <= options.max_chunk_chars == 4000
    assert [c.index for c in chunks] == list(range(len(chunks)))
    covered = set()
    for chunk in chunks:
        assert GIANT[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.start_word <= chunk.end_word
        covered.update(range(chunk.char_start, chunk.char_end))
    assert all(i in covered for i, ch in enumerate(GIANT) if not ch.isspace())  # nothing dropped


def test_a_long_chunk_is_cut_at_a_space_when_there_is_one():
    text = " ".join(f"word{i:05d}-padding" for i in range(400))  # one 400-word window of ~7,600 chars
    chunks = chunk_words(text, ChunkingOptions(max_chunk_chars=1000))
    assert len(chunks) == 8 and all(len(c.text) <= 1000 for c in chunks)
    assert " ".join(c.text for c in chunks) == text  # cut between words, none split
    assert [c.start_word for c in chunks] == sorted(c.start_word for c in chunks) and chunks[-1].end_word == 400


@given(st.text(alphabet=st.sampled_from("ab \n#."), max_size=300), st.integers(1, 40),
       st.sampled_from(["words", "sentences", "markdown"]))
def test_the_chunk_cap_keeps_offsets_and_covers_every_character(text, limit, strategy):
    chunks = chunk_text(text, ChunkingOptions(strategy=strategy, chunk_size=5, overlap=1, max_chars=30,
                                              overlap_chars=5, min_chars=3, max_chunk_chars=limit))
    covered = set()
    for chunk in chunks:
        assert 0 < len(chunk.text) <= limit and text[chunk.char_start : chunk.char_end] == chunk.text
        covered.update(range(chunk.char_start, chunk.char_end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_a_long_line_of_hashes_is_chunked_in_linear_time():
    # The old heading pattern `(.+?)[ \t#]*$` backtracked quadratically here (minutes); now it is one pass.
    text = "# a" + "#" * 200_000 + "x\n\nbody"
    chunks = chunk_markdown(text, ChunkingOptions(strategy="markdown"))
    assert chunks[0].section_path.startswith("a###") and chunks[-1].text.endswith("body")


def test_max_chunk_chars_must_be_positive():
    with pytest.raises(ConfigError, match="max_chunk_chars"):
        ChunkingOptions(max_chunk_chars=0)
