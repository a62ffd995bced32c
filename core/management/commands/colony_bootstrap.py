"""First-start setup: the default space, an admin user and one agent per default role."""

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from core import services
from core.choices import DEFAULT_ROLES
from core.models import Agent


class Command(BaseCommand):
    help = "Create the default space, an admin (COLONY_ADMIN_USER / COLONY_ADMIN_PASSWORD) and default agents."

    def handle(self, *args, **options):
        space = services.space_get_or_create_default()
        User = get_user_model()
        username = os.environ.get("COLONY_ADMIN_USER", "admin")
        if not User.objects.filter(username=username).exists():
            password = os.environ.get("COLONY_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            try:  # the checks a password change on the admin applies (AUTH_PASSWORD_VALIDATORS)
                validate_password(password, User(username=username))
            except ValidationError as exc:
                raise CommandError(
                    f"COLONY_ADMIN_PASSWORD is refused: {' '.join(exc.messages)} Choose another, or unset it "
                    "to have one generated and printed."
                ) from None
            user = User.objects.create_superuser(username=username, email="", password=password)
            space.members.add(user)
            shown = password if "COLONY_ADMIN_PASSWORD" not in os.environ else "(from COLONY_ADMIN_PASSWORD)"
            self.stdout.write(f"Admin user created: {username} / {shown}  (change it: manage.py changepassword)")
        else:
            self.stdout.write(f"Admin user {username!r} exists.")
        for role in DEFAULT_ROLES:
            name = f"{role.value}-agent"
            if Agent.objects.filter(space=space, name=name).exists():
                continue
            _, token = services.agent_create(name=name, role=role.value, space=space, label="bootstrap")
            self.stdout.write(f"Agent {name} (role {role.value}) token, shown once: {token}")
        self.stdout.write(
            "Agents: manage.py agent list | agent token NAME (another token) | agent create NAME --role ROLE"
        )
