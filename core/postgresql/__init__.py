"""Django's PostgreSQL backend as Colony runs it (``ENGINE: "core.postgresql"``): see :mod:`.base`."""
