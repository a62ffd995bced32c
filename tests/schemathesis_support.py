"""Schemathesis over the whole agent API against Colony's production server, shared by
tests/test_api_schemathesis.py (the suite's run) and tests/fuzz_api_schemathesis.py (``make fuzz-api``,
the bigger one).

Every operation of ``/api/schema/`` is fuzzed in both generation modes (positive: schema-valid data
must be accepted; negative: schema-violating data must be refused) with every check schemathesis
registers (status codes, content types, response schemas and headers, positive data accepted,
negative data rejected, missing required header, unsupported methods and the Allow header, ignored
auth, use after free, resource availability, object-level authorization), a fixed seed and
``examples`` examples per operation and mode. Authentication is configured as the schema's
``agentToken`` bearer scheme (schemathesis' OpenAPI-aware auth), so its own auth probes and negative
header cases stay meaningful. Nothing is excluded: no check, no operation.

One restriction on generation, written down here: the memory endpoint's cross-field rules (a categorized
contribution carries its category's fields, 400 MISSING_CATEGORY_FIELDS; ``refines`` and
``consolidates`` exclude each other and a correction, ``supersedes`` on a thought that is not a
correction excludes both, and ``contribute: false`` excludes every write, 400 MUTUAL_EXCLUSION) can't be
written in OpenAPI 3.0 for query parameters, and only clumsily for a body. The schema documents them in
the operation's 400 response; in positive mode the generated cases that break one of them are discarded
(``hypothesis.assume``), as a client that read the description would not send them. So are memory cases
whose ``temporal_scope`` is after today (400 ``VALIDATION_ERROR``; OpenAPI has no "not after today").
Negative mode keeps every case. The refusals themselves are tested in tests/test_brain_memory_api.py.
The same holds for the import's rules across items and the space (an ``id`` appears once in a batch, a
reference names a thought of the batch or the space,
``agent``/``contributor_id``/``contributor_name``/``accessed_by`` are the caller's own name and dates no
later than now, a ``retracted`` flag only on a superseded item and a retraction record only with the
flag: 400 ``IMPORT_INVALID``): positive import cases that reference other thoughts, repeat an id, name
another agent, date a thought in the future or are retracted but live are discarded
(tests/security/test_import_forgery.py and test_retraction_holds.py test the refusals). Likewise an
``Idempotency-Key`` names one request (409 ``IDEMPOTENCY_KEY_REUSED`` for another batch, memory call
or correction with the key, documented in the operations' 409 responses): positive import, memory and
correction cases that send a key already sent with another request are discarded
(tests/test_brain_import_idempotency.py and
tests/test_brain_memory_idempotency.py test the refusal). And a list's ``cursor`` is the ``next_cursor``
of an earlier page: the schema gives its alphabet, not which strings of it a list gave, so positive list
cases that send one are discarded (400 for any other; tests/test_brain_list_retract.py,
tests/test_tasks_api.py and tests/security/test_lists_bounded.py test both).

And one generator limit: free-form values (task DNA, tool calls, import metadata) are the recursive
``JsonValue`` component, "no NUL at any depth". Schemathesis stops following a recursive reference
after a few levels and then generates any JSON there, NUL included, which the API refuses (400) as the
schema says it does. Positive cases holding a NUL are therefore discarded too; negative mode keeps them.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field

SEED = 20261123


def memory_rules_hold(data) -> bool:
    """Whether memory input ``data`` (a body or a query) satisfies the cross-field rules of step_validate."""
    from brain.services.categories import STRUCTURED_FIELDS, category_missing_fields

    if not isinstance(data, dict):
        return True
    if _in_the_future(data.get("temporal_scope")):
        return False
    category = data.get("thought_category") or None
    try:
        if category_missing_fields(category=category, fields={name: data.get(name) for name in STRUCTURED_FIELDS}):
            return False
    except Exception:  # an unknown category: the serializer refuses it, the schema says so
        return True
    given = {name for name in ("refines", "consolidates") if data.get(name) not in (None, "", [])}
    if len(given) > 1 or (given and category == "correction"):
        return False
    if given and data.get("supersedes") not in (None, "", []):  # read as refines/consolidates: one of them
        return False
    writes = [name for name in ("refines", "consolidates", "supersedes", "thought_category") if data.get(name)]
    if data.get("store") in (True, "true"):
        writes.append("store")
    return not (writes and (data.get("contribute") in (False, "false") or data.get("store") in (False, "false")))


FUZZ_AGENT = "fuzzer"
IMPORT_IDENTITY = ("agent", "contributor_id", "contributor_name")
IMPORT_DATES = ("created_at", "last_accessed", "superseded_at", "temporal_scope")
IMPORT_REFERENCES = ("source_ids", "supersedes", "refined_by", "superseded_by", "contradicted_by", "related_thoughts")


def import_rules_hold(items) -> bool:
    """Whether an import batch references no other thought, repeats no id, names no other agent and
    dates nothing in the future (see the module docstring)."""
    if not isinstance(items, list):
        return True
    items = [item for item in items if isinstance(item, dict)]
    ids = [item.get("id") for item in items if item.get("id")]
    if len(ids) != len(set(ids)):
        return False
    if any(item.get(name) not in (None, "", FUZZ_AGENT) for item in items for name in IMPORT_IDENTITY):
        return False
    if any(item.get("accessed_by") not in (None, [], [FUZZ_AGENT]) for item in items):
        return False
    if any(_in_the_future(item.get(name)) for item in items for name in IMPORT_DATES):
        return False
    if any(_retracted_but_live(item) for item in items):
        return False
    return not any(any(item.get(name) for name in IMPORT_REFERENCES) for item in items)


def _retracted_but_live(item: dict) -> bool:
    """A ``retracted`` flag on an item that is not superseded, or a retraction record without the flag."""
    flags = item.get("quality_flags") or []
    retracted = isinstance(flags, list) and "retracted" in flags
    metadata = item.get("context_metadata")
    recorded = isinstance(metadata, dict) and "retraction" in metadata
    return (retracted and not item.get("superseded")) or (recorded and not retracted)


def _in_the_future(value) -> bool:
    import datetime as dt

    if not isinstance(value, str) or not value:
        return False
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        return parsed.astimezone(dt.UTC) > dt.datetime.now(dt.UTC)
    except OverflowError:
        return True


#: Idempotency-Key -> the first request sent with it, in this process's runs (see the module docstring).
_KEYS: dict[str, str] = {}


def key_names_one_request(case) -> bool:
    """Whether the case's Idempotency-Key (if any) was not sent before with another request (an import's
    body, a memory call's fields: keys are shared by both operations)."""
    key = (case.headers or {}).get("Idempotency-Key")
    if key is None:
        return True
    sent = f"{case.operation.label} {case.path_parameters} {case.media_type} "
    sent += json.dumps(case.body, default=str, sort_keys=True)
    return _KEYS.setdefault(key, sent) == sent


#: Cross-field rules OpenAPI 3.0 can't state, per operation (see the module docstring).
CROSS_FIELD_RULES = {
    "GET /api/v1/thoughts": lambda case: not (case.query or {}).get("cursor"),
    "GET /api/v1/tasks": lambda case: not (case.query or {}).get("cursor"),
    "GET /api/v1/projects": lambda case: not (case.query or {}).get("cursor"),
    "GET /api/v1/agents/{role}/in-flight": lambda case: not (case.query or {}).get("cursor"),
    "GET /api/v1/corrections": lambda case: not (case.query or {}).get("cursor"),
    "POST /api/v1/memory": lambda case: memory_rules_hold(case.body) and key_names_one_request(case),
    "GET /api/v1/memory": lambda case: memory_rules_hold(case.query),
    "POST /api/v1/thoughts/import": lambda case: import_rules_hold(case.body) and key_names_one_request(case),
    "POST /api/v1/thoughts/{thought_id}/correct": key_names_one_request,
}


def holds_no_nul(case) -> bool:
    from api.parsers import unstorable_paths

    return not unstorable_paths(case.body) if isinstance(case.body, (dict, list)) else True


@dataclass
class FuzzReport:
    operations: list[str] = field(default_factory=list)
    exercised: set[str] = field(default_factory=set)
    cases: int = 0
    failures: dict[tuple[str, str], str] = field(default_factory=dict)
    failing_cases: int = 0
    unsatisfiable: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [
            f"schemathesis: {len(self.operations)} operations ({len(self.exercised)} exercised), {self.cases} cases, "
            f"{len(self.checks)} checks, {len(self.failures)} unique failures in {self.failing_cases} cases, "
            f"{self.seconds:.1f} s (no negative case possible: {', '.join(self.unsatisfiable) or 'none'})"
        ]
        for (label, kinds), detail in sorted(self.failures.items()):
            lines.append(f"--- {label}: {kinds}\n{detail}\n")
        return "\n".join(lines)


def fuzz_fixture_data(space, thought_factory):
    """An agent token and something to find: a thought, a project with a task, so that some generated
    ids and slugs resolve. Returns the raw token."""
    from core import services
    from tests.tasks_helpers import make_project, make_task

    _agent, token = services.agent_create(name=FUZZ_AGENT, role="dev", space=space)
    thought_factory("The deploy pipeline runs database migrations before it restarts the web workers.")
    make_task(make_project(space, slug="colony"), slug="t1", status="ready", role="dev", dna={"a": 1})
    return token


def start_heartbeat(request) -> None:
    """``/health`` answers 503 without a live worker heartbeat; the 5xx check would count that as a
    server error, so a thread beats like a worker would (a real worker's beat is tested in
    tests/integration)."""
    from django.utils import timezone

    from core import services

    stop = threading.Event()

    def beat():
        from django.db import connection

        started = timezone.now()
        while not stop.is_set():
            services.worker_heartbeat(hostname="schemathesis@test", pid=os.getpid(), started_at=started)
            stop.wait(5)
        connection.close()

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    request.addfinalizer(lambda: (stop.set(), beater.join(10)))


def quiet_request_log(request) -> None:
    """Thousands of expected 4xx would each log a warning; only errors are kept."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    request.addfinalizer(lambda: logger.setLevel(level))


#: A URL over 65,535 bytes is refused before Colony reads it (414 ``URL_TOO_LONG``, runtime.http_protocol).
#: OpenAPI can't bound a URL's length, and query strings within their ``maxLength`` can exceed it (10,000
#: characters of four UTF-8 bytes are 120 KB percent-encoded), so 414 is an expected answer to any case.
URL_LIMIT_STATUS = "414"


def open_schema(*, base_url: str, token: str):
    """Colony's schema as schemathesis reads it from the server at ``base_url``, authenticated as
    ``token``, and every check schemathesis registers."""
    import schemathesis
    from schemathesis.checks import CHECKS, load_all_checks
    from schemathesis.config import SchemathesisConfig
    from schemathesis.config._checks import (
        NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES,
        POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES,
    )

    load_all_checks()
    config = SchemathesisConfig.from_dict(
        {
            "auth": {"openapi": {"agentToken": {"bearer": token}}},
            "checks": {
                "negative_data_rejection": {
                    "expected-statuses": [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, URL_LIMIT_STATUS]
                },
                "positive_data_acceptance": {
                    "expected-statuses": [*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, URL_LIMIT_STATUS]
                },
            },
        }
    )
    schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json", config=config)
    return schema, list(CHECKS.get_all())


def fuzz_api(*, base_url: str, token: str, examples: int, only: str | None = None) -> FuzzReport:
    """Run schemathesis over every operation of the live server at ``base_url``; never raises on a
    failure, records it (one report per operation, mode and kind of failure; no shrinking)."""
    import re

    import requests
    from hypothesis import HealthCheck, Phase, assume, given, seed, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    schema, checks = open_schema(base_url=base_url, token=token)
    session = requests.Session()
    report = FuzzReport(checks=[check.__name__ for check in checks])
    started = time.perf_counter()

    def fuzz(operation, mode) -> None:
        @seed(SEED)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case):
            rule = CROSS_FIELD_RULES.get(operation.label)
            if mode == GenerationMode.POSITIVE:
                assume(holds_no_nul(case) and (rule is None or rule(case)))
            report.cases += 1
            report.exercised.add(operation.label)
            try:
                case.call_and_validate(base_url=base_url, session=session, checks=checks, timeout=60)
            except (Exception, BaseExceptionGroup) as exc:  # recorded, not raised: one per kind, no shrinking
                report.failing_cases += 1
                kinds = [getattr(f, "title", type(f).__name__) for f in getattr(exc, "exceptions", [exc])]
                key = (f"{operation.label} [{mode.value}]", " + ".join(sorted(set(kinds))))
                if key not in report.failures:
                    report.failures[key] = f"{str(exc)[:2500]}\n{case.as_curl_command()}"

        try:
            run()
        except Unsatisfiable:
            # No input of this operation can be made invalid (GET /health takes no input at all).
            report.unsatisfiable.append(f"{operation.label} [{mode.value}]")

    for result in schema.get_all_operations():
        operation = result.ok()
        if only and not re.search(only, operation.label):
            continue
        report.operations.append(operation.label)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode)
    report.seconds = time.perf_counter() - started
    return report
