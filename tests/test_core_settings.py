"""The typed settings reader and the database URL parser."""

import pytest

from config.env import ImproperSetting, env
from config.settings import database_from_url


def test_env_casts_to_the_type_of_the_default(monkeypatch):
    monkeypatch.setenv("X_BOOL", "off")
    monkeypatch.setenv("X_INT", "42")
    monkeypatch.setenv("X_FLOAT", "0.5")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env("X_BOOL", True) is False
    assert env("X_INT", 1) == 42
    assert env("X_FLOAT", 1.0) == 0.5
    assert env("X_LIST", ["z"]) == ["a", "b", "c"]
    assert env("X_UNSET_EVER", "dflt") == "dflt"


def test_env_says_what_is_wrong(monkeypatch):
    monkeypatch.setenv("X_INT", "many")
    with pytest.raises(ImproperSetting, match="X_INT='many' is not a valid int"):
        env("X_INT", 3)


def test_database_url_with_socket_and_tcp():
    socket = database_from_url("postgresql://postgres:@/colony?host=/tmp/pg")
    assert (socket["NAME"], socket["HOST"], socket["USER"]) == ("colony", "/tmp/pg", "postgres")
    tcp = database_from_url("postgres://u:p%40ss@db.example:6543/prod?sslmode=require")
    assert (tcp["HOST"], tcp["PORT"], tcp["PASSWORD"], tcp["OPTIONS"]) == (
        "db.example",
        "6543",
        "p@ss",
        {"sslmode": "require"},
    )
    with pytest.raises(ValueError, match="postgresql://"):
        database_from_url("sqlite:///x.db")


def test_prepared_statement_options_keep_the_urls_own_options():
    from config.settings import prepared_statement_options

    options = prepared_statement_options({"sslmode": "require", "options": "-c statement_timeout=5000"})
    assert options["sslmode"] == "require"
    assert options["options"] == "-c statement_timeout=5000 -c plan_cache_mode=force_custom_plan"
    assert options["prepare_threshold"] >= 2**31 - 1  # the ORM's statements: never prepared
    assert prepared_statement_options({"prepare_threshold": 5})["prepare_threshold"] == 5  # the URL's wins


def test_prepared_statements_can_be_turned_off_for_a_pooler():
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default']['OPTIONS']))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_PREPARED_STATEMENTS": "false"}
    command = [sys.executable, "-c", script]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    options = json.loads(out.stdout.strip().splitlines()[-1])
    assert "prepare_threshold" not in options and "plan_cache_mode" not in options.get("options", "")


def test_the_generated_secret_key_is_never_readable_by_others(tmp_path, monkeypatch):
    """Written at 0644 and chmodded afterwards, the key was readable by any local user in between (and
    for good if the process died there): it must exist only ever as owner-only."""
    import os
    from pathlib import Path

    from config.env import secret_key_file

    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)  # the state before any chmod
    monkeypatch.setattr(Path, "chmod", lambda *args, **kwargs: None)
    old_umask = os.umask(0o022)
    try:
        key = secret_key_file(tmp_path / "secret_key")
    finally:
        os.umask(old_umask)
    assert len(key) >= 50
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
    assert [path.name for path in tmp_path.iterdir()] == ["secret_key"]


def test_processes_starting_at_once_share_one_whole_secret_key(tmp_path):
    """The web workers and the Celery worker start together on a fresh install: each must read the same,
    complete key (an empty or another worker's key logs users out or fails the start)."""
    import threading

    from config.env import secret_key_file

    path, keys, start = tmp_path / "secret_key", [], threading.Barrier(16)

    def read():
        start.wait()
        keys.append(secret_key_file(path))

    threads = [threading.Thread(target=read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(keys) == 16 and len(set(keys)) == 1 and len(keys[0]) >= 50
    assert path.read_text() == keys[0]
