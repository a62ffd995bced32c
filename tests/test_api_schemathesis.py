"""The OpenAPI schema tells the truth: schemathesis against Colony's production server (uvicorn, the ASGI app).

Every operation of ``/api/schema/``, positive and negative data, every check schemathesis has, a fixed
seed (see tests/schemathesis_support.py for what is generated and the two documented restrictions on
generation). It asserts zero failures and that every operation of the schema was exercised, and prints
the number of cases. ``EXAMPLES`` per operation and mode keeps this under about a minute and a half in
CI; ``make fuzz-api`` runs the same with many more examples.
"""

from __future__ import annotations

import os

import pytest

from tests.schemathesis_support import fuzz_api, fuzz_fixture_data, quiet_request_log, start_heartbeat

pytestmark = [pytest.mark.django_db(transaction=True)]

EXAMPLES = 10


def test_schemathesis_finds_no_failure_in_any_operation(asgi_server, space, thought_factory, capsys, request):
    quiet_request_log(request)
    token = fuzz_fixture_data(space, thought_factory)
    start_heartbeat(request)
    report = fuzz_api(
        base_url=asgi_server.url,
        token=token,
        examples=int(os.environ.get("COLONY_SCHEMATHESIS_EXAMPLES", EXAMPLES)),
    )
    with capsys.disabled():
        print("\n" + report.summary())
    assert len(report.operations) >= 25
    assert report.exercised == set(report.operations), "operations of the schema never exercised"
    assert len(report.checks) >= 14  # every check schemathesis registers, none excluded
    assert report.unsatisfiable == ["GET /api/v1/health [negative]"]  # takes no input at all
    assert not report.failures, f"{len(report.failures)} unique schemathesis failures (see the output above)"


def test_the_schema_generates_without_warnings(tmp_path):
    """A warning means an ambiguous schema (e.g. two components with one name: one of them is wrong)."""
    from django.core.management import call_command

    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(tmp_path / "schema.yaml"))
