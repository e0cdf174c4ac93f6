"""The no-LLM planner of the embedded default: the raw query, scoped from the conversation.

A follow-up turn rarely names what it is about ("do they have parking?"): the conversation
does. With a :class:`~cairn.planning.scope.FolderResolver`, the planner looks for the names the
tenant's own folders carry (titles and shared metadata; any casing, misspelt, partial or spoken
forms) in the query, then in the recent messages, most recent first, and scopes the search to
the folder of the first name found with enough confidence; under it, the plan says which name
came closest and does not scope.

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

from ..models import ContextType, QueryPlan
from ..sessions.base import Message, SessionView
from .base import raw_query
from .names import STOP_WORDS
from .scope import FolderResolver, Resolution

PLANNER_NAME = "session-rewrite"
LOOKBACK = 5
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
    ) -> None:
        """``resolver`` finds the folder the conversation is about (it scopes the search);
        ``roots`` gives the roots a context type searches; ``stop_words`` extends the generic
        :data:`~cairn.planning.names.STOP_WORDS` for the name heuristics of the query rewrite."""
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
        if resolution is not None and resolution.match:
            return QueryPlan(
                reasoning=resolution.explain(),
                queries=(raw_query(query, context_type, resolution.folders, intent="query in the conversation's folder"),),
                planner=self.name,
            )
        why_scoped = f"; {resolution.explain()}" if resolution is not None else ""
        names = self.resolve(query, messages)
        if not names:
            why = (
                "no session"
                if session is None
                else "the query names its entity, or the conversation names none"
            )
            return QueryPlan(
                reasoning=f"raw query: {why}{why_scoped}",
                queries=(raw_query(query, context_type, target_uris),),
                planner=self.name,
            )
        rewritten = f"{query} ({', '.join(m.name for m in names)})"
        reasoning = "added " + "; ".join(
            f"{m.name!r} ({m.source}, message {m.seq})" for m in names
        ) + why_scoped
        return QueryPlan(
            reasoning=reasoning,
            queries=(
                raw_query(
                    rewritten,
                    context_type,
                    target_uris,
                    intent="query with the session's entity",
                ),
            ),
            planner=self.name,
        )

    def _scope(
        self, query: str, messages: Sequence[Message], context_type: ContextType | None, target_uris: tuple[str, ...]
    ) -> Resolution | None:
        """The folder the query, else the most recent message, names; None when the caller gave
        targets or no resolver is configured."""
        if self.resolver is None or self.roots is None or target_uris:
            return None
        texts = [(0, query)] + [(m.seq, m.content) for m in reversed(messages)]
        return self.resolver.resolve(texts, self.roots(context_type))

    def resolve(self, query: str, messages: Sequence[Message]) -> list[Mention]:
        """The names to add: none when the query already names an entity (and uses no pronoun);
        else the names of the most recent message that has any, skipping ones in the query."""
        own = mentions(query, 0, self.vocabulary, self.stop)
        if own and not _PRONOUNS.search(query):
            return []
        for msg in reversed(messages):
            found: list[Mention] = []
            for m in mentions(msg.content, msg.seq, self.vocabulary, self.stop):
                if _contains(query, m.name, self.stop) or any(
                    _contains(f.name, m.name, self.stop) for f in found
                ):
                    continue
                found.append(m)
            if found:
                return found[: self.max_names]
        return []
