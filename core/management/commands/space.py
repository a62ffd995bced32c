"""manage.py space create SLUG [--name NAME] | list"""

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count

from api.errors import ApplicationError
from core import services
from core.management.arguments import arguments_refuse_unstorable
from core.models import Space


class Command(BaseCommand):
    help = "Create and list spaces (tenants). Agents join one with `manage.py agent create NAME --space SLUG`."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a space")
        create.add_argument("slug", help="lowercase letters, digits and hyphens, e.g. team-blue")
        create.add_argument("--name", default="", help="display name (default: the slug)")
        sub.add_parser("list", help="list spaces with their agent counts")

    def handle(self, *args, action, **options):
        arguments_refuse_unstorable(options)
        try:
            getattr(self, f"_{action}")(**options)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc

    def _create(self, slug, name, **_):
        space = services.space_create(slug=slug, name=name)
        self.stdout.write(
            f"Created space {space.slug} ({space.name}). Add an agent: "
            f"manage.py agent create NAME --role ROLE --space {space.slug}"
        )

    def _list(self, **_):
        spaces = Space.objects.annotate(agent_count=Count("agents")).order_by("slug")
        for space in spaces:
            self.stdout.write(f"{space.slug:24} {space.agent_count:4} agents  {space.name}")
