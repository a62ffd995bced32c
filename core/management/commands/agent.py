"""manage.py agent create NAME --role ROLE [--space SLUG] | token NAME | url-token NAME [--days N]
| revoke NAME [--token PREFIX] | list"""

from django.core.management.base import BaseCommand, CommandError

from api.errors import ApplicationError
from core import selectors, services
from core.choices import DEFAULT_SPACE_SLUG, AgentRole
from core.management.arguments import arguments_refuse_unstorable
from core.models import Agent


class Command(BaseCommand):
    help = "Create agents, issue and revoke their API tokens. A new token is printed once, alone on the last line."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create an agent and print its first token")
        create.add_argument("name")
        create.add_argument("--role", required=True, choices=AgentRole.values)
        create.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        token = sub.add_parser("token", help="issue another token for an existing agent")
        token.add_argument("name")
        token.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        token.add_argument("--label", default="")
        revoke = sub.add_parser(
            "revoke", help="revoke one token (--token PREFIX) or all tokens of an agent, its URL tokens included"
        )
        revoke.add_argument("name")
        revoke.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        revoke.add_argument("--token", default=None, help="the token or its first characters (col_ or colr_)")
        url = sub.add_parser(
            "url-token", help="issue a read-only URL token (GET /api/v1/memory only) acting as this agent"
        )
        url.add_argument("name")
        url.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        url.add_argument("--days", type=int, default=30, help="valid for this many days (1-365, default 30)")
        url.add_argument("--label", default="")
        listing = sub.add_parser("list", help="list agents and their active tokens")
        listing.add_argument("--space", default=None)

    def handle(self, *args, action, **options):
        arguments_refuse_unstorable(options)
        try:
            getattr(self, f"_{action.replace('-', '_')}")(**options)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc

    def _create(self, name, role, space, **_):
        agent, token = services.agent_create(name=name, role=role, space=services.space_get(slug=space))
        self.stdout.write(f"Created agent {agent.name} (role {agent.role}, space {space}). Its token, shown once:")
        self.stdout.write(token)

    def _token(self, name, space, label, **_):
        agent = selectors.agent_get(space=services.space_get(slug=space), name=name)
        self.stdout.write(f"New token for {agent.name}, shown once:")
        self.stdout.write(services.token_create(agent=agent, label=label))

    def _url_token(self, name, space, days, label, **_):
        agent = selectors.agent_get(space=services.space_get(slug=space), name=name)
        token, raw = services.url_token_create(agent=agent, days=days, label=label, created_by="cli")
        self.stdout.write(
            f"Read-only URL token for {agent.name} in space {space}, valid until {token.expires_at:%Y-%m-%d %H:%M} "
            f"UTC; it only answers GET /api/v1/memory?prompt=...&token=... . Shown once:"
        )
        self.stdout.write(raw)

    def _revoke(self, name, space, token, **_):
        agent = selectors.agent_get(space=services.space_get(slug=space), name=name)
        if token and token.startswith(services.URL_TOKEN_PREFIX):
            count = services.url_token_revoke(agent=agent, prefix=token)
            if count == 0:
                raise CommandError(
                    f"No active URL token of {name} starts with {token[:12]!r}; see `manage.py agent list`."
                )
            self.stdout.write(f"Revoked {count} URL token(s) of {name}.")
            return
        count = services.token_revoke(agent=agent, prefix=token)
        if token and count == 0:
            raise CommandError(f"No active token of {name} starts with {token[:12]!r}; see `manage.py agent list`.")
        self.stdout.write(f"Revoked {count} token(s) of {name}.")

    def _list(self, space, **_):
        agents = (
            Agent.objects.select_related("space")
            .prefetch_related("tokens", "url_tokens")
            .order_by("space__slug", "name")
        )
        if space:
            agents = agents.filter(space__slug=space)
        for agent in agents:
            active = [t.prefix for t in agent.tokens.all() if t.is_active]
            active += [f"{t.prefix} (URL)" for t in agent.url_tokens.all() if t.revoked_at is None]
            self.stdout.write(
                f"{agent.space.slug:12} {agent.name:20} {agent.role:12} "
                f"{'active' if agent.active else 'inactive':8} tokens: {', '.join(active) or '-'}"
            )
