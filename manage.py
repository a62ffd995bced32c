#!/usr/bin/env python
import os
import sys


def database_problem(exc: BaseException) -> str | None:
    """One sentence for a database a command could not use, or None for any other error.

    A command run before the first ``make run`` (README: ``manage.py agent create``) meets a database
    without Colony's tables; one run with ``DATABASE_URL`` at a server that is down can't connect.
    Both were tracebacks ending in a psycopg message.
    """
    from django.db.utils import OperationalError, ProgrammingError
    from psycopg import errors

    if isinstance(exc, ProgrammingError) and isinstance(exc.__cause__, errors.UndefinedTable):
        return (
            f"the database has no Colony tables yet ({str(exc).splitlines()[0]}). Run `make run` once "
            "(it migrates and creates the default space and agents), or `python manage.py migrate` "
            "and then `python manage.py colony_bootstrap`."
        )
    if isinstance(exc, ProgrammingError) and isinstance(exc.__cause__, errors.UndefinedColumn):
        return (
            f"the database's tables are older than this code ({str(exc).splitlines()[0]}). "
            "Run `python manage.py migrate` (make run does it when it starts)."
        )
    if isinstance(exc, OperationalError) and getattr(exc.__cause__, "sqlstate", None) is None:
        # No SQLSTATE: the connection itself failed (a statement timeout or a deadlock has one).
        detail = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()).rstrip(".")
        return (
            f"could not connect to the database: {detail} Start it, or point DATABASE_URL at a running "
            "PostgreSQL with pgvector (unset, Colony starts its embedded one)."
        )
    return None


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db.utils import DatabaseError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting Colony can't use (config.env.ImproperSetting): one sentence, not a traceback.
        print(f"colony: {exc}", file=sys.stderr)
        sys.exit(2)
    except DatabaseError as exc:
        problem = database_problem(exc)
        if problem is None:
            raise
        print(f"colony: {problem}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
