"""The composition root: every setting reaches the service it configures, each provider's settings
reach its client, and a missing optional extra is one clear error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn
from cairn.app import workflow
from cairn.app.services import Services
from cairn.core.config import (
    LiteLLMRerankSettings,
    LiteLLMSettings,
    LocalContentSettings,
    LocalEmbedderSettings,
    LocalRerankSettings,
    LocalStoreSettings,
    OpenAILLMSettings,
    S3ContentSettings,
    Settings,
    SQLiteSessionSettings,
    load_settings,
)
from cairn.core.errors import MissingExtra
from cairn.core.requests import FindRequest
from cairn.engine.ingest import Document
from cairn.ports.ratelimit import Limit

pytestmark = pytest.mark.unit


class RecordingSFN:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def start_sync_execution(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(kw)
        return {"status": "SUCCEEDED", "output": json.dumps({"memories": [], "resources": [], "skills": [], "total": 0})}


def _probes(tmp: Path) -> dict[str, Any]:
    """For each Settings field: a changed value, and what shows that the services used it."""
    sfn = RecordingSFN()

    def arn_used(s: Services) -> bool:
        s.__dict__["sfn"] = sfn
        workflow.search(s, "acme", FindRequest(query="q"))
        return sfn.calls[-1]["stateMachineArn"] == "arn:aws:states:us-east-1:1:stateMachine:x"

    def waits_61_s(s: Services) -> bool:
        from unittest import mock

        with mock.patch.dict("os.environ", {"AWS_DEFAULT_REGION": "us-east-1"}):
            return s.sfn.meta.config.read_timeout == 61.0

    return {
        "home": (tmp / "h", lambda s: s.sessions.path == tmp / "h" / "sessions.db" and s.content.folder == tmp / "h" / "content"),
        "tenant": ("globex", lambda s: Cairn(s).tenant == "globex"),
        "store": (LocalStoreSettings(path=tmp / "st", ann="exact", ann_min_rows=7),
                  lambda s: s.store.path == tmp / "st" and (s.store.ann, s.store.ann_min_rows) == ("exact", 7)),
        "embedder": (LocalEmbedderSettings(batch_size=7), lambda s: s.embedder.batch_size == 7),
        "sessions": (SQLiteSessionSettings(path=tmp / "s.db"), lambda s: s.sessions.path == tmp / "s.db"),
        "content": (LocalContentSettings(path=tmp / "c"), lambda s: s.content.folder == tmp / "c"),
        "llm": (OpenAILLMSettings(model="m", base_url="http://llm.test/v1", api_key="k"),
                lambda s: s.llm is not None and (s.llm.model, s.llm.base_url) == ("m", "http://llm.test/v1")),
        "planner": ("raw", lambda s: s.planner("acme") is None),
        "rerank": (LocalRerankSettings(), lambda s: s.reranker is not None),
        "score_threshold": (0.42, lambda s: Cairn(s).thinking.threshold == 0.42),
        "default_limit": (7, lambda s: Cairn(s)._request("q", {}, "quick")[0].limit == 7),
        "alpha": (0.9, lambda s: Cairn(s).thinking.alpha == 0.9),
        "hotness_weight": (0.25, lambda s: Cairn(s).hotness_weight == 0.25),
        "state_machine_arn": ("arn:aws:states:us-east-1:1:stateMachine:x", arn_used),
        "find_hybrid": (False, lambda s: Cairn(s).with_defaults(FindRequest(query="q"), search=False).hybrid is False),
        "search_hybrid": (True, lambda s: Cairn(s).with_defaults(FindRequest(query="q"), search=True).hybrid is True),
        "planner_min_confidence": (0.9, lambda s: s.planner("acme").resolver.min_confidence == 0.9),
        "planner_stop_words": (("acme",), lambda s: "acme" in s.planner("acme").resolver.names.stop_words),
        "memory_extraction": ("archive", lambda s: s.settings.llm is not None and s.memory("acme").extractor is None),
        "memory_window": (3, lambda s: s.memory("acme").window == 3),
        "memory_hybrid": (False, lambda s: Cairn(s).with_defaults(FindRequest(query="q", context_type="memory"), search=True).hybrid is False),
        "record_use": (False, lambda s: s.recorder is None),
        "fetch_allow_hosts": (("127.0.0.1:9",), lambda s: s.fetch_policy.allows_host("127.0.0.1", 9)),
        "fetch_max_requests": (7, lambda s: s.fetch_policy.max_requests == 7),
        "fetch_max_bytes": (1000, lambda s: s.fetch_policy.max_bytes == 1000),
        "context_budget_tokens": (321, lambda s: s.application.default_budget == 321),
        "language": ("zh", lambda s: s.store.languages.for_tenant("acme") == "zh"),
        "tenant_languages": ({"acme": "ja"}, lambda s: s.store.languages.for_tenant("acme") == "ja"),
        "workflow_timeout_s": (61.0, waits_61_s),
        "rate_limits": ("5/second", lambda s: s.limiter.policy.for_tenant("acme") == (Limit(5, "second"),)),
        "tenant_rate_limits": ({"acme": "2/day"}, lambda s: s.limiter.policy.for_tenant("acme") == (Limit(2, "day"),)),
        "rate_limit_table": ("cairn-limits", lambda s: getattr(s.limiter.counter, "table", None) == "cairn-limits"),
        "use_counts_table": ("cairn-uses", lambda s: getattr(s.recorder.counts, "table", None) == "cairn-uses"),
    }


def test_every_setting_is_consumed(tmp_path, embedder):
    probes = _probes(tmp_path)
    assert set(probes) == set(Settings.model_fields), "a Settings field without a probe: show where it is consumed"
    base = Settings(home=tmp_path / "base")
    llm_base = base.model_copy(update={"llm": OpenAILLMSettings(model="m", base_url="http://llm.test/v1")})
    for field, (value, used) in probes.items():
        given: dict[str, Any] = {} if field in ("embedder", "store") else {"embedder": embedder}
        if field == "store":
            given["embedder"] = embedder
        if field == "embedder":
            services = Services(base.model_copy(update={field: value}))
            assert used(services), field
            continue
        start = llm_base if field == "memory_extraction" else base
        before = Services(start, **given)
        after = Services(start.model_copy(update={field: value}), **given)
        assert used(after), f"{field} did not reach its service"
        if field != "state_machine_arn":
            assert not used(before), f"the probe of {field} passes without the setting"


def test_each_providers_settings_reach_its_client(tmp_path):
    litellm = Services(Settings(home=tmp_path, llm=LiteLLMSettings(model="gpt-x", base_url="http://proxy.test", api_key="sk-1")))
    assert (litellm.llm.api_base, litellm.llm.api_key) == ("http://proxy.test", "sk-1")
    rerank = Services(Settings(home=tmp_path, rerank=LiteLLMRerankSettings(model="cohere/rerank", base_url="http://r.test")))
    assert (rerank.reranker.model, rerank.reranker.api_base) == ("cohere/rerank", "http://r.test")


def test_the_s3_prefix_is_the_same_everywhere():
    from_env = load_settings({"CAIRN_CONTENT_BUCKET": "bodies"})
    assert from_env.content == S3ContentSettings(bucket="bodies", prefix="content")


def test_a_missing_extra_is_one_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if `cairn-context[llm]` were not installed
    services = Services(Settings(home=tmp_path, llm=LiteLLMSettings(model="gpt-x")))
    with pytest.raises(MissingExtra, match=r"pip install 'cairn-context\[llm\]'"):
        services.llm  # noqa: B018


def test_a_tenants_planner_scopes_with_that_tenants_own_folders(tmp_path, embedder):
    services = Services(Settings(home=tmp_path), embedder=embedder)
    acme, globex = services.planner("acme"), services.planner("globex")
    assert acme is services.planner("acme") and acme is not globex
    assert acme.resolver.names.tenant == "acme" and globex.resolver.names.tenant == "globex"


def test_a_home_given_in_python_holds_the_store_as_the_cli_home_does(tmp_path, monkeypatch, embedder):
    """``Settings(home=h)`` keeps the local store in ``h`` (it stayed in ./.cairn/store, so two
    homes shared one index); a store path given on its own is kept."""
    monkeypatch.chdir(tmp_path)
    a, b = Settings(home=tmp_path / "a"), Settings(home=tmp_path / "b")
    root = "cairn://resources/handbook"
    Cairn(Services(a, embedder=embedder), "default").ingestor().ingest(
        [Document(path=("parking.md",), text="# Parking\n\nStaff park in garage B.")], root)
    assert Services(a, embedder=embedder).store.count("default") > 0
    assert Services(b, embedder=embedder).store.count("default") == 0
    assert not (tmp_path / ".cairn").exists()
    assert Settings(home=tmp_path / "c", store=LocalStoreSettings(path=tmp_path / "kept")).store.path == tmp_path / "kept"
