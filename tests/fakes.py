"""Small hand-written fakes shared by several test modules."""

from __future__ import annotations

from typing import Any

from cairn.errors import VectorStoreUnavailable


class UnavailableStore:
    """Wraps a real store; every query fails as a throttled backend would, the rest passes through."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        if name.startswith("query"):
            def fail(*a: Any, **kw: Any) -> Any:
                raise VectorStoreUnavailable("local: throttled; retry")

            return fail
        return getattr(self.real, name)
