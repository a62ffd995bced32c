#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting Colony can't use (config.env.ImproperSetting): one sentence, not a traceback.
        print(f"colony: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
