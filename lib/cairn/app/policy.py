"""Who may do what: the one place cairn decides, for every operation and every URI.

A URI is **shared** (``cairn://resources/...``, ``cairn://agent/...``), **a user's**
(``cairn://user/{user}/...``: that user's memories and skills), or **above every user**
(``cairn://user`` itself). Sessions belong to the user they were created for.

=============================  =====  ======  ======  ===========================
what                           admin  writer  reader  user (bound to one user)
=============================  =====  ======  ======  ===========================
read shared content            yes    yes     yes     yes
write/delete shared content    yes    yes     no      no
read a user's data             any    no      no      its own only
write/delete a user's data     any    no      no      its own only
sessions, commit               any    no      no      its own only
export / erase a user          any    no      no      its own only
statistics, overview (tenant)  yes    yes     yes     no
=============================  =====  ======  ======  ===========================

"A user's data" is memories, user skills, sessions and use counts. Everything is inside the
caller's tenant: no credential reaches another tenant (the tenant comes from the credential).
:data:`OPERATIONS` names every operation cairn offers with the rule it is checked by; the
authorization-matrix test runs each door's routes and tools against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from cairn.app.principal import Principal, Role
from cairn.core import uri as uris
from cairn.core.errors import Forbidden

Kind = Literal["read", "write", "user", "stats", "me"]


@dataclass(frozen=True)
class Operation:
    name: str
    kind: Kind  # read: URIs are read; write: URIs are written; user: a user's data; stats; me
    summary: str


OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("find", "read", "one query, no session, no planning"),
    Operation("search", "read", "plan (with a session), retrieve hierarchically, rerank"),
    Operation("context", "read", "a prompt-ready block of context within a token budget"),
    Operation("read", "read", "read one URI at level 0, 1 or 2"),
    Operation("tree", "read", "browse a folder"),
    Operation("put_documents", "write", "upsert documents under a root URI"),
    Operation("delete_documents", "write", "delete a document or a subtree"),
    Operation("remember", "user", "add or update one memory of a user"),
    Operation("forget", "user", "delete one memory of a user"),
    Operation("memories", "user", "list a user's memories"),
    Operation("create_session", "user", "start a conversation of a user"),
    Operation("get_session", "user", "a session's summary, recent messages, prefetched context"),
    Operation("delete_session", "user", "delete a session"),
    Operation("append_message", "user", "add a message to a session"),
    Operation("commit", "user", "turn a session's new messages into memories"),
    Operation("sessions", "user", "list a user's sessions"),
    Operation("export_user", "user", "everything cairn holds about a user"),
    Operation("erase_user", "user", "erase everything cairn holds about a user"),
    Operation("stats", "stats", "the tenant's retrieval statistics"),
    Operation("overview", "stats", "what the tenant holds and how much it is asked"),
    Operation("me", "me", "who the credentials are"),
)}


def owner(uri: str) -> str | None:
    """The user a URI belongs to; ``"*"`` for ``cairn://user`` itself (above every user); None: shared."""
    seg = uris.parse(uri).segments
    if seg[0] != "user":
        return None
    return seg[1] if len(seg) >= 2 else "*"


def may_act_for(principal: Principal, user: str | None) -> bool:
    """Whether ``principal`` may read and write ``user``'s data (None: data of no user)."""
    if principal.role is Role.ADMIN:
        return True
    return principal.role is Role.USER and user is not None and user == principal.user


def check_user(principal: Principal, user: str | None, what: str = "act for") -> None:
    """403 unless ``principal`` may act for ``user``."""
    if may_act_for(principal, user):
        return
    if principal.role is Role.USER:
        raise Forbidden(f"these credentials act for user {principal.user!r} only; they cannot {what} user {user!r}")
    who = "no user" if user is None else f"user {user!r}"
    raise Forbidden(f"a {principal.role.value} key reads shared content only; it cannot {what} {who} "
                    "(use an admin key, or that user's key)")


def may_read(principal: Principal, uri: str) -> bool:
    found = owner(uri)
    if found is None:
        return True
    return principal.role is Role.ADMIN or (found != "*" and may_act_for(principal, found))


def may_write(principal: Principal, uri: str) -> bool:
    found = owner(uri)
    if found is None:
        return principal.role in (Role.ADMIN, Role.WRITER)
    return principal.role is Role.ADMIN or (found != "*" and may_act_for(principal, found))


def check_read(principal: Principal, uri: str) -> None:
    """403 unless ``principal`` may read ``uri`` (and everything under it)."""
    if not may_read(principal, uri):
        raise Forbidden(f"{principal.describe()} may not read {uri!r}: {_why(principal, uri)}")


def check_write(principal: Principal, uri: str) -> None:
    """403 unless ``principal`` may write or delete ``uri`` (and everything under it)."""
    if not may_write(principal, uri):
        raise Forbidden(f"{principal.describe()} may not write or delete {uri!r}: {_why(principal, uri, write=True)}")


def check_role(principal: Principal, operation: str) -> None:
    """403 when the operation's kind is closed to the principal's role whatever it names."""
    kind = OPERATIONS[operation].kind
    if kind == "stats" and principal.role is Role.USER:
        raise Forbidden("an end user's key cannot read the tenant's statistics; use an admin, writer or reader key")
    if kind == "user" and principal.role in (Role.WRITER, Role.READER):
        raise Forbidden(f"a {principal.role.value} key cannot {OPERATIONS[operation].summary}: users' data needs "
                        "an admin key or that user's own key")


def _why(principal: Principal, uri: str, write: bool = False) -> str:
    found = owner(uri)
    if found is None:
        return "shared content is written by admin and writer keys only"
    if found == "*":
        return "it holds every user's data; name one user's folder (cairn://user/<user>/...)"
    if principal.role is Role.USER:
        return f"it belongs to user {found!r}; these credentials act for user {principal.user!r} only"
    return f"it belongs to user {found!r}; a {principal.role.value} key reaches shared content only"


# fields of a record that name where it lives; a filter on them must stay inside what the caller reads
_URI_FIELDS = ("uri", "parent_uri", "ancestors")


def check_filter(principal: Principal, flt: dict[str, Any] | None) -> None:
    """403 when a filter names a URI or an owner the principal may not read.

    A filter can only narrow a search (it is ANDed with the roots the caller may see), so this is
    about a clear answer: asking for another user's records is refused, not answered empty."""
    if not flt or principal.role is Role.ADMIN:
        return
    for field, value in _literals(flt):
        if field == "owner" and isinstance(value, str):
            check_user(principal, value, "search the memories of")
        elif field in _URI_FIELDS and isinstance(value, str) and value.startswith(uris.SCHEME):
            try:
                uris.parse(value)
            except Exception:  # a malformed URI matches nothing; the filter validator already spoke
                continue
            check_read(principal, value)


def _literals(node: Any, field: str | None = None) -> Iterator[tuple[str, Any]]:
    """Every (field, literal value) a Mongo-style filter compares against."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.startswith("$"):
                yield from _literals(value, field)
            else:
                yield from _literals(value, key)
    elif isinstance(node, list | tuple):
        for item in node:
            yield from _literals(item, field)
    elif field is not None:
        yield field, node
