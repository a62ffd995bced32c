"""Django's PostgreSQL backend as Colony runs it (``ENGINE: "runtime.postgresql"``): see :mod:`.base`."""
