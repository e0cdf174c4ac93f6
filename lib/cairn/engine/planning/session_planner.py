"""The no-LLM planner of the embedded default: the raw query, scoped from the conversation.

A follow-up turn rarely names what it is about ("do they have parking?"): the conversation
does. With a :class:`~cairn.engine.planning.scope.FolderResolver`, the planner looks for the names the
tenant's own folders carry (titles and shared metadata; any casing, misspelt, partial or spoken
forms; not ordinary words) in the query and the recent messages, weighed by speaker and age,
and *boosts* the folder of the strongest mention (``boost_uris``: its content ranks higher, the
rest of the tenant still competes); under the confidence, the plan says which name came closest.

The conversation's content is carried too: when there is a previous user turn and no folder is
boosted, a second typed query searches it together with the query ("what about the fee?" is
searched with the question it follows). Both typed queries' matches are merged, each URI at its
best score, so a turn that says what it is about is not diluted and a follow-up finds what it
answers. When a folder is boosted, the folder already carries what the conversation is about and
the turn is searched with its own words only: the previous turn's words (often the very name that
led to the folder, or a request such as "a cheap hotel with parking") match the folder's
documents alike or pull the ranking toward what was asked before, not what is asked now
(measured: benchmarks/README.md, issue 19). Except for a topic folder named earlier in the
conversation (:mod:`.scope`): a topic folder's boost holds only where its match is about as good as
the best, so the turn may be answered from elsewhere, and a turn that did not name the folder itself
is searched with the previous user turn too ("who do I call?" after "my computer got stolen").

When nothing is scoped, names written in the conversation are added to the query text:

- quoted names ("The Ivy", 'Q3 report');
- capitalised multi-word phrases and mid-sentence capitalised words (Old Mill House,
  B and Q Warehouse, Granary), without the sentence-initial word and common words;
- names from an optional vocabulary, matched in any case.

Names the query already contains are skipped. The plan is one typed query across every
context type (or the requested one); ``planner="session-rewrite"`` and the reasoning says
which folder or name was used and from which message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cairn.core.models import ContextType, QueryPlan
from cairn.engine.planning.base import raw_query
from cairn.engine.planning.names import STOP_WORDS
from cairn.engine.planning.scope import FolderResolver, Resolution, Said
from cairn.ports.sessions.base import Message, SessionView

PLANNER_NAME = "session-rewrite"
LOOKBACK = 5
MAX_CARRIED_CHARS = 1000  # of the previous user turn carried into a follow-up's query
MAX_READ_MESSAGES = 1024  # messages whose names a planner keeps (all dropped at once past it)
# the carried query's matches count for this share of their score: a turn that says what it is
# about keeps its own answer first (chosen by measurement on the conversational benchmarks:
# benchmarks/README.md, issue 19; 0.9 until the carried query was dropped when it makes the best
# match weaker, then 0.8)
CARRIED_WEIGHT = 0.8
_QUOTED = re.compile(
    r"[\"“]([^\"”\n]{2,60})[\"”]|(?<![A-Za-z])'([A-Z][^'\n]{1,58})'(?![A-Za-z])"
)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’&-]*|[,.;:!?()]")
_CONNECTORS = {"and", "of", "the", "de", "la", "le", "du", "da", "&"}
_PRONOUNS = re.compile(
    r"\b(it|its|it's|they|them|their|theirs|there|this|that|these|those|he|she|him|her|his|hers|"
    r"the (one|same|former|latter|place|first one|second one|last one|other one))\b",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"^(?=.*\d)[A-Z0-9-]{5,}$"
)  # reference numbers, postcodes: not names


@dataclass(frozen=True)
class Mention:
    name: str
    seq: int  # the message it came from (0: the current query)
    source: str  # quoted | capitalised | vocabulary


def _clean(name: str) -> str:
    words = name.split()
    while words and words[0].lower() in _CONNECTORS | {"a", "an"}:
        words.pop(0)
    while words and words[-1].lower() in _CONNECTORS:
        words.pop()
    return " ".join(words).strip(" '’.,")


def capitalised_phrases(text: str, stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """Runs of capitalised words (connectors allowed inside), minus the sentence-initial word
    when it stands alone, minus common words. In order of appearance."""
    out: list[str] = []
    run: list[str] = []
    run_starts_sentence = False
    sentence_start = True

    def flush() -> None:
        nonlocal run
        while run and run[-1].lower() in _CONNECTORS:
            run.pop()
        words = [w for w in run]
        if words and run_starts_sentence and words[0].lower() in stop:
            words = words[1:]
        name = _clean(" ".join(words))
        significant = [
            w
            for w in name.split()
            if w.lower() not in stop and w.lower() not in _CONNECTORS
        ]
        if name and significant and not (run_starts_sentence and len(run) == 1):
            out.append(name)
        run = []

    tokens = _TOKEN.findall(text)
    for n, tok in enumerate(tokens):
        if tok.lower() == "and" and n + 1 < len(tokens) and tokens[n + 1] == "The":
            flush()  # "the Old Mill and The Granary": two names
            continue
        if tok in ",.;:!?()":
            flush()
            sentence_start = tok in ".!?"
            continue
        if tok[0].isdigit() or _CODE.match(tok):
            flush()  # numbers and codes end a name ("Granary Lofts 619 Mill Road")
            sentence_start = False
            continue
        is_cap = tok[0].isupper()
        if is_cap or (run and tok.lower() in _CONNECTORS):
            if not run:
                run_starts_sentence = sentence_start
            run.append(tok)
        else:
            flush()
        sentence_start = False
    flush()
    return out


def mentions(
    text: str,
    seq: int,
    vocabulary: Sequence[tuple[str, re.Pattern[str]]] = (),
    stop: frozenset[str] = STOP_WORDS,
) -> list[Mention]:
    """Entity names in ``text``, the last one mentioned first."""
    found: list[tuple[int, Mention]] = []
    for m in _QUOTED.finditer(text):
        name = _clean(m.group(1) or m.group(2) or "")
        if name:
            found.append((m.start(), Mention(name, seq, "quoted")))
    for name, pattern in vocabulary:
        for m in pattern.finditer(text):
            found.append((m.start(), Mention(name, seq, "vocabulary")))
    pos = 0
    for name in capitalised_phrases(text, stop):
        at = text.find(name, pos)
        pos = max(pos, at)
        found.append((at, Mention(name, seq, "capitalised")))
    found.sort(key=lambda f: -f[0])
    return [m for _, m in found]


def _contains(query: str, name: str, stop: frozenset[str] = STOP_WORDS) -> bool:
    q = query.lower()
    words = [
        w
        for w in re.findall(r"[a-z0-9']+", name.lower())
        if w not in stop and w not in _CONNECTORS
    ]
    return bool(words) and all(re.search(rf"\b{re.escape(w)}\b", q) for w in words)


class SessionRewritePlanner:
    """The raw query plus the entity the conversation is about, when the query lacks one."""

    name = PLANNER_NAME

    def __init__(
        self,
        vocabulary: Iterable[str] = (),
        *,
        lookback: int = LOOKBACK,
        max_names: int = 2,
        resolver: FolderResolver | None = None,
        roots: Callable[[ContextType | None], list[str]] | None = None,
        stop_words: Iterable[str] = (),
        follow_up_words: int | None = None,
        carried_weight: float = CARRIED_WEIGHT,
    ) -> None:
        """``resolver`` finds the folder the conversation is about (it scopes the search);
        ``roots`` gives the roots a context type searches; ``stop_words`` extends the generic
        :data:`~cairn.engine.planning.names.STOP_WORDS` for the name heuristics of the query rewrite."""
        self.stop = STOP_WORDS | {w.lower() for w in stop_words}
        names = sorted(
            {v.strip() for v in vocabulary if v and len(v.strip()) >= 3},
            key=len,
            reverse=True,
        )
        self.vocabulary = [
            (n, re.compile(rf"\b{re.escape(n)}\b", re.IGNORECASE)) for n in names
        ]
        self.lookback = lookback
        self.max_names = max_names
        self.resolver = resolver
        self.roots = roots  # the roots a context type searches (where folders are looked up)
        # a query of at most this many words is also searched with the previous user turn (None: any)
        self.follow_up_words = follow_up_words
        self.carried_weight = carried_weight
        self._read: dict[tuple[str, int], tuple[Mention, ...]] = {}  # each message's names: read again on every later turn

    def plan(
        self,
        query: str,
        session: SessionView | None = None,
        *,
        context_type: ContextType | None = None,
        target_uris: tuple[str, ...] = (),
    ) -> QueryPlan:
        messages = list(session.recent[-self.lookback :]) if session else []
        resolution = self._scope(query, messages, context_type, target_uris)
        boost: dict = {}
        notes: list[str] = []
        if resolution is not None:
            notes.append(resolution.explain())
            boost = resolution.boost
        # a topic folder named earlier may be a topic the turn has moved on from (planning/scope.py)
        moved_on = resolution is not None and resolution.earlier_topic
        carried = None if boost and not moved_on else self.with_conversation(query, messages)
        names = [] if boost else self.resolve(query, messages)
        if names:
            notes.insert(0, "added " + "; ".join(f"{m.name!r} ({m.source}, message {m.seq})" for m in names))
        # the conversation's content (the previous user turn, names written in the conversation)
        # goes into a second query; without a previous user turn, the names go into the only one
        named = f" ({', '.join(m.name for m in names if carried is None or not _contains(carried, m.name, self.stop))})"
        named = "" if named == " ()" else named
        text = f"{query}{named}" if carried is None else query
        intent = "query with the session's entity" if text != query else "raw query"
        queries = [raw_query(text, context_type, target_uris, intent=intent).model_copy(update=boost)]
        if carried is not None:
            carried += named
            queries.append(
                raw_query(carried, context_type, target_uris, intent="query with the previous user turn")
                .model_copy(update={**boost, "weight": self.carried_weight})
            )
            notes.append(
                f"also searched with the previous user turn, its matches weighted {self.carried_weight:g} "
                "(a follow-up is searched with what it answers)"
            )
        if session is None:
            notes.insert(0, "raw query: no session")
        return QueryPlan(reasoning="; ".join(notes) or "raw query", queries=tuple(queries), planner=self.name)

    def with_conversation(self, query: str, messages: Sequence[Message]) -> str | None:
        """The query with the previous user turn before it (None without one, or when the query
        is longer than ``follow_up_words`` words and so likely says what it is about)."""
        previous = next((m.content for m in reversed(messages) if m.role == "user" and m.content.strip()), None)
        if previous is None or previous.strip() == query.strip():
            return None
        if self.follow_up_words is not None and len(query.split()) > self.follow_up_words:
            return None
        return f"{' '.join(previous.split())[:MAX_CARRIED_CHARS]} {query}"

    def _scope(
        self, query: str, messages: Sequence[Message], context_type: ContextType | None, target_uris: tuple[str, ...]
    ) -> Resolution | None:
        """The folder the conversation is about (the query and the recent messages, each weighed
        by its speaker and age: :mod:`.scope`); None when the caller gave targets or no resolver
        is configured."""
        if self.resolver is None or self.roots is None or target_uris:
            return None
        texts = [Said(0, query)] + [
            Said(m.seq, m.content, m.role, age) for age, m in enumerate(reversed(messages), start=1)
        ]
        return self.resolver.resolve(texts, self.roots(context_type))

    def resolve(self, query: str, messages: Sequence[Message]) -> list[Mention]:
        """The names to add: none when the query already names an entity (and uses no pronoun);
        else the names of the most recent message that has any, skipping ones in the query."""
        own = mentions(query, 0, self.vocabulary, self.stop)
        if own and not _PRONOUNS.search(query):
            return []
        for msg in reversed(messages):
            found: list[Mention] = []
            for m in self._mentions(msg):
                if _contains(query, m.name, self.stop) or any(
                    _contains(f.name, m.name, self.stop) for f in found
                ):
                    continue
                found.append(m)
            if found:
                return found[: self.max_names]
        return []

    def _mentions(self, msg: Message) -> list[Mention]:
        """:func:`mentions` of a message, read once per text."""
        read = self._read.get((msg.content, msg.seq))
        if read is None:
            read = tuple(mentions(msg.content, msg.seq, self.vocabulary, self.stop))
            if len(self._read) >= MAX_READ_MESSAGES:
                self._read.clear()
            self._read[(msg.content, msg.seq)] = read
        return list(read)
