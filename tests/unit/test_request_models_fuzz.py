"""Every request model, given any JSON value: a model or a RequestError naming the problem, never
another exception (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.api.models import DocumentsPut, FindBody, MemoryPut, MessageAppend, SearchBody, SessionCreate
from cairn.core.errors import RequestError
from cairn.core.requests import FindRequest, parse_request

pytestmark = pytest.mark.unit

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                           max_leaves=20)
FIELDS = ("query", "limit", "mode", "filter", "context_type", "target_uris", "user", "hybrid", "score_threshold",
          "session_id", "role", "content", "root_uri", "documents", "text", "category", "metadata", "ttl_s", "tenant")
bodies = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6) | json_values


@pytest.mark.parametrize("model", [FindRequest, FindBody, SearchBody, SessionCreate, MessageAppend, DocumentsPut, MemoryPut])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=bodies)
def test_any_body_is_a_model_or_a_request_error(model, data):
    try:
        parsed = parse_request(model, data) if isinstance(data, dict) else None
    except RequestError as exc:
        assert exc.message.startswith("invalid request: ") and exc.details
        return
    if parsed is not None:
        assert isinstance(parsed, model)
