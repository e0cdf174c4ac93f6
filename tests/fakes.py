"""Small hand-written fakes shared by several test modules."""

from __future__ import annotations

from typing import Any

from cairn.core.errors import VectorStoreUnavailable


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


# A three-document handbook, as the documents of an ingest payload or a PUT /v1/documents body
# (the HTTP and MCP tests ingest it under cairn://resources/handbook).
HANDBOOK_DOCS = [
    {"path": "billing/refunds.md", "text": "# Refunds\n\nCustomers can request a refund within 30 days. "
     "Refunds reach the original card within five business days."},
    {"path": "billing/invoices.md", "text": "# Invoices\n\nInvoices are emailed on the first day of each month."},
    {"path": "travel/expenses.md", "text": "# Travel\n\nHotel costs above 200 euros per night need approval.",
     "metadata": {"team": "finance"}},
]
