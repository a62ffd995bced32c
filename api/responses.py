"""How the API answers: a DRF response that runs work after it has been sent, and the content
negotiation that answers JSON whatever the ``Accept`` header asks for (``AnswerInJSON``).

A WSGI server calls the response's ``close()`` once the last byte is out (``runtime.wsgi_bridge`` does
too, as does Django's test client), so what runs there is off the client's wait but still in the
request's thread, on its database connection, before ``request_finished`` releases it. Use it for
bookkeeping the response does not depend on (the memory call's reinforcement). A failure there
can't reach the client any more: it is logged with its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response

logger = logging.getLogger("colony.api")


class ResponseThenWork(Response):
    """``Response(data)`` whose ``after`` callables run, in order, when the server closes it."""

    def __init__(self, data: Any, *, after: list[Callable[[], Any]], **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.after = after

    def close(self) -> None:
        try:
            for work in self.after:
                try:
                    work()
                except Exception:
                    logger.exception("Work after the response failed (the client already has its answer): %r", work)
            self.after = []
        finally:
            super().close()


class AnswerInJSON(DefaultContentNegotiation):
    """DRF's content negotiation, except that an ``Accept`` header none of the view's renderers satisfies
    (``text/plain``, ``text/html`` without ``*/*``: some HTTP tools' defaults) gets the view's first
    renderer (JSON on the agent API) instead of a 406 that said only "Could not satisfy the request Accept
    header." RFC 9110 12.5.1 lets a server disregard such an Accept header."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            if format_suffix:  # a format asked for by name that the view doesn't have: still a 404 / 406
                raise
            return renderers[0], renderers[0].media_type
