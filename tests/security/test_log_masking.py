"""URL tokens are masked in every log line whatever the query parameter's spelling (percent-encoded,
any case), and any ``col_``/``colr_`` token is masked wherever it stands in a line."""

from __future__ import annotations

import logging

import pytest

from core.logging import MaskUrlTokens

RAW = "colr_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcd"
AGENT = "col_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210_-wxyz"


def _through_the_configured_filters(message: str, *args) -> str:
    """The record as the console handler (settings.LOGGING) and an access logger would write it."""
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, message, args or None, None)
    handler = next(h for h in logging.getLogger().handlers if any(isinstance(f, MaskUrlTokens) for f in h.filters))
    for f in handler.filters + logging.getLogger("uvicorn.access").filters:
        f.filter(record)
    return record.getMessage()


@pytest.mark.parametrize(
    "name", ["token", "TOKEN", "Token", "%74oken", "t%6Fken", "to%6ben", "to%6Ben", "%74%6F%6B%65%6E", "tok%65n"]
)
@pytest.mark.parametrize("equals", ["=", "%3D", "%3d"])
def test_percent_encoded_token_parameter_is_masked(name, equals):
    value = "x9" + "Q" * 30  # no known prefix: masked by the parameter alone
    line = _through_the_configured_filters(
        '%s - "GET %s HTTP/1.1" 200', "127.0.0.1:5", f"/api/v1/memory?prompt=a&{name}{equals}{value}"
    )
    assert value not in line and value[:12] not in line
    assert "prompt=a" in line


@pytest.mark.parametrize("token", [RAW, AGENT])
@pytest.mark.parametrize(
    "template",
    ["GET /api/v1/memory?key={t} HTTP/1.1", "Authorization: Bearer {t}", "sent {t}.", "path=/x/{t}/y", "q=%22{t}%22"],
)
def test_a_token_is_masked_by_its_prefix_anywhere(token, template):
    line = _through_the_configured_filters(template.format(t=token))
    assert token not in line and token[:14] not in line
    assert token[:8] in line  # enough to tell tokens apart


def test_words_that_only_look_like_tokens_are_kept():
    line = _through_the_configured_filters("tokens=3 protocol_version=2 col_name colr_x")
    assert line == "tokens=3 protocol_version=2 col_name colr_x"


@pytest.mark.django_db(transaction=True)
def test_percent_encoded_token_is_masked_in_the_real_server_access_log(asgi_server, caplog):
    import httpx

    caplog.set_level(logging.INFO, logger="uvicorn.access")
    value = "abcdefghijklmnopqrstuvwxyz0123456789"
    httpx.get(f"{asgi_server.url}/api/v1/memory?prompt=x&%74oken={value}")
    httpx.get(f"{asgi_server.url}/api/v1/memory?prompt=x&t%6Fken={RAW}")
    text = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert "%74oken=" in text  # the request was logged
    assert value not in text and RAW not in text


@pytest.mark.django_db
def test_tokens_as_issued_are_masked_in_a_line_that_names_nothing_else(space):
    """A token as core.services issues it, alone in a line (no ``token=``, no %-escape), is masked."""
    from core import services

    agent, raw_agent = services.agent_create(name="masked", role="dev", space=space)
    _, raw_url = services.url_token_create(agent=agent, days=1)
    for raw in (raw_agent, raw_url):
        line = _through_the_configured_filters("Authorization: Bearer %s", raw)
        assert raw not in line and raw[:8] + "…" in line


def test_a_line_with_nothing_like_a_token_is_left_as_it_is():
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, "GET /api/v1/health %s", (200,), None)
    MaskUrlTokens().filter(record)
    assert (record.msg, record.args) == ("GET /api/v1/health %s", (200,))


def test_a_line_with_a_token_parameter_and_a_prefixed_token_masks_both():
    value = "x9" + "Q" * 30
    line = _through_the_configured_filters(f"GET /api/v1/memory?%74o%6B%65n={value} Authorization: Bearer {AGENT}")
    assert value not in line and value[:12] not in line
    assert AGENT not in line and AGENT[:8] + "…" in line
