"""The failed-login lock of /login/ and /admin/login/ (django-axes' ``AXES_HANDLER``): two limits.

- One username from one address: locked after ``AXES_FAILURE_LIMIT`` failures (a guesser at one account).
- One address, whatever the usernames: locked after ``AXES_ADDRESS_FAILURE_LIMIT`` failures (a sprayer
  trying a password or two against many accounts, which the first lock never sees).

django-axes counts each entry of ``AXES_LOCKOUT_PARAMETERS`` separately but compares the largest count
with a single ``AXES_FAILURE_LIMIT``, so an address-wide entry would lock an address after as few
failures as one account. This handler keeps the database handler's bookkeeping (one ``AccessAttempt``
row per username, address and user agent, within ``AXES_COOLOFF_TIME``) and gives each lock its limit.
A successful login clears its own username's failures from that address only: a sprayer who owns one
account can't wipe the address count by logging in between rounds.
"""

from __future__ import annotations

from axes.conf import settings
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.db.models import Sum
from django.http import HttpRequest

#: Set on the request when the address-wide limit is what locks it (the lockout page says which lock).
ADDRESS_LOCKED = "colony_address_locked"


def _failures(attempts) -> int:
    return attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0


class LoginLockHandler(AxesDatabaseHandler):
    def _recent(self, request: HttpRequest, credentials: dict | None):
        """This address's failure rows within the cool-off, and the username of this attempt."""
        [recent] = self.get_user_attempts(request, credentials)  # AXES_LOCKOUT_PARAMETERS: [["ip_address"]]
        return recent, get_client_username(request, credentials)

    def get_failures(self, request: HttpRequest, credentials: dict | None = None) -> int:
        """The count django-axes compares with ``AXES_FAILURE_LIMIT``: this username's failures from this
        address, or that limit itself once the address has ``AXES_ADDRESS_FAILURE_LIMIT`` failures."""
        address, username = self._recent(request, credentials)
        pair = _failures(address.filter(username=username))
        if _failures(address) >= settings.AXES_ADDRESS_FAILURE_LIMIT:
            setattr(request, ADDRESS_LOCKED, True)
            return max(pair, get_failure_limit(request, credentials))
        return pair

    def reset_user_attempts(self, request: HttpRequest, credentials: dict | None = None) -> int:
        """After a successful login: this username's failures from this address, not the address's others."""
        username = get_client_username(request, credentials)
        count, _ = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address).delete()
        return count
