"""Database helpers shared by the hot request paths."""

from __future__ import annotations

import psycopg
from django.db import connection


class _PreparedCursor(psycopg.Cursor):
    """psycopg's server-side-binding cursor, preparing every statement it runs."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)


def prepared_cursor():
    """A Django cursor whose parameters the SERVER binds and whose statements are prepared on the
    connection (pooled or persistent), so each statement shape is parsed and planned once, not per
    call. (Django's default client-side binding pastes every value, e.g. a 384-float vector, into the
    statement's text each time, and the server plans it anew.) Django's wrapper is kept: query
    logging, CaptureQueriesContext and execute wrappers see these statements like any other.

    Use it for fixed statement texts run on every request; a text that varies per call would fill
    the connection's prepared-statement cache for nothing."""
    connection.ensure_connection()
    return connection._prepare_cursor(_PreparedCursor(connection.connection))
