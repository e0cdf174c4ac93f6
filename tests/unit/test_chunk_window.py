"""Every text cairn embeds fits the embedder's window, counted by the embedder's own tokenizer: an
embedder reads only its first ``max_tokens`` tokens, so the end of a longer chunk was never embedded
(issue 38: 56 % of scifact's texts). The chunker cuts again where the characters fit and the tokens
do not, keeps the overlap inside the window, and leaves the title room."""

from __future__ import annotations

import pytest

from cairn.core.errors import RequestError
from cairn.core.models import Level
from cairn.engine.context import token_counter
from cairn.engine.ingest import Ingestor
from cairn.engine.ingest.chunking import ChunkingConfig, chunk_sections, markdown_sections
from cairn.engine.ingest.sources import Document
from cairn.engine.ingest.tree import embedding_text
from cairn.ports.embeddings.local import LocalEmbedder
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit

# ~1,400 characters of dense technical prose in one paragraph: under the 1,500-character budget,
# over MiniLM's 256 tokens (numbers, units and long words take several word pieces each)
DENSE = (
    "Mitochondrial complex I (NADH:ubiquinone oxidoreductase, EC 7.1.1.2) couples electron transfer "
    "from NADH to ubiquinone with translocation of four protons across the inner membrane; in "
    "Saccharomyces cerevisiae, Ndi1p substitutes for it. Cryo-EM at 2.3-3.1 Angstrom resolved the "
    "Q-tunnel, the ND1/ND3 loops and the 14 core subunits (NDUFS1-3, NDUFS7-8, NDUFV1-2, ND1-6, ND4L). "
    "Rotenone (IC50 ~ 20-50 nM), piericidin A and IACS-010759 bind within the tunnel; metformin's "
    "inhibition (IC50 19-79 mM) is non-competitive. ROS production at site IQ rises 3-5x under reverse "
    "electron transport (RET) when succinate accumulates post-ischaemia, e.g. 6-8 mM in reperfused "
    "myocardium. Deactive/active (D/A) transitions, thiol modification at ND3-Cys39, and S-nitrosation "
    "by MitoSNO modulate RET-driven injury. "
)
FACT = "The freezer log for sample batch QX-7 is kept by Priya Raman in Lisbon."


@pytest.fixture(scope="module")
def minilm():
    return LocalEmbedder()


def _window_tokens(embedder, text: str) -> int:
    return len(embedder.tokenizer().encode(text).ids)  # with [CLS] and [SEP], as the model reads it


def test_a_section_under_the_character_budget_but_over_the_window_is_cut_and_its_end_embedded(minilm, tmp_path):
    text = DENSE + FACT
    assert len(text) < ChunkingConfig().chunk_chars and _window_tokens(minilm, text) > minilm.max_tokens
    store = LocalVectorStore(tmp_path / "store", dimension=minilm.dimension)
    Ingestor(store, minilm, "t").ingest([Document(("complex-i.md",), text, title="Complex I notes")],
                                        "cairn://resources/lab")
    leaves = [r for batch in store.scan("t") for r in batch if r.level is Level.DETAIL]
    assert len(leaves) >= 2  # one chunk before: its last sentence was past the window
    for leaf in leaves:
        assert _window_tokens(minilm, embedding_text(leaf)) <= minilm.max_tokens, leaf.uri
    # the fact at the end is in a chunk the model reads whole
    assert any(FACT in leaf.text for leaf in leaves)
    # and the chunks still cover the document, in order
    spans = sorted((int(r.metadata["citation.start"]), int(r.metadata["citation.end"])) for r in leaves)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a_end >= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_the_overlap_and_the_packing_stay_inside_the_window(minilm):
    count = token_counter(minilm)
    cfg = ChunkingConfig(chunk_chars=4000, overlap_chars=1000).for_embedder(minilm.max_tokens, count)
    text = "\n\n".join(f"## Part {n}\n\n{DENSE}" for n in range(6))
    chunks = chunk_sections(text, markdown_sections(text), cfg)
    assert len(chunks) >= 6
    assert max(count(c.text) for c in chunks) <= minilm.max_tokens - 2
    # a continuation carries some of what precedes it, never more than a quarter of the window
    overlaps = [text[b.start : a.end] for a, b in zip(chunks, chunks[1:]) if b.start < a.end]
    assert overlaps and all(count(o) <= cfg.max_tokens // 4 for o in overlaps)


def test_a_dense_script_is_cut_by_its_tokens_not_its_characters():
    from cairn.ports.embeddings.local_e5 import LocalE5Embedder

    e5 = LocalE5Embedder()
    count = token_counter(e5)
    sentence = "第十二届国际线粒体医学研讨会的报告讨论了呼吸链复合物一的结构、抑制剂以及再灌注损伤的机制。"
    text = sentence * 40  # about 1,800 characters, far over 512 tokens
    cfg = ChunkingConfig().for_embedder(e5.max_tokens, count)
    chunks = chunk_sections(text, markdown_sections(text), cfg)
    assert all(count(c.text) <= e5.max_tokens - 2 for c in chunks)
    assert len(chunks) >= 3 and chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(a.end >= b.start for a, b in zip(chunks, chunks[1:]))  # nothing dropped between chunks


def test_without_a_window_the_characters_alone_decide():
    text = DENSE + FACT
    assert len(chunk_sections(text, markdown_sections(text), ChunkingConfig())) == 1
    assert ChunkingConfig().for_embedder(None, None) == ChunkingConfig()


def test_a_window_needs_its_counter_and_a_sensible_size():
    with pytest.raises(RequestError, match="max_tokens"):
        ChunkingConfig(max_tokens=256)
    with pytest.raises(RequestError, match="max_tokens"):
        ChunkingConfig(max_tokens=4, count_tokens=len)


def test_a_header_row_wider_than_half_the_window_does_not_shred_the_table(minilm):
    from cairn.engine.ingest.parsers.base import Section

    count = token_counter(minilm)
    header = " | ".join(f"column {n} of the quarterly ledger" for n in range(40)) + "\n"
    body = "\n".join(" | ".join(str(n * 40 + c) for c in range(40)) for n in range(30))
    assert count(header) > minilm.max_tokens // 2
    cfg = ChunkingConfig().for_embedder(minilm.max_tokens, count)
    chunks = chunk_sections(body, [Section(text=body, start=0, prefix=header)], cfg)
    # cut by the body's own tokens into pieces of rows (the character budget left beside a long header
    # is small), not into pieces of a character or two trying to fit the header too
    assert 2 <= len(chunks) <= len(body) // 50
    assert chunks[0].start == 0 and chunks[-1].end == len(body)


def test_a_reindex_to_a_smaller_window_says_which_chunks_it_cannot_embed_whole(tmp_path):
    from cairn import Cairn
    from cairn.app.services import Services
    from cairn.core.config import load_settings
    from cairn.engine.reindex import reindex

    base = {"CAIRN_HOME": str(tmp_path), "CAIRN_RECORD_USE": "false"}
    e5 = Services(load_settings(env={**base, "CAIRN_EMBEDDING_MODEL": "multilingual-e5-small"}))
    Cairn(e5, "acme").ingestor().ingest([Document(("complex-i.md",), DENSE + FACT, title="Complex I notes")],
                                        "cairn://resources/lab")  # one chunk: it fits e5's 512 tokens
    report = reindex(Services(load_settings(env=base)), ["acme"])  # to MiniLM: 256
    assert report.switched and report.over_window == 1
    assert "1 chunks are longer than local/minilm" in report.summary() and "ingest their sources again" in report.summary()


def test_an_ingest_keeps_the_smaller_window_it_was_given(minilm):
    from cairn.ports.embeddings.local_e5 import LocalE5Embedder

    e5 = LocalE5Embedder()
    cut_for_minilm = ChunkingConfig().for_embedder(minilm.max_tokens, token_counter(minilm))
    assert cut_for_minilm.for_embedder(e5.max_tokens, token_counter(e5)) is cut_for_minilm
    # and a larger window given first is tightened to the embedder's
    wide = ChunkingConfig().for_embedder(e5.max_tokens, token_counter(e5))
    assert wide.for_embedder(minilm.max_tokens, token_counter(minilm)).max_tokens == minilm.max_tokens - 2
