"""uvicorn's httptools protocol, whose own refusals come in the API's error envelope.

uvicorn answers a request it cannot parse itself, before Colony sees it, with a plain-text ``400
Invalid HTTP request received.`` The one an agent meets is a URL over 65,535 bytes: httptools parses
the request target with 16-bit offsets, so a ``GET /api/v1/memory?prompt=...`` of 10,000 non-ASCII
characters (about 90 KB percent-encoded, within the field's 10,000-character limit) is refused with
that line, and a client that reads the envelope finds none. This protocol answers those refusals
as Colony answers everything else: a URL too long is ``414 URL_TOO_LONG`` with what to do instead
(the same fields in a POST body), anything else unparsable ``400 BAD_REQUEST``; a browser (``Accept:
text/html``, e.g. a very long search in the brain explorer) gets the same message as a small page.

``runtime.serve`` names it as uvicorn's ``http`` protocol; it imports no Django.
"""

from __future__ import annotations

import html
import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# httptools' URL parser keeps offsets in 16 bits (http_parser_url): a longer request target fails.
MAX_URL_BYTES = 65535

STATUS_LINES = {400: b"HTTP/1.1 400 Bad Request\r\n", 414: b"HTTP/1.1 414 URI Too Long\r\n"}


def refusal(url_bytes: int) -> tuple[int, dict]:
    """The status and envelope for a request uvicorn could not parse, whose URL had ``url_bytes``."""
    if url_bytes > MAX_URL_BYTES:
        message = (
            f"The request's URL is {url_bytes:,} bytes; this server reads URLs of at most {MAX_URL_BYTES:,}. "
            "Send the same fields as a JSON body instead: for a memory query, POST /api/v1/memory with "
            '{"prompt": "...", "contribute": false} answers as the GET does.'
        )
        return 414, {"error": {"code": "URL_TOO_LONG", "message": message}}
    message = "The request is not valid HTTP/1.1 and was not read; check the request line and headers."
    return 400, {"error": {"code": "BAD_REQUEST", "message": message}}


def refusal_page(url_bytes: int) -> bytes:
    """The refusal as a page, for a browser (the brain explorer's search box is a GET form)."""
    if url_bytes > MAX_URL_BYTES:
        title = "Address too long"
        text = (
            f"This address is {url_bytes:,} bytes long; the server reads addresses of at most {MAX_URL_BYTES:,} "
            "bytes. A search this long can't be sent from a search box: shorten it."
        )
    else:
        title, text = "Bad request", "The browser sent something that is not a readable HTTP request."
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · Colony</title></head>'
        f'<body><h1>{title}</h1><p>{html.escape(text)}</p><p><a href="/">Go to the home page</a>.</p></body></html>'
    ).encode()


class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
    def _wants_html(self) -> bool:
        accept = dict(getattr(self, "headers", None) or []).get(b"accept", b"")
        return b"text/html" in accept

    def send_400_response(self, msg: str) -> None:
        url_bytes = len(getattr(self, "url", b"") or b"")
        status, body = refusal(url_bytes)
        if self._wants_html():
            payload, content_type = refusal_page(url_bytes), b"text/html; charset=utf-8"
        else:
            payload, content_type = json.dumps(body).encode(), b"application/json"
        content = [STATUS_LINES[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: " + content_type + b"\r\n",
                b"content-length: " + str(len(payload)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                payload,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()
