import pytest

from cairn.core.models import Level
from cairn.engine.ingest import Ingestor
from cairn.engine.ingest.chunking import CHUNK_CHARS, chunk
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit


@pytest.fixture
def store(tmp_path, embedder):
    return LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)


def test_folder_becomes_an_l0_l1_l2_tree(corpus, store, embedder):
    report = Ingestor(store, embedder, "acme").ingest_path(corpus, "cairn://resources/handbook")
    assert report.documents == 5 and report.rejected == []
    leaves = store.count("acme", {"level": 2})
    dirs0 = store.count("acme", {"level": 0})
    dirs1 = store.count("acme", {"level": 1})
    assert dirs0 == dirs1 == 3  # handbook, billing, travel
    assert leaves > 5  # the long guide is chunked
    assert store.count("acme", {"uri": "cairn://resources/handbook/billing/refunds.md"}) == 1
    assert store.count("acme", {"parent_uri": "cairn://resources/handbook/travel", "level": 2}) >= 2


def test_directory_summaries_are_extractive(corpus, store, embedder):
    Ingestor(store, embedder, "acme").ingest_path(corpus, "cairn://resources/handbook")
    from cairn.core.models import record_id

    root_l0, billing_l1 = store.fetch(
        "acme",
        [record_id("acme", "cairn://resources/handbook", 0), record_id("acme", "cairn://resources/handbook/billing", 1)],
    )
    assert root_l0.level is Level.ABSTRACT
    assert root_l0.title == "Company handbook"  # from the README's heading
    assert root_l0.abstract.startswith("Policies for billing")
    assert "refunds.md (file): Refunds" in billing_l1.text
    assert "invoices.md (file): Invoices" in billing_l1.text


def test_ingesting_the_same_files_again_changes_nothing(corpus, store, embedder):
    ing = Ingestor(store, embedder, "acme")
    first = ing.ingest_path(corpus, "cairn://resources/handbook")
    before = {r.id: r.updated_at for r in store.fetch("acme", _all_ids(store))}
    second = ing.ingest_path(corpus, "cairn://resources/handbook")
    assert first.embedded == first.records > 0
    assert second.embedded == 0 and second.unchanged == first.records
    assert {r.id: r.updated_at for r in store.fetch("acme", _all_ids(store))} == before


def test_a_changed_file_re_embeds_only_its_leaf_and_directories(corpus, store, embedder):
    ing = Ingestor(store, embedder, "acme")
    ing.ingest_path(corpus, "cairn://resources/handbook")
    (corpus / "billing" / "refunds.md").write_text("# Refunds\n\nRefunds are now possible within 60 days.\n")
    again = ing.ingest_path(corpus, "cairn://resources/handbook")
    # the leaf and billing's L1 (its listing shows the new abstract); billing's L0 lists only
    # titles, so it keeps its vector; the root lists only titles and abstracts of folders: unchanged
    assert again.embedded == 2


def test_bad_files_are_reported_and_the_rest_goes_on(corpus, store, embedder):
    (corpus / "logo.png").write_bytes(b"\x89PNG\x00\x00")
    (corpus / "empty.md").write_text("   \n")
    (corpus / "blob.txt").write_bytes(b"abc\x00def")
    report = Ingestor(store, embedder, "acme").ingest_path(corpus, "cairn://resources/handbook")
    reasons = {r.source.rsplit("/", 1)[1]: r.reason for r in report.rejected}
    assert "unsupported file type '.png'" in reasons["logo.png"]
    assert reasons["empty.md"] == "is empty"
    assert "binary" in reasons["blob.txt"]
    assert report.documents == 5


def test_chunks_start_at_sections_and_stay_bounded():
    text = "# Title\n\n" + "\n\n".join(f"## Part {n}\n\n" + ("word " * 250) for n in range(5))
    chunks = chunk(text)
    assert len(chunks) >= 5
    assert all(len(c) <= CHUNK_CHARS + 10 for c in chunks)
    assert sum(c.lstrip().startswith("## Part") for c in chunks) >= 4
    assert chunk("short text") == ["short text"]


def _all_ids(store):
    part = store._parts["acme"]
    return [part.ids[r] for r in part.live_rows()]


def test_a_folder_title_holding_a_placeholder_stays_literal_in_the_summary_prompt():
    from cairn.engine.ingest.summaries import ChildSummary
    from cairn.engine.ingest.summarizer import LLMSummarizer

    class Never:
        def complete(self, *a, **k):  # pragma: no cover - the prompt alone is checked
            raise AssertionError

    child = ChildSummary(name="a.md", title="a", abstract="an ordinary file", is_dir=False)
    prompt = LLMSummarizer(Never()).prompt("{children} and {count}", [child], None, "x")
    assert "{children} and {count}" in prompt  # the title, as written
    assert prompt.count("an ordinary file") == 1  # the listing, once, where the template puts it


def test_llm_summaries_are_bounded_per_summarizer():
    from cairn.engine.ingest.summaries import ChildSummary
    from cairn.engine.ingest.summarizer import LLMSummarizer

    class Counting:
        calls = 0

        def complete(self, *a, **k):
            Counting.calls += 1
            return '{"abstract": "Refund rules.", "overview": "Refund rules and forms."}'

    summarizer = LLMSummarizer(Counting(), max_calls=2)
    child = ChildSummary(name="a.md", title="Refunds", abstract="How refunds work.", is_dir=False)
    out = [summarizer.summarize_directory(f"d{n}", [child]) for n in range(5)]
    assert Counting.calls == 2 and summarizer.capped == 3
    assert out[0].abstract == "Refund rules." and out[4].abstract != "Refund rules."  # extractive past the bound
