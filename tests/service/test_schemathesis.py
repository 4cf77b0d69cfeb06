"""Property-based API testing: schemathesis generates requests from /api/openapi.json
(valid and invalid ones), sends them authenticated to the WSGI app, and checks that no
response is a 5xx, and that every response (status, content type, headers, body) is the
one the schema declares."""
from __future__ import annotations

import functools

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from dashboard.api import api as ninja_api
from dashboard.services import runs, sessions
from dashboard.services.policies import build_policy, create_policy
from dashboard.services.sessions import convert_payload
from dashboard.wsgi import application
from tests.service.helpers import chat

EXAMPLES_PER_OPERATION = 50
# The gateway's request schemas (nested messages, tools, content parts) cost hypothesis far
# more to generate than the API's, and every request is refused before anything is stored:
# fewer examples keep the module's time (measured in bench/README.md, "schemathesis").
GATEWAY_EXAMPLES = 15
CALLS: dict[str, int] = {}


@pytest.fixture
def api_schema(db, project, django_capture_on_commit_callbacks, settings):
    settings.GATEWAY_API_BASE = ""  # the gateway's requests are all refused: nothing is forwarded anywhere
    # generated tuning grids run inline (eager): small ones run, larger ones get the documented 400
    settings.TUNING_GRID_MAX_REPLAYS = 8
    # Something for the generated ids to find: a session with a finished run, archive
    # entries and a policy.
    with django_capture_on_commit_callbacks(execute=True):
        result = sessions.import_session(project, convert_payload(chat(8)), auto_compact=False)
        runs.request_run(result.session, force=True)
    create_policy(project, "p", build_policy(preset="default"))
    # Requests go straight to the WSGI app inside this test's transaction; like Django's
    # test client, stop the request signals from closing that connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        loaded = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
        # The two security schemes are alternatives and the test always sends one of them,
        # so "missing X-API-Key" is no invalid request here.
        loaded.config.generation.update(with_security_parameters=False)
        loaded.test_key = project.test_key
        yield loaded
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


def _generated(case, api_schema, capture) -> None:
    key = f"{case.operation.method.upper()} {case.operation.path}"
    CALLS[key] = CALLS.get(key, 0) + 1
    with capture(execute=True):
        response = case.call(headers={"Authorization": f"Bearer {api_schema.test_key}"})
    case.validate_response(response, checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                             response_headers_conformance, response_schema_conformance,
                                             negative_data_rejection])


@schema.include(tag="Gateway").parametrize()
@hsettings(max_examples=GATEWAY_EXAMPLES, deadline=None, database=None, derandomize=True,
           suppress_health_check=list(HealthCheck))
def test_generated_gateway_requests_are_refused_in_the_documented_shape(case, api_schema,
                                                                       django_capture_on_commit_callbacks):
    """The gateway's endpoints, with no upstream configured: whatever the body, the answer is
    a refusal (never a 5xx) in the error shape the document gives (OpenAI's or Anthropic's)."""
    _generated(case, api_schema, django_capture_on_commit_callbacks)


# The operations are dealt into parts, each its own test, so that pytest-xdist's workers
# share the generated requests (one test of all of them took minutes of one worker, often at
# the end of the run). Each part's requests are the same from run to run (derandomize).
PARTS = 4


@functools.cache
def _operation_keys() -> list[str]:
    """The operations the parts share: all but the gateway's, which have their own test above."""
    paths = ninja_api.get_openapi_schema()["paths"]
    return [f"{m.upper()} {p}" for p, ops in paths.items() for m, op in ops.items()
            if "Gateway" not in op.get("tags", [])]


def _part_of(key: str) -> int:
    return _operation_keys().index(key) % PARTS


def _key(operation) -> str:
    return f"{operation.method.upper()} {operation.path}"


def _generated_requests_test(part: int):
    def in_part(ctx) -> bool:
        key = _key(ctx.operation)
        return key in _operation_keys() and _part_of(key) == part

    @schema.include(func=in_part).parametrize()
    @hsettings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    @pytest.mark.xdist_group(f"schemathesis-part-{part}")  # with its count check below, on one worker
    def test(case, api_schema, django_capture_on_commit_callbacks):
        _generated(case, api_schema, django_capture_on_commit_callbacks)

    test.__name__ = f"test_generated_requests_get_no_server_error_and_responses_match_the_schema_part{part}"
    return test


def _count_check(part: int):
    @pytest.mark.xdist_group(f"schemathesis-part-{part}")
    def test():
        mine = [k for k in _operation_keys() if _part_of(k) == part]
        if not all(k in CALLS for k in mine):
            pytest.skip(f"run part {part}'s generated requests in this process to count them")
        total = sum(CALLS[k] for k in mine)
        print(f"schemathesis part {part}: {total} generated requests over {len(mine)} operations")
        assert total >= MIN_CASES * len(mine) // len(_operation_keys())

    test.__name__ = f"test_part{part}_covered_each_of_its_operations_with_its_share_of_1000_cases"
    return test


MIN_CASES = 1000  # over every operation; each part must reach its share
for _part in range(PARTS):
    _t = _generated_requests_test(_part)
    globals()[_t.__name__] = _t
    _c = _count_check(_part)
    globals()[_c.__name__] = _c


def test_the_parts_deal_out_every_operation_once():
    keys = _operation_keys()
    assert len(keys) == len(set(keys)) and len(keys) >= 20
    assert sorted(_part_of(k) for k in keys) == sorted(i % PARTS for i in range(len(keys)))
