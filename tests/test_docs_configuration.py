"""docs/configuration.md lists every setting: each ``env("NAME", ...)`` that config/settings.py reads
is named there, so a new setting can't go undocumented."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def settings_read() -> set[str]:
    tree = ast.parse((ROOT / "config" / "settings.py").read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "env"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def test_settings_reads_are_found():
    names = settings_read()
    assert {"DATABASE_URL", "SECRET_KEY", "API_THROTTLE_RATE"} <= names


def test_every_setting_is_listed_in_the_configuration_page():
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(name for name in settings_read() if f"`{name}`" not in page)
    assert not missing, f"add these settings to docs/configuration.md: {missing}"
