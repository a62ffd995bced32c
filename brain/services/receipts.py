"""``Idempotency-Key`` for ``POST /api/v1/thoughts/import``, ``POST /api/v1/memory`` and ``POST
/api/v1/thoughts/{id}/correct``: a request sent again is answered again, not stored twice.

A write whose response is lost (a timeout, a dropped connection, a killed client) leaves the client
unsure whether it was stored. Import items that carry no ``id`` (most Mem0 and hand-written dumps) get
new ids each time, so sending the batch again would store every item twice; a contribution sent again
would be stored again (flagged ``near_duplicate``, but a second thought all the same). A client that sends
``Idempotency-Key: <its own unique string>`` can retry safely:

- The first request with a key runs and, in the same transaction, stores a receipt (the key, a
  fingerprint of the request and the response).
- A request with a key already answered (within ``IMPORT_RECEIPT_HOURS``) gets that response again,
  with ``Idempotent-Replayed: true``; nothing is stored.
- The same key with another request is refused (409 ``IDEMPOTENCY_KEY_REUSED``): a key names one
  request (an import's body, a memory call's or a correction's fields; a key used for one can't be reused
  for another).
- Two requests with one key at the same time: the second waits for the first (the receipt row is
  locked until the first commits) and is then answered from its receipt. A request that fails leaves
  no receipt (its transaction rolls back), so sending it again with the same key runs it.
- A keyed request runs in one transaction, the receipt's, so its writes hold their row locks until it
  commits, and PostgreSQL may fail it as a deadlock's victim (or a serialization failure) when other
  requests lock some of the same rows in another order. Nothing of it happened, receipt included, so it
  is run again from the start, at most ``DEADLOCK_RETRIES`` more times; after that the error goes up and
  the API answers 503 ``DATABASE_CONFLICT`` with ``Retry-After`` (``api.errors``), the key still free.

Keys are per agent (two agents, of one space or two, may use the same key, and each gets its own
answer: one agent's key never replays another's response); an expired receipt is replaced by the next
request with its key, and ``brain.jobs.import_receipts_expire`` removes the rest.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from api.errors import Conflict, ValidationFailed, is_transaction_conflict
from api.parsers import canonical_json
from brain.models import ImportReceipt
from brain.services.pheromones import DEADLOCK_RETRIES
from core.db import RETRACTION_LOCK_NAMESPACE
from core.models import Agent

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_MAX_LENGTH = 255


class KeyReused(Conflict):
    default_code = "IDEMPOTENCY_KEY_REUSED"


def key_clean(value: str | None) -> str | None:
    """The header's value, or None when there is none; 400 when it can't be a key."""
    if value is None:
        return None
    if not value or len(value) > KEY_MAX_LENGTH or not all("!" <= ch <= "~" for ch in value):
        raise ValidationFailed(
            f"{IDEMPOTENCY_HEADER} must be 1 to {KEY_MAX_LENGTH} visible ASCII characters, no spaces (a UUID is "
            "a good key); leave the header out to import without one.",
            extra={"fields": {IDEMPOTENCY_HEADER: [f"1 to {KEY_MAX_LENGTH} visible ASCII characters, no spaces."]}},
        )
    return value


def body_fingerprint(body: bytes, media_type: str) -> str:
    """What must be the same for an import to count as the same batch: its media type and bytes."""
    digest = hashlib.sha256(media_type.split(";")[0].strip().lower().encode())
    digest.update(b"\0")
    digest.update(body)
    return digest.hexdigest()


def fields_fingerprint(operation: str, fields: Any) -> str:
    """What must be the same for a memory call to count as the same request: the operation and its fields
    as parsed (key order and spacing aside), so a client that serialises the same object again matches."""
    return body_fingerprint(f"{operation}\0{canonical_json(fields, default=str)}".encode(), "application/json")


def receipt_hours() -> float:
    return float(getattr(settings, "IMPORT_RECEIPT_HOURS", 24))


def _claim(agent: Agent, key: str, fingerprint: str) -> bool:
    """Insert (or take over an expired) receipt for ``key``; True when this request is to run the
    import. Blocks while another transaction holds an uncommitted receipt for the same key."""
    table = ImportReceipt._meta.db_table
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (space_id, agent_id, key, fingerprint, status_code, response, created_at)
            VALUES (%s, %s, %s, %s, 0, 'null'::jsonb, %s)
            ON CONFLICT (space_id, agent_id, key) DO UPDATE
                SET fingerprint = EXCLUDED.fingerprint, status_code = 0, response = 'null'::jsonb,
                    created_at = EXCLUDED.created_at
                WHERE {table}.created_at < %s
            RETURNING id
            """,  # noqa: S608 - the table name from the model; values are bound
            [agent.space_id, agent.pk, key, fingerprint, now, now - dt.timedelta(hours=receipt_hours())],
        )
        return cursor.fetchone() is not None


def answer_once(
    *, agent: Agent, key: str | None, fingerprint: str, run: Callable[[], tuple[int, dict]]
) -> tuple[int, dict, bool]:
    """(status, body, replayed): ``run()`` once per key, its answer kept; see the module docstring.

    Without a key ``run()`` is simply called. ``run`` returns (status, body) for a success and raises
    an ``ApplicationError`` for a refusal, which rolls the receipt back with the batch. ``run`` may be
    called again after a deadlock (see the module docstring): each call starts from the request as sent.
    Inside a caller's transaction nothing is run again (the failure spoilt that transaction)."""
    if key is None:
        status, body = run()
        return status, body, False
    outer = connection.in_atomic_block
    for attempt in range(DEADLOCK_RETRIES + 1):
        try:
            return _answer_in_one_transaction(agent=agent, key=key, fingerprint=fingerprint, run=run)
        except OperationalError as exc:
            if outer or attempt == DEADLOCK_RETRIES or not is_transaction_conflict(exc):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _answer_in_one_transaction(
    *, agent: Agent, key: str, fingerprint: str, run: Callable[[], tuple[int, dict]]
) -> tuple[int, dict, bool]:
    with transaction.atomic():
        # A retraction of the space (it takes this lock exclusive) waits for the answer to be kept, so a
        # redaction finds it and erases what it quotes; an answer begun after one reads the erased text.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [RETRACTION_LOCK_NAMESPACE, agent.space_id])
        if _claim(agent, key, fingerprint):
            status, body = run()
            ImportReceipt.objects.filter(space_id=agent.space_id, agent=agent, key=key).update(
                status_code=status, response=body
            )
            return status, body, False
        receipt = ImportReceipt.objects.get(space_id=agent.space_id, agent=agent, key=key)
    if receipt.fingerprint != fingerprint:
        raise KeyReused(
            f"{IDEMPOTENCY_HEADER} {key!r} was used at {receipt.created_at:%Y-%m-%d %H:%M:%S} UTC for another "
            f"request; a key names one request. Send a new key with a new request (keys are kept "
            f"{receipt_hours():g} h)."
        )
    return receipt.status_code, receipt.response, True


def receipts_erase(*, space_id, replacements: dict[str, str], about: set[str] | None = None, author_id=None) -> int:
    """Replace each quote (key) of ``replacements`` with its value, longest quote first, in the answers
    kept for the space's keys; how many receipts changed (a retraction with ``redact`` erases a text
    the answers quoted).

    ``about`` (ids of thoughts and suggestions) narrows where: only inside the parts of an answer about
    one of them (an object naming one of those ids, such as a source, a correction or a pending
    suggestion, and a memory answer's sentence quoting its best source when that source is one), and
    anywhere in the answers of the agent ``author_id``. Without it (None) every answer of the space is
    searched. The receipts are found in SQL by the JSON-escaped text of each quote; a receipt a request
    is still running for is locked by it, and this waits for it."""
    if not replacements:
        return 0
    ordered = sorted(replacements.items(), key=lambda pair: len(pair[0]), reverse=True)
    found = Q()
    for quote, _ in ordered:
        found |= Q(raw__contains=json.dumps(quote, ensure_ascii=False)[1:-1])
    rows = ImportReceipt.objects.annotate(raw=Cast("response", TextField())).filter(found, space_id=space_id)
    if about is not None:
        named = Q(agent_id=author_id) if author_id is not None else Q()
        for pk in about:
            named |= Q(raw__contains=pk)
        rows = rows.filter(named) if named else rows.none()
    changed = 0
    for receipt in rows.select_for_update().order_by("pk"):
        whole = about is None or (author_id is not None and receipt.agent_id == author_id)
        erased = _json_replace(receipt.response, ordered, about=about or set(), inside=whole)
        if erased != receipt.response:
            ImportReceipt.objects.filter(pk=receipt.pk).update(response=erased)
            changed += 1
    return changed


def _json_replace(value: Any, ordered: list[tuple[str, str]], *, about: set[str], inside: bool) -> Any:
    """``value`` with the quotes replaced in its strings that are ``inside``, in an object naming an id of
    ``about``, or name one themselves (a guidance sentence quoting that thought)."""
    if isinstance(value, str):
        if inside or any(pk in value for pk in about):  # a sentence naming one (guidance quoting it)
            for quote, replacement in ordered:
                value = value.replace(quote, replacement)
        return value
    if isinstance(value, list):
        return [_json_replace(item, ordered, about=about, inside=inside) for item in value]
    if isinstance(value, dict):
        inside = inside or any(isinstance(item, str) and item in about for item in value.values())
        erased = {key: _json_replace(item, ordered, about=about, inside=inside) for key, item in value.items()}
        sources = value.get("sources")
        if (
            not inside
            and isinstance(erased.get("response"), str)
            and isinstance(sources, list)
            and sources
            and isinstance(sources[0], dict)
            and sources[0].get("thought_id") in about
        ):  # a memory answer's sentence quotes its best source
            erased["response"] = _json_replace(erased["response"], ordered, about=about, inside=True)
        return erased
    return value


def receipts_expire() -> int:
    """Delete the receipts older than ``IMPORT_RECEIPT_HOURS``; how many."""
    cutoff = timezone.now() - dt.timedelta(hours=receipt_hours())
    deleted, _ = ImportReceipt.objects.filter(created_at__lt=cutoff).delete()
    return deleted
