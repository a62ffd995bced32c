"""``make fuzz-api``: the bigger schemathesis run over the whole agent API.

The same run as tests/test_api_schemathesis.py (see tests/schemathesis_support.py: a live server,
every operation, both generation modes, every check, a fixed seed), with more examples per operation
and mode: ``COLONY_SCHEMATHESIS_EXAMPLES`` (default 60). ``COLONY_SCHEMATHESIS_ONLY`` (a regular
expression over labels such as ``POST /api/v1/memory``) narrows it while debugging. Not a ``test_*``
file: the suite runs the smaller one; run this with ``make fuzz-api`` or
``.venv/bin/pytest tests/fuzz_api_schemathesis.py -s``.
"""

from __future__ import annotations

import os

import pytest

from tests.schemathesis_support import fuzz_api, fuzz_fixture_data, quiet_request_log, start_heartbeat

pytestmark = [pytest.mark.django_db(transaction=True)]

EXAMPLES = int(os.environ.get("COLONY_SCHEMATHESIS_EXAMPLES", "60"))


def test_schemathesis_finds_no_failure(asgi_server, space, thought_factory, capsys, request):
    quiet_request_log(request)
    token = fuzz_fixture_data(space, thought_factory)
    start_heartbeat(request)
    only = os.environ.get("COLONY_SCHEMATHESIS_ONLY") or None
    report = fuzz_api(base_url=asgi_server.url, token=token, examples=EXAMPLES, only=only)
    with capsys.disabled():
        print("\n" + report.summary())
    assert report.cases >= len(report.operations) * 2
    if not only:
        assert set(report.operations) == report.exercised
    assert not report.failures, f"{len(report.failures)} unique schemathesis failures (see the output above)"
