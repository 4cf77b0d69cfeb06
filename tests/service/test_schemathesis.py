"""Property-based API testing: schemathesis generates requests from /api/openapi.json
(valid and invalid ones), sends them authenticated to the WSGI app, and checks that no
response is a 5xx, and that every response (status, content type, headers, body) is the
one the schema declares."""
from __future__ import annotations

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


@schema.exclude(tag="Gateway").parametrize()
@hsettings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
           suppress_health_check=list(HealthCheck))
def test_generated_requests_get_no_server_error_and_responses_match_the_schema(case, api_schema,
                                                                                django_capture_on_commit_callbacks):
    _generated(case, api_schema, django_capture_on_commit_callbacks)


@schema.include(tag="Gateway").parametrize()
@hsettings(max_examples=GATEWAY_EXAMPLES, deadline=None, database=None, derandomize=True,
           suppress_health_check=list(HealthCheck))
def test_generated_gateway_requests_are_refused_in_the_documented_shape(case, api_schema,
                                                                       django_capture_on_commit_callbacks):
    """The gateway's endpoints, with no upstream configured: whatever the body, the answer is
    a refusal (never a 5xx) in the error shape the document gives (OpenAI's or Anthropic's)."""
    _generated(case, api_schema, django_capture_on_commit_callbacks)


def test_the_generated_run_covered_every_operation_with_at_least_1000_cases():
    operations = {f"{m.upper()} {p}" for p, ops in ninja_api.get_openapi_schema()["paths"].items() for m in ops}
    if set(CALLS) != operations:
        pytest.skip("run the whole module to count the generated cases")
    total = sum(CALLS.values())
    print(f"schemathesis: {total} generated requests over {len(CALLS)} operations")
    assert total >= 1000
