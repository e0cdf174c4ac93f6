"""Shared fixtures. The embedder is loaded once per test session (it is a pure function)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CAIRN_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def embedder():
    from cairn.ports.embeddings.local import LocalEmbedder

    return LocalEmbedder()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small handbook the tests build: two folders, a README, a long chunked file."""
    root = tmp_path / "handbook"
    (root / "billing").mkdir(parents=True)
    (root / "travel").mkdir()
    (root / "billing" / "refunds.md").write_text(
        "# Refunds\n\nCustomers can request a refund within 30 days of purchase. "
        "Refunds are paid back to the original card within five business days.\n"
    )
    (root / "billing" / "invoices.md").write_text(
        "# Invoices\n\nInvoices are emailed on the first day of each month. "
        "You can download past invoices as PDF from the billing page.\n"
    )
    (root / "travel" / "expenses.md").write_text(
        "# Travel expenses\n\nEmployees book flights through the travel portal. "
        "Hotel costs above 200 euros per night need a manager's approval.\n"
    )
    (root / "README.md").write_text("# Company handbook\n\nPolicies for billing, refunds and travel.\n")
    long_sections = "\n\n".join(
        f"## Section {n}\n\n" + " ".join(f"Paragraph about topic {n}, sentence {k}." for k in range(40))
        for n in range(4)
    )
    (root / "travel" / "long-guide.md").write_text("# Long travel guide\n\n" + long_sections)
    return root


def pytest_collection_modifyitems(config, items):
    """The packaged-handler suite (tests/integration/test_packaged.py) runs last: it starts a moto
    server, emulators and a process per function, whose load would slow the tests after it."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/integration/test_packaged.py"))
