"""Database helpers shared by the hot request paths."""

from __future__ import annotations

import struct
from typing import NamedTuple

import psycopg
from django.db import connection


class _Executed(NamedTuple):
    """Stands in for psycopg's record of the last query, which it keeps only for unprepared
    executions: Django's query log and CaptureQueriesContext read ``cursor._query.query``."""

    query: bytes


class _JsonbAsText(psycopg.adapt.Loader):
    """jsonb in a BINARY result, loaded as its text: what Django's text-format loader for jsonb gives
    (``JSONField.from_db_value`` parses it), so a statement read in binary needs no other handling."""

    format = psycopg.pq.Format.BINARY

    def load(self, data):
        if data and data[0] != 1:
            raise psycopg.DataError(f"unknown jsonb binary format: {data[0]}")
        return bytes(data[1:]).decode()


class _PreparedCursor(psycopg.Cursor):
    """psycopg's server-side-binding cursor, preparing every statement it runs. ``binary_results``:
    the result format of the statements it runs through Django's wrapper (which passes no format)."""

    binary_results: bool | None = None

    def execute(self, query, params=None, *, prepare=None, binary=None):
        binary = self.binary_results if binary is None else binary
        result = super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)
        if self._query is None:  # it ran prepared
            self._query = _Executed(query.encode() if isinstance(query, str) else bytes(query))
        return result


# --- pg_advisory_xact_lock(namespace, key) namespaces: one each, so two kinds of lock never share a key.
#: A day's quality rollup (key: the day's ordinal; quality.services.rollups).
ROLLUP_LOCK_NAMESPACE = 4_200_001
#: A contribution of one text to one space (key: a hash of the space and the text's key; brain.services.thoughts).
KNOWN_LOCK_NAMESPACE = 4_200_002
#: The retractions of a space, one at a time (key: the space's id; brain.services.retraction).
RETRACTION_LOCK_NAMESPACE = 4_200_003
#: Corrections of a space (exclusive) against the contributions storing into it (shared), so that
#: every contribution either sees a correction's corrected fact or is seen by it (key: the space's id;
#: brain.services.corrections).
CORRECTION_LOCK_NAMESPACE = 4_200_004


def is_deadlock(exc: BaseException) -> bool:
    """Whether Django's ``exc`` is PostgreSQL failing this transaction as a deadlock's victim: nothing of
    it happened, and running it again is safe (outside a caller's transaction, which it spoils)."""
    return isinstance(exc.__cause__, psycopg.errors.DeadlockDetected)


def prepared_cursor():
    """A Django cursor whose parameters the SERVER binds and whose statements are prepared on the
    connection (pooled or persistent), so each statement shape is parsed and planned once, not per
    call. (Django's default client-side binding pastes every value, e.g. a 384-float vector, into the
    statement's text each time, and the server plans it anew.) Django's wrapper is kept: query
    logging, CaptureQueriesContext and execute wrappers see these statements like any other.

    Use it for fixed statement texts run on every request; a text that varies per call would fill
    the connection's prepared-statement cache for nothing. With DATABASE_PREPARED_STATEMENTS=false
    (config/settings.py) nothing is prepared and the server still binds the parameters."""
    connection.ensure_connection()
    return connection._prepare_cursor(_PreparedCursor(connection.connection))


def asynchronous_commit(sql: str) -> str:
    """``sql``, a statement ending in its select list, that also turns ``synchronous_commit`` off until
    its transaction ends: run in a transaction of its own (autocommit), its commit doesn't wait for its
    WAL to reach the disk. For bookkeeping only (reinforcement, the query log, throttle counts): a
    PostgreSQL crash, not a clean stop, can lose the last ~0.6 s of such writes, never corrupt them.
    Inside a caller's transaction use ``sql`` itself, or the caller's commit would stop being durable."""
    return sql.rstrip() + ",\n       set_config('synchronous_commit', 'off', true)\n"


class BinaryVector(bytes):
    """A pgvector ``vector`` in its binary wire form (what the server's ``vector_recv`` reads: the
    dimensions and a zero as big-endian int16, then each value as a big-endian float4), sent as a
    BINARY parameter of a server-bound statement (:func:`binary_vector`)."""


def binary_vector(values) -> BinaryVector:
    """A vector (a list of floats or a numpy array) as a bound parameter of a ``%s::vector`` placeholder,
    or of one inserted into a vector column: 1.5 KB packed in ~2 µs, where its text (384 floats as
    decimals, ~7.4 KB) takes ~150 µs to format and the server parses it back. Each value is rounded to
    float4 as the server's text input would (Colony's vectors are float32 already: nothing changes)."""
    return BinaryVector(struct.pack(f">HH{len(values)}f", len(values), 0, *values))


def vector_from_binary(data: bytes | None):
    """A pgvector ``vector`` read in binary (:class:`BinaryVector`'s layout) as a numpy float32 array, or
    None for NULL (~1 µs a vector)."""
    if data is None:
        return None
    import numpy as np

    (dimensions,) = struct.unpack_from(">H", data)
    return np.frombuffer(data, dtype=">f4", count=dimensions, offset=4).astype(np.float32)


class _BinaryVectorDumper(psycopg.adapt.Dumper):
    format = psycopg.pq.Format.BINARY
    oid = 0  # unknown to psycopg: the statement gives the type (the ``::vector`` cast or the column)

    def dump(self, obj):
        return obj


def register_binary_adapters(sender, connection, **kwargs):
    """``connection_created`` receiver (core.apps): every new connection loads a binary jsonb as its
    text (:class:`_JsonbAsText`), so a statement read in binary hands Django's ``JSONField`` what it
    parses (text results, which everything else reads, are not affected), and sends a
    :class:`BinaryVector` as it is."""
    if connection.vendor == "postgresql":
        adapters = connection.connection.adapters
        adapters.register_loader("jsonb", _JsonbAsText)
        adapters.register_dumper(BinaryVector, _BinaryVectorDumper)
