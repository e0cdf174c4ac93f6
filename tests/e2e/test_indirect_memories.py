"""A remembered fact that bears on a question sharing no word with it, through `cairn serve` as an agent
uses it: keys bound to two end users and an admin key, a fresh home with a household's documents.
"Ann is vegetarian" comes back for "what should I cook tonight?" in Ann's session, never in Bob's, and
not for a question it does not bear on (cairn.engine.retrieval.profile)."""

from __future__ import annotations

import pytest

from cairn.api import ApiKeys
from cairn.api.server import running
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.e2e

ADMIN, ANN, BOB = "house-admin-0123456789abcdef", "house-ann-0123456789abcdef", "house-bob-0123456789abcdef"
VEGETARIAN = "cairn://user/ann/memories/preferences/diet"
DOCS = [
    {"path": "recipes/beef-stew.md", "text": "# Beef stew\nBrown beef chuck, add onions, carrots and red wine, and simmer for three hours."},
    {"path": "recipes/roast-chicken.md", "text": "# Roast chicken\nRub a whole chicken with butter and thyme; roast for ninety minutes."},
    {"path": "recipes/mushroom-risotto.md", "text": "# Mushroom risotto\nToast arborio rice, add stock ladle by ladle, finish with porcini."},
    {"path": "recipes/lentil-curry.md", "text": "# Lentil curry\nSimmer red lentils with coconut milk, tomatoes and ginger; serve with rice."},
    {"path": "recipes/salmon.md", "text": "# Grilled salmon\nGrill salmon fillets with lemon and dill and serve with new potatoes."},
    {"path": "home/oven.md", "text": "# Cleaning the oven\nSpread a baking soda paste inside, leave it overnight, wipe with vinegar."},
    {"path": "home/garden.md", "text": "# Watering the garden\nWater tomatoes in the morning, twice a week in summer, at the roots."},
    {"path": "home/bills.md", "text": "# Paying the bills\nThe electricity bill is paid by direct debit on the first of the month."},
    {"path": "travel/packing.md", "text": "# Packing for a trip\nRoll clothes, keep liquids under 100 ml in a clear bag, bring a charger."},
    {"path": "travel/passport.md", "text": "# Renewing a passport\nApply online six months before it expires, with a recent photo."},
    {"path": "health/sleep.md", "text": "# Sleeping well\nKeep a regular bedtime and a cool room; no screens in the last hour."},
    {"path": "health/running.md", "text": "# Starting to run\nBegin with run-walk intervals three times a week and build up slowly."},
]
COOK = "what should I cook tonight, any dietary needs?"


@pytest.fixture(scope="module")
def house(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("house")
    services = Services(load_settings(env={"CAIRN_HOME": str(home)}), embedder=embedder,
                        store=LocalVectorStore(home / "store", dimension=embedder.dimension),
                        content=LocalContentStore(home / "content"))
    keys = ApiKeys({ADMIN: "house", ANN: {"tenant": "house", "user": "ann"}, BOB: {"tenant": "house", "user": "bob"}})
    with running(services, keys) as url, CairnClient(url, ADMIN, retries=0) as admin:
        assert admin.put_documents("cairn://resources/household", DOCS).documents == len(DOCS)
        with CairnClient(url, ANN, retries=0) as ann:
            assert ann.remember("Ann is vegetarian and never eats meat.", "preferences", key="diet").uri == VEGETARIAN
            ann.remember("Ann works night shifts at the hospital.", "profile", key="work")
            ann.remember("Ann's daughter Mia is four years old.", "profile", key="daughter")
        with CairnClient(url, BOB, retries=0) as bob:
            bob.remember("Bob is training for a marathon in April.", "profile", key="training")
        yield url


def _session_search(url: str, key: str, question: str):
    with CairnClient(url, key, retries=0) as client:
        session = client.create_session()
        return client.search(question, session_id=session.id, limit=5, include_provenance=True)


def test_a_fact_that_bears_on_the_question_comes_back_in_the_users_session(house):
    answer = _session_search(house, ANN, COOK)
    assert VEGETARIAN in [m.uri for m in answer.memories[:3]]
    # the answer says how it was found: a standing fact, not a match of the question's words
    reasons = {m["uri"]: m["reason"] for q in answer.provenance or [] for m in q["matches"]}
    assert reasons[VEGETARIAN] == "standing-fact"


def test_another_users_session_gets_none_of_anns_facts(house):
    answer = _session_search(house, BOB, COOK)
    assert not [m.uri for m in answer.memories if "/user/ann/" in m.uri]
    assert answer.resources  # the recipes still answer the question


def test_a_question_no_fact_bears_on_gets_none_of_them(house):
    answer = _session_search(house, ANN, "how do I renew my passport?")
    assert answer.resources[0].uri.endswith("passport.md")
    assert not answer.memories


def test_a_request_for_resources_only_gets_no_fact(house):
    with CairnClient(house, ANN, retries=0) as ann:
        session = ann.create_session()
        answer = ann.search(COOK, session_id=session.id, limit=5, context_type="resource")
    assert answer.resources and not answer.memories
