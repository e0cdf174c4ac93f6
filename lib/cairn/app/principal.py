"""Who is calling: a principal is a tenant, an optional end user, and a role.

Every door resolves its caller's credentials to one :class:`Principal` (an API key of ``cairn
serve``, an authorizer's claims on AWS, the flags of ``cairn mcp`` / the CLI, the host application
that builds a :class:`~cairn.Cairn`), and the application layer decides with it alone.

The roles (what each may do is the table in :mod:`cairn.app.policy`, and SECURITY.md):

* ``admin``  — everything in the tenant, for any end user (a tenant's back end);
* ``writer`` — read and write the shared content (resources and agent skills);
* ``reader`` — read the shared content;
* ``user``   — an end user: read the shared content, read and write only its own memories,
  skills and sessions. A principal with this role always names its user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from cairn.core.errors import ConfigError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")


class Role(StrEnum):
    ADMIN = "admin"
    WRITER = "writer"
    READER = "reader"
    USER = "user"


ROLES = tuple(r.value for r in Role)


@dataclass(frozen=True)
class Principal:
    """A tenant, an optional end user, and a role; ``user`` is set exactly when ``role`` is user."""

    tenant: str
    user: str | None = None
    role: Role = Role.ADMIN

    def __post_init__(self) -> None:
        if not isinstance(self.tenant, str) or not NAME.match(self.tenant):
            raise ConfigError(f"tenant {self.tenant!r} is not a name of letters, digits, _ . @ - (1-128 characters)")
        if self.user is not None and (not isinstance(self.user, str) or not NAME.match(self.user)):
            raise ConfigError(f"user {self.user!r} is not a name of letters, digits, _ . @ - (1-128 characters)")
        role = Role(self.role) if self.role in ROLES else None
        if role is None:
            raise ConfigError(f"role {self.role!r} is not one of {', '.join(ROLES)}")
        object.__setattr__(self, "role", role)
        if (role is Role.USER) != (self.user is not None):
            raise ConfigError("a principal names a user exactly when its role is 'user' (an end user's credentials)")

    @classmethod
    def of(cls, tenant: str, user: str | None = None, role: str | None = None) -> Principal:
        """From a credential's fields: no role means ``user`` when a user is named, else ``admin``."""
        chosen = role or (Role.USER if user else Role.ADMIN)
        return cls(tenant, user if chosen == Role.USER else None, Role(chosen) if chosen in ROLES else chosen)  # type: ignore[arg-type]

    @property
    def bound(self) -> bool:
        """Bound to one end user (the ``user`` role)."""
        return self.role is Role.USER

    def describe(self) -> str:
        return f"{self.role.value} of tenant {self.tenant!r}" + (f" for user {self.user!r}" if self.user else "")
