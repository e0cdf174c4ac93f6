"""The sample handbook (examples/handbook) as one tenant, for the framework adapters' tests: ingested
once into a composition root that both doors use, the in-process `Cairn` and `cairn serve`'s app,
with a fact remembered for the end user ann.

The questions are a user's paraphrases, each with the page that answers it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cairn import Cairn
from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore

REPO = Path(__file__).resolve().parents[1]
HANDBOOK = REPO / "examples" / "handbook"
ROOT = "cairn://resources/handbook"
TENANT = "acme"
ADMIN_KEY = "handbook-admin-key-0123456789"
ANN_KEY = "handbook-ann-key-0123456789ab"
QUESTIONS = [
    ("how long until the money for a returned item is back on my card?", "billing/refunds.md"),
    ("who approves a refund of a Stripe payment?", "billing/payment-providers.md"),
    ("how many days a year may I work from another country?", "people/remote-work.html"),
    ("what do I do when I lose my laptop?", "security/access-and-incidents.pdf"),
    ("can unused holiday days be carried over into the next year?", "people/leave.md"),
]
# remembered for ann before her conversation starts; her session's question is about it
ANN_FACT = "Ann paid for her tent with PayPal."
ANN_QUESTION = "how do I get my money back for the way I paid?"


DOORS = ("http", "in_process")


@dataclass(frozen=True)
class HandbookTenant:
    services: Services
    url: str  # `cairn serve`'s app over the same services, keys ADMIN_KEY and ANN_KEY (bound to ann)

    def in_process(self) -> Cairn:
        return Cairn(self.services, TENANT)

    @contextmanager
    def door(self, door: str, user: str | None = None) -> Iterator[Cairn | CairnClient]:
        """The tenant's admin (or the end user ann, ``user="ann"``) through one door: `cairn serve`
        with CairnClient and the admin's or ann's key, or Cairn in process (her view)."""
        if door == "in_process":
            yield self.in_process().as_user(user) if user else self.in_process()
            return
        with CairnClient(self.url, ANN_KEY if user == "ann" else ADMIN_KEY, retries=0) as client:
            yield client


def page_of(uri: str) -> str:
    """The handbook page a match's URI is in (its chunk and the handbook's root dropped)."""
    return uri.split("#")[0].removeprefix(ROOT + "/")


@contextmanager
def handbook_tenant(home: Path, embedder) -> Iterator[HandbookTenant]:
    """The handbook ingested, ann's fact remembered, and `cairn serve`'s app running over it."""
    services = Services(load_settings(env={"CAIRN_HOME": str(home), "CAIRN_RECORD_USE": "false"}), embedder=embedder,
                        store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    cairn = Cairn(services, TENANT)
    report = cairn.ingest(HANDBOOK, ROOT)
    assert report.documents == 8 and not report.rejected, report
    cairn.remember(ANN_FACT, "profile", user="ann", key="payment")
    keys = ApiKeys({ADMIN_KEY: TENANT, ANN_KEY: {"tenant": TENANT, "user": "ann", "role": "user"}})
    with running(services, keys) as url:
        yield HandbookTenant(services, url)
