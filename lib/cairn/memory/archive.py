"""Episodic memories: a conversation's turns archived as they were said (no model needed).

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

from ..sessions.base import Message
from .models import EPISODES, MemoryItem, MemoryKind, cite

ARCHIVED_ROLES = ("user", "assistant")


def format_date(ts: float) -> str:
    """``8 May 2023, 13:56`` (UTC): what a turn's line and an episode's metadata carry."""
    t = time.gmtime(ts)
    return f"{t.tm_mday} {time.strftime('%B %Y, %H:%M', t)}"


def speaker_of(m: Message) -> str:
    return m.name or m.role


def turn_line(m: Message) -> str:
    return f"[{format_date(m.created_at)}] {speaker_of(m)}: {' '.join(m.content.split())}"


def window_start(seq: int, window: int) -> int:
    """The first seq of the window holding ``seq``."""
    return ((seq - 1) // window) * window + 1


def episode_key(session_id: str, first_seq: int) -> str:
    return f"{session_id}-{first_seq:06d}"


def episodes(user: str, session_id: str, messages: Sequence[Message], window: int = 1) -> list[MemoryItem]:
    """One episodic memory per window of ``window`` seqs that holds at least one archived turn."""
    if window < 1:
        raise ValueError(f"window={window}: an episode holds at least one turn")
    groups: dict[int, list[Message]] = {}
    for m in messages:
        if m.role in ARCHIVED_ROLES:
            groups.setdefault(window_start(m.seq, window), []).append(m)
    out = []
    for first, turns in sorted(groups.items()):
        speakers = list(dict.fromkeys(speaker_of(m) for m in turns))
        out.append(
            MemoryItem(
                user=user,
                category=EPISODES,
                key=episode_key(session_id, first),
                text="\n".join(turn_line(m) for m in turns),
                kind=MemoryKind.EPISODE,
                said_at=turns[0].created_at,
                metadata={
                    "cites": [cite(session_id, m.seq) for m in turns],
                    "session_id": session_id,
                    "seqs": [str(m.seq) for m in turns],
                    "speakers": speakers,
                    "date": format_date(turns[0].created_at),
                },
            )
        )
    return out
