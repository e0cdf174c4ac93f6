"""Episodic memories: what the user said, archived as it was said (no model needed).

A memory of a user is what the user said: only ``user`` turns become episodes. An assistant's
reply is not something known about the user ("I don't know." is no memory of anyone), so the
assistant turns next to a user turn are kept only as that episode's *context*: the reply before
it (what a "yes" answers) and the reply after it, each at most ``CONTEXT_CHARS`` characters, on
lines marked ``(context)``; the episode cites the user's messages only.

Turns are grouped in windows of ``window`` consecutive messages aligned on their seqs (seqs
1..w, w+1..2w, ...), so a window's URI depends only on the session and its first seq: committing
again rewrites the same records, and a window left half full by one commit is completed in place
by the next. Each episode cites its messages (``seqs``), names its speakers and the date they
spoke, and its text keeps one ``[date] speaker: words`` line per turn, so a later search matches
the words, the speaker and the date.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from cairn.engine.memory.models import EPISODES, MemoryItem, MemoryKind, cite
from cairn.ports.sessions.base import Message

ARCHIVED_ROLES = ("user",)
CONTEXT_ROLES = ("assistant",)
CONTEXT_CHARS = 300


def format_date(ts: float) -> str:
    """``8 May 2023, 13:56`` (UTC): what a turn's line and an episode's metadata carry."""
    t = time.gmtime(ts)
    return f"{t.tm_mday} {time.strftime('%B %Y, %H:%M', t)}"


def speaker_of(m: Message) -> str:
    return m.name or m.role


def turn_line(m: Message) -> str:
    return f"[{format_date(m.created_at)}] {speaker_of(m)}: {' '.join(m.content.split())}"


CONTEXT_MARK = "(context) "


def asks_only(text: str) -> bool:
    """Whether an episode's ``text`` holds user lines that are all questions (end with a question
    mark, any script's: ``?``, ``？``): the user asked and told nothing. Context lines do not count."""
    said = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not ln.startswith(CONTEXT_MARK)]
    return bool(said) and all(ln.endswith(("?", "？", "؟")) for ln in said)


def context_line(m: Message) -> str:
    words = " ".join(m.content.split())
    if len(words) > CONTEXT_CHARS:
        words = words[: CONTEXT_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return f"{CONTEXT_MARK}{speaker_of(m)}: {words}"


def _with_context(turns: list[Message], by_seq: dict[int, Message]) -> list[str]:
    """The user's lines, each with the assistant replies just before and after it as context."""
    lines: list[str] = []
    said = {m.seq for m in turns}
    for m in turns:
        before = by_seq.get(m.seq - 1)
        if before is not None and before.role in CONTEXT_ROLES and context_line(before) not in lines:
            lines.append(context_line(before))
        lines.append(turn_line(m))
        after = by_seq.get(m.seq + 1)
        if after is not None and after.role in CONTEXT_ROLES and after.seq not in said:
            lines.append(context_line(after))
    return lines


def window_start(seq: int, window: int) -> int:
    """The first seq of the window holding ``seq``."""
    return ((seq - 1) // window) * window + 1


def episode_key(session_id: str, first_seq: int) -> str:
    return f"{session_id}-{first_seq:06d}"


def episodes(user: str, session_id: str, messages: Sequence[Message], window: int = 1, since: int = 1) -> list[MemoryItem]:
    """One episodic memory per window of ``window`` seqs from the window of seq ``since`` on that
    holds at least one user turn (earlier messages are read as context only)."""
    if window < 1:
        raise ValueError(f"window={window}: an episode holds at least one turn")
    by_seq = {m.seq: m for m in messages}
    groups: dict[int, list[Message]] = {}
    for m in messages:
        if m.role in ARCHIVED_ROLES and m.content.strip() and m.seq >= window_start(since, window):
            groups.setdefault(window_start(m.seq, window), []).append(m)
    out = []
    for first, turns in sorted(groups.items()):
        speakers = list(dict.fromkeys(speaker_of(m) for m in turns))
        context = [s for m in turns for s in (m.seq - 1, m.seq + 1) if s in by_seq and by_seq[s].role in CONTEXT_ROLES]
        out.append(
            MemoryItem(
                user=user,
                category=EPISODES,
                key=episode_key(session_id, first),
                text="\n".join(_with_context(turns, by_seq)),
                kind=MemoryKind.EPISODE,
                said_at=turns[0].created_at,
                metadata={
                    "cites": [cite(session_id, m.seq) for m in turns],
                    "session_id": session_id,
                    "seqs": [str(m.seq) for m in turns],
                    "context_seqs": [str(s) for s in sorted(set(context))],
                    "speakers": speakers,
                    "date": format_date(turns[0].created_at),
                },
            )
        )
    return out
