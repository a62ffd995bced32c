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
