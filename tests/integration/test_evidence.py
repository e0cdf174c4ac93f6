"""No evidence, no results: random letters find nothing even where their cosine clears the
threshold, while a misspelt question still finds its answer (cairn.engine.retrieval.evidence)."""

import itertools

import pytest

from cairn import Cairn
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.retrieval.evidence import noise_floor
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
SUBJECTS = ("The staff", "Our guide", "The kitchen", "The garden", "The museum", "The bus", "The ferry", "The library")
FACTS = ("was friendly", "opens at nine", "closes early on Sundays", "was very noisy", "is wheelchair accessible",
         "was spotless", "accepts cards")
GIBBERISH = ("qwzx plorf vrum", "blorptang quiffle")


def reviews(folder, embedder):
    """56 one-line reviews: short texts, where random letters reach a cosine over 0.1."""
    store = LocalVectorStore(folder / "store", dimension=embedder.dimension)
    docs = [Document((f"r{n}.md",), f"{s} {f}.") for n, (s, f) in enumerate(itertools.product(SUBJECTS, FACTS))]
    Ingestor(store, embedder, "t").ingest(docs, "cairn://resources/reviews")
    return Cairn(store, embedder, "t")


@pytest.fixture(scope="module")
def svc(tmp_path_factory, embedder):
    return reviews(tmp_path_factory.mktemp("evidence"), embedder)


@pytest.mark.parametrize("gibberish", GIBBERISH)
def test_random_letters_clear_the_cosine_threshold_but_find_nothing(svc, gibberish):
    everything = svc.find(gibberish, score_threshold=-1.0).all()  # a negative threshold turns the gate off
    assert everything and everything[0].score > 0.1  # the 0.1 threshold alone would let them through
    for mode in ("quick", "thinking"):
        for hybrid in (False, True):
            assert svc.find(gibberish, mode=mode, hybrid=hybrid).all() == [], (mode, hybrid)
            assert svc.search(gibberish, mode=mode, hybrid=hybrid).all() == [], (mode, hybrid)


def test_the_trace_says_why_nothing_was_found(svc):
    result = svc.find("qwzx plorf vrum", include_provenance=True)
    trace = result.query_results[0].trace
    assert trace.stats.stop_reason == "no_evidence"
    assert any("no evidence" in e.detail and "random text" in e.detail for e in trace.events)


def test_a_misspelt_question_clearly_closer_than_noise_still_finds_an_answer(svc):
    result = svc.find("wheelchar accessibilty", include_provenance=True)  # neither word occurs in the reviews
    assert result.all() and "wheelchair accessible" in result.all()[0].abstract
    assert any("beats the noise floor" in e.detail for e in result.query_results[0].trace.events)


def test_the_noise_floor_is_learned_from_the_tenants_content(svc, embedder):
    floor = noise_floor(svc.store, embedder, "t")
    assert 0.1 < floor < 0.5  # what random strings reach against these reviews
    assert noise_floor(svc.store, embedder, "nobody") == 0.0  # an empty tenant has no floor to beat


def test_random_letters_asked_before_the_documents_arrived_still_find_nothing_after(tmp_path, embedder):
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    svc = Cairn(store, embedder, "t")
    assert svc.find("how do I get there").all() == []  # asked while the tenant is still empty
    assert noise_floor(store, embedder, "t") == 0.0  # (as `cairn serve` does while a PUT is being indexed)
    docs = [Document((f"r{n}.md",), f"{s} {f}.") for n, (s, f) in enumerate(itertools.product(SUBJECTS, FACTS))]
    Ingestor(store, embedder, "t").ingest(docs, "cairn://resources/reviews")
    assert noise_floor(store, embedder, "t") > 0.1  # learned from the documents, not the empty tenant
    for gibberish in GIBBERISH:
        assert svc.find(gibberish).all() == [] and svc.search(gibberish).all() == []


def test_a_word_in_another_users_memories_is_no_evidence(tmp_path, embedder):
    svc = reviews(tmp_path, embedder)
    svc.remember("My locker code is qwzx plorf vrum.", "preferences", user="ann")
    mine = svc.find("qwzx plorf vrum", context_type="memory", user="ann").all()
    assert mine and "qwzx plorf vrum" in mine[0].abstract  # ann's own words are evidence for ann
    theirs = svc.find("qwzx plorf vrum", context_type="memory", user="bob", include_provenance=True)
    assert theirs.all() == [] and theirs.query_results[0].trace.stats.stop_reason == "no_evidence"
