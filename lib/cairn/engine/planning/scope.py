"""Resolving what a conversation is about to the folder that holds it: evidence, not a wall.

A conversation names what it is about ("the granary", "b and q warehouse"); a tree often
has a folder for it (a customer, a product, a place). Ranking that folder's content first is
what tells one place's "is there parking?" from another's. :class:`FolderResolver` looks for the
tree's own folder names (:mod:`.names`: titles and shared metadata, any casing, misspelt or
partial; an ordinary word the whole tenant uses, such as "support" or "data", is not a name by
itself) in the query and in the recent messages. A mention counts when its confidence reaches
``min_confidence``; among those, the one with the highest *strength* wins:

    strength = confidence × role weight (the query and user turns 1, assistant turns
               ``ASSISTANT_WEIGHT``) × ``FADE`` ** (messages back)

so a user's own words weigh more than an assistant's reply that quotes a folder name, older
mentions fade, and a newer topic replaces an older one. The plan carries the folders as
``boost_uris`` with ``boost = strength``: retrieval ranks their content higher and still searches
the whole tenant (:mod:`cairn.engine.retrieval.boost`), so a wrong guess costs little.

A folder *of a kind* (one of several siblings that hold children of the same names: every hotel
folder has ``parking.md``; :mod:`cairn.engine.retrieval.kinds`) is boosted when named: there the folder
says which instance a page belongs to, which the page's own words often do not. A *topic* folder
(``billing/`` beside ``support/``: its siblings hold none of its pages' names) whose name is an
ordinary word of the tenant (pages outside it use the word too: ``NameMatch.spread``) is not: its
pages say what they are about themselves, so a mention of it ("is stored data encrypted?", an
assistant's reply that said "data") adds nothing the query's and the conversation's words do not,
and ranking every page of it first put its unrelated pages over a better page elsewhere (measured on
a handbook in topic folders: benchmarks/README.md, issue 19). Such a mention boosts nothing, the next
strongest mention still can, and the plan says which was passed over; without a boost the session
planner carries the conversation's words instead (:mod:`.session_planner`). A topic folder whose name
no page outside it uses (a customer's folder of its own differently named documents, a handbook's
``office/``) stays a name, as weaker evidence than an entity of a kind: its matches rank first only
where they are about as good as the best anywhere (``TypedQuery.boost_good``,
:data:`cairn.engine.retrieval.boost.TOPIC_GOOD_RATIO`), so the name decides between comparable answers
("what are the payment terms?" after naming a customer) and does not override a clearly better one
("my laptop was stolen" two turns after a question about the office car park; "what's the home
office allowance?" asks about working from home). Said in an earlier message, not in the turn, it
may name a topic the chat has moved on from, so the turn is also searched with the previous user
turn (:mod:`.session_planner`). Before, such a mention held the next turns to the old folder: a
handbook chat that named ``office/`` for a parking question ranked the office pages first for "my
laptop was stolen" and answered nothing to "who do I call?".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.core.models import ContextType, QueryPlan
from cairn.engine.planning.names import DEFAULT_MIN_CONFIDENCE, FolderNames, NameMatch
from cairn.engine.retrieval.boost import TOPIC_GOOD_RATIO
from cairn.ports.vectorstores import VectorStore

Roots = Callable[[ContextType | None], list[str]]


ASSISTANT_WEIGHT = 0.6  # an assistant's reply that names a folder says less than the user naming it
FADE = 0.8  # per message back: older mentions fade


@dataclass(frozen=True)
class Said:
    """One text of the conversation: the query (seq 0, age 0) or a message."""

    seq: int
    text: str
    role: str = "user"
    age: int = 0  # messages back from the query (0: the query itself)

    @property
    def weight(self) -> float:
        return (ASSISTANT_WEIGHT if self.role == "assistant" else 1.0) * FADE**self.age


@dataclass(frozen=True)
class Resolution:
    match: NameMatch | None  # the name the search ranks first
    closest: NameMatch | None  # the best name found under the confidence, when nothing passed
    min_confidence: float
    strength: float = 0.0  # confidence × role weight × fade of the winning mention (0..1)
    role: str = "user"
    topic: NameMatch | None = None  # a stronger mention of a topic folder by an ordinary word (not boosted)
    # the match is a topic folder (named by a word only its pages use): its boost holds only where its
    # match is about as good as the best (module doc); ``earlier``: named in an earlier message
    topic_folder: bool = False
    earlier: bool = False

    @property
    def earlier_topic(self) -> bool:
        return self.topic_folder and self.earlier

    @property
    def boost(self) -> dict[str, Any]:
        """The fields a typed query takes for this resolution (none without a match)."""
        if not self.match:
            return {}
        good = {"boost_good": TOPIC_GOOD_RATIO} if self.topic_folder else {}
        return {"boost_uris": self.folders, "boost": self.strength, **good}

    @property
    def folders(self) -> tuple[str, ...]:
        return self.match.folders if self.match else ()

    def explain(self, where: Callable[[int], str] = lambda seq: "the query" if seq == 0 else f"message {seq}") -> str:
        topic = ""
        if self.topic:
            t = self.topic
            topic = (f"folder name {t.name!r} (said {t.said!r} in {where(t.seq)}) names a topic folder, "
                     f"{', '.join(t.folders)}, by a word pages outside it use too: not boosted, its pages say what "
                     "they are about in their own words")
        if self.match:
            m = self.match
            return (
                f"boosted {', '.join(m.folders)}: folder name {m.name!r} (said {m.said!r} in {where(m.seq)} by the "
                f"{self.role}, confidence {m.confidence:.2f}, strength {self.strength:.2f})"
                + (", a topic folder: first only where its match is about as good as the best" if self.topic_folder else "")
                + (f"; {topic}" if topic else "")
            )
        if topic:
            return f"no folder boosted: {topic}"
        if self.closest:
            c = self.closest
            return (
                f"no folder boosted: the closest folder name, {c.name!r} (said {c.said!r} in {where(c.seq)}), has confidence "
                f"{c.confidence:.2f}, under {self.min_confidence:.2f}"
            )
        return "no folder boosted: no folder name of the tree is mentioned"


class FolderResolver:
    """The folder a text or a conversation names, from the tenant's own folder names."""

    def __init__(
        self,
        store: VectorStore,
        tenant: str,
        embedder: Any = None,  # unused; kept so existing composition code keeps working
        *,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        names: FolderNames | None = None,
        stop_words: Iterable[str] = (),
    ) -> None:
        self.names = names or FolderNames(store, tenant, stop_words=stop_words)
        self.min_confidence = min_confidence
        self.lookups = 0

    def resolve(self, texts: Sequence[Said | tuple[int, str]], roots: list[str]) -> Resolution:
        """``texts``: the query and the messages (:class:`Said`, or ``(seq, text)`` pairs read as
        user texts of age 0); the strongest mention wins (module doc)."""
        closest: NameMatch | None = None
        passed: list[tuple[float, NameMatch, Said]] = []
        if roots:
            index = self.names.index(roots)
            self.lookups += 1
            for said in texts:
                said = said if isinstance(said, Said) else Said(said[0], said[1])
                found = index.match(said.text, said.seq)
                if not found:
                    continue
                top = found[0]
                if top.confidence < self.min_confidence:
                    if closest is None or top.confidence > closest.confidence:
                        closest = top
                    continue
                passed.append((top.confidence * said.weight, top, said))
        topic: NameMatch | None = None
        for strength, top, said in sorted(passed, key=lambda p: -p[0]):  # stable: the earlier text first on a tie
            is_topic = self.topics(top.folders) >= set(top.folders)
            if is_topic and top.spread > 0:
                topic = topic or top
                continue
            return Resolution(top, None, self.min_confidence, round(min(strength, 1.0), 4), said.role, topic,
                              topic_folder=is_topic, earlier=said.age > 0)
        return Resolution(None, closest, self.min_confidence, topic=topic)

    def topics(self, folders: Sequence[str]) -> set[str]:
        """The topic folders among ``folders`` (:meth:`.names.FolderNames.topics`): a mention of one
        by an ordinary word of the tenant boosts nothing (module doc)."""
        return self.names.topics(folders) if folders else set()

    def __call__(self, name: str, roots: list[str]) -> list[str]:
        """The folders ``name`` resolves to with enough confidence (empty when none does)."""
        return list(self.resolve([Said(0, name)], roots).folders)


def scope_plan(plan: QueryPlan, resolver: FolderResolver, roots: Roots) -> QueryPlan:
    """Boost, for each typed query without targets, the folder its own text names: the names an
    LLM planner wrote into its queries go through the same rule as a conversation's (checked
    against the tree, ordinary words are not names, evidence and never a wall)."""
    queries, notes = [], []
    for tq in plan.queries:
        if tq.target_uris:
            queries.append(tq)
            continue
        res = resolver.resolve([Said(0, tq.query)], roots(tq.context_type))
        notes.append(f"{tq.query!r}: {res.explain(lambda _: 'the planned query')}")
        queries.append(tq.model_copy(update=res.boost) if res.match else tq)
    if not notes:
        return plan
    return plan.model_copy(update={"queries": tuple(queries), "reasoning": f"{plan.reasoning} [folders: {'; '.join(notes)}]"})
