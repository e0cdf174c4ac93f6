"""Folder names found in conversational text: casing, misspellings, partial and spoken forms,
weighted by the tree's own names (no word list), with a confidence."""

import pytest

from cairn.engine.planning.names import NameIndex, normalise
from cairn.engine.planning.scope import FolderResolver, Said
from cairn.engine.retrieval.boost import TOPIC_GOOD_RATIO
from cairn.ports.vectorstores.fusion import fuse

pytestmark = pytest.mark.unit
R = "cairn://resources/places"
PLACES = {
    "1": "THE LENSFIELD HOTEL",
    "2": "A AND B GUEST HOUSE",
    "3": "CITYROOMZ",
    "4": "CAFFE UNO",
    "5": "ACORN GUEST HOUSE",
    "6": "ARBURY LODGE GUESTHOUSE",
    "7": "GONVILLE HOTEL",
    "8": "THE LUCKY STAR",
    "9": "ASHLEY HOTEL",
}


def tree() -> list[tuple[str, str]]:
    entries = [("hotel", f"{R}/hotel")]
    for i, name in PLACES.items():
        u = f"{R}/hotel/{i}"
        entries += [(name, u), (f"{name} (hotel)", u), (f"FAQ of {name}", f"{u}/faq"), (name, f"{u}/faq")]
    return entries


@pytest.fixture(scope="module")
def index() -> NameIndex:
    return NameIndex(tree())


def best(index: NameIndex, text: str):
    found = index.match(text)
    return found[0] if found else None


def test_normalise_reads_case_accents_ampersands_and_apostrophes():
    assert normalise("Rosa's B&B — Café") == ["rosas", "b", "and", "b", "cafe"]


@pytest.mark.parametrize(
    "text,folder",
    [
        ("is the lensfield hotel nice?", "1"),  # lower case
        ("what about the lensfield", "1"),  # partial: the distinctive word is enough
        ("a and b guest house please", "2"),  # spoken letters
        ("is city roomz cheap", "3"),  # one word written as two
        ("book the cafe uno", "4"),  # misspelt
        ("the gonvile hotel then", "7"),  # misspelt
        ("Does ASHLEY HOTEL have wifi?", "9"),  # any casing
    ],
)
def test_a_name_is_found_however_it_is_written(index, text, folder):
    m = best(index, text)
    assert m is not None and m.folders == (f"{R}/hotel/{folder}",) and m.confidence >= 0.55


def test_the_outermost_folder_stands_for_a_name(index):
    m = best(index, "ACORN GUEST HOUSE")
    assert m.folders == (f"{R}/hotel/5",)  # not its FAQ folder, which carries the name too


def test_words_every_name_shares_are_weak_evidence(index):
    m = best(index, "i want a guest house near the station")
    assert m is None or m.confidence < 0.55
    assert best(index, "do they have free wifi?") is None


def test_a_word_the_whole_tree_uses_does_not_name_a_folder_said_alone():
    # the tenant's content uses "star" everywhere (ratings), "lensfield" only in its own folder
    spread = lambda word, folders: 0.9 if word == "star" else 0.0  # noqa: E731
    index = NameIndex(tree(), spread=spread)
    assert best(index, "a 4 star place please").confidence < 0.55
    assert best(index, "the lucky star then").confidence >= 0.55  # the whole name said
    assert best(index, "the lensfield").confidence >= 0.55


class _Names:
    def __init__(self, index: NameIndex, topics: frozenset[str] = frozenset()) -> None:
        self._index, self._topics = index, topics

    def index(self, roots):
        return self._index

    def topics(self, folders):
        return {f for f in folders if f in self._topics}


def test_the_most_recent_confident_mention_wins_and_low_confidence_is_explained(index):
    resolver = FolderResolver(None, "t", names=_Names(index))
    texts = [Said(0, "do they have parking?"), Said(4, "the acorn is cheaper", "user", 1),
             Said(2, "the lensfield hotel is nice", "user", 3)]
    res = resolver.resolve(texts, [R])
    assert res.folders == (f"{R}/hotel/5",) and "message 4" in res.explain()
    assert 0 < res.strength < res.match.confidence  # one message back: faded
    weak = resolver.resolve([Said(0, "is there a guest house?")], [R])
    assert weak.match is None and weak.explain().startswith("no folder boosted")


def test_a_users_mention_outweighs_an_assistants_and_a_new_topic_replaces_an_old_one(index):
    resolver = FolderResolver(None, "t", names=_Names(index))
    user_then_assistant = [Said(0, "and parking?"), Said(4, "I recommend the lensfield hotel", "assistant", 1),
                           Said(3, "tell me about the lensfield hotel", "user", 2)]
    res = resolver.resolve(user_then_assistant, [R])
    assert res.role == "user" and res.strength == pytest.approx(res.match.confidence * 0.8**2)
    new_topic = [Said(0, "is it quiet?"), Said(6, "what about the acorn guest house", "user", 1),
                 Said(2, "tell me about the lensfield hotel", "user", 5)]
    assert resolver.resolve(new_topic, [R]).folders == (f"{R}/hotel/5",)


@pytest.mark.parametrize("spread", [0.2, 0.0])
def test_a_topic_folder_named_by_an_ordinary_word_boosts_nothing_and_a_weaker_mention_still_can(spread):
    # "lensfield" read as a topic folder (its siblings hold none of its pages' names); with
    # ``spread`` of the documents using its word lying outside it: an ordinary word of the tenant
    # (> 0) names nothing, a word only its own pages use (0) is still a name
    index = NameIndex(tree(), spread=lambda word, folders: spread)
    lensfield = best(index, "the lensfield").folders[0]
    texts = [Said(0, "and parking?"), Said(4, "lensfield it is", "user", 1),
             Said(2, "what about the acorn guest house", "user", 3)]
    resolver = FolderResolver(None, "t", names=_Names(index, frozenset({lensfield})))
    res = resolver.resolve(texts, [R])
    alone = resolver.resolve(texts[:2], [R])
    if not spread:
        assert res.folders == alone.folders == (lensfield,) and res.topic is None
        # a topic folder: first only where its match is about as good as the best; the plan says so
        assert res.boost["boost_good"] == TOPIC_GOOD_RATIO and "a topic folder: first only" in res.explain()
        assert res.earlier_topic  # named in an earlier message: the turn may have moved on
        asked = resolver.resolve([Said(0, "parking at the lensfield?")], [R])
        assert asked.folders == (lensfield,) and asked.topic_folder and not asked.earlier_topic
        return
    assert res.folders != (lensfield,) and res.match is not None  # the older mention of a hotel wins
    assert res.topic is not None and res.topic.folders == (lensfield,)
    assert "names a topic folder" in res.explain() and res.explain().startswith("boosted")
    assert alone.match is None and alone.folders == ()
    assert alone.explain().startswith("no folder boosted: folder name") and "topic folder" in alone.explain()


def test_a_topic_folder_is_weaker_evidence_than_a_folder_of_a_kind():
    index = NameIndex(tree(), spread=lambda word, folders: 0.0)
    lensfield = best(index, "the lensfield").folders[0]
    moved_on = [Said(0, "my laptop was stolen, who do I call?"), Said(6, "parking at the lensfield?", "user", 2)]
    as_topic = FolderResolver(None, "t", names=_Names(index, frozenset({lensfield}))).resolve(moved_on, [R])
    as_entity = FolderResolver(None, "t", names=_Names(index)).resolve(moved_on, [R])  # one of a kind
    assert as_topic.folders == as_entity.folders == (lensfield,)
    assert as_topic.earlier_topic and not as_entity.earlier_topic
    assert as_topic.boost["boost_good"] == TOPIC_GOOD_RATIO and "boost_good" not in as_entity.boost  # GOOD_RATIO


def test_fusion_keeps_dense_scores_on_their_scale_and_gives_unknown_words_no_bonus():
    dense = [("a", 0.6), ("b", 0.5), ("c", 0.05)]
    assert fuse(dense, [], 3) == [("a", pytest.approx(0.42)), ("b", pytest.approx(0.35)), ("c", pytest.approx(0.035))]
    fused = dict(fuse(dense, [("c", 8.0), ("d", 4.0)], 4))
    assert fused["c"] == pytest.approx(0.7 * 0.05 + 0.3)  # best keyword match: the full bonus
    assert fused["d"] == pytest.approx(0.3 * 0.5)  # keyword only: the dense list held every match
    assert all(0.0 <= s <= 1.0 for s in fused.values())


def test_chinese_folder_names_are_matched_by_their_words():
    # issue 25: ASCII folding dropped every Chinese character, so no Chinese name could ever match
    r = "cairn://resources/help"
    names = NameIndex([("退款政策", f"{r}/refunds"), ("发票", f"{r}/invoices"), ("数据存储", f"{r}/storage")])
    found = names.match("我想问一下退款政策的细节")
    assert found and found[0].folders == (f"{r}/refunds",)
    assert normalise("Возврат денег") == ["возврат", "денег"]
