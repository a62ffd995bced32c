"""Agent authentication: ``Authorization: Bearer <token>``, tokens stored as SHA-256 hashes."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from api.errors import Forbidden, ValidationFailed
from core import services
from core.models import Agent

URL_TOKEN_PARAM = "token"  # noqa: S105 - a parameter name and a message, not secrets
#: The only operation a read-only URL token may call (seed 003 layer B).
#: (HEAD: GET's headers without its work, brain.apis.memory.MemoryApi.head; link previews send it.)
URL_TOKEN_METHODS, URL_TOKEN_URL_NAME = ("GET", "HEAD"), "memory"
URL_TOKEN_REFUSED = (
    "A URL token only answers GET /api/v1/memory (retrieve-only). Use 'Authorization: Bearer <agent token>' "  # noqa: S105 - a parameter name and a message, not secrets
    "for anything else."
)


def url_token_allowed(request) -> bool:
    """Whether this Django request is the one operation a URL token may call."""
    match = getattr(request, "resolver_match", None)
    return request.method in URL_TOKEN_METHODS and match is not None and match.url_name == URL_TOKEN_URL_NAME


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if URL_TOKEN_PARAM in request.query_params:
            return self._authenticate_url_token(request, has_header=bool(header))
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <token>'.")
        token = services.token_lookup(raw_token=parts[1])
        if token is None:
            raise exceptions.AuthenticationFailed(
                "Unknown or revoked token. Ask an operator for a new one: manage.py agent create NAME --role ROLE."
            )
        if not token.agent.active:
            raise exceptions.AuthenticationFailed("This agent is deactivated.")
        # Recorded at most once a minute per token, to keep a write off most requests.
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            services.token_touch(token=token, now=now)
        return token.agent, token

    def _authenticate_url_token(self, request, *, has_header: bool):
        if not url_token_allowed(request._request):
            raise Forbidden(URL_TOKEN_REFUSED, code="URL_TOKEN_NOT_ALLOWED")
        if has_header:
            raise ValidationFailed("Send either an Authorization header or a token parameter, not both.")
        token = services.url_token_lookup(raw_token=request.query_params[URL_TOKEN_PARAM])
        if token is None:
            raise exceptions.AuthenticationFailed(
                "Unknown, expired or revoked URL token. Ask a member of the space for a new one "
                "(web UI: URL tokens, or manage.py agent url-token NAME)."
            )
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            type(token).objects.filter(pk=token.pk).update(last_used_at=now)
        return token.agent, token

    def authenticate_header(self, request):
        return 'Bearer realm="colony"'


class IsAgent(permissions.BasePermission):
    message = "Authentication required: send 'Authorization: Bearer <token>'."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, Agent)


class UrlTokenGuard:
    """Middleware: a ``token`` query parameter anywhere but ``GET /api/v1/memory`` is refused (403).

    So a URL token can never store, correct, transition or read tasks, whatever path or method it
    is sent to, API or not; and it is never silently ignored where it would leak into a page's links.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if URL_TOKEN_PARAM in request.GET and not url_token_allowed(request):
            from django.http import JsonResponse

            from api.errors import error_body

            return JsonResponse(error_body("URL_TOKEN_NOT_ALLOWED", URL_TOKEN_REFUSED), status=403)
        return None


#: The longest username a human can have (django.contrib.auth's User); django-axes keeps a failed
#: login's username in a 255-character column.
LOGIN_USERNAME_MAX = 150


def login_attempt_username(request, credentials: dict | None = None) -> str | None:
    """The username django-axes counts a login attempt under (``AXES_USERNAME_CALLABLE``): the one posted,
    cut to LOGIN_USERNAME_MAX, so a longer one fits the column (uncut, the database refuses it: a 500 to
    an anonymous visitor); no account has a longer name, so the cut locks out no one real."""
    source = credentials or getattr(request, "data", None) or getattr(request, "POST", {})
    username = source.get("username")
    return username[:LOGIN_USERNAME_MAX] if isinstance(username, str) else username
