"""The HTTP plumbing the contrib scripts share is copied into each of them, on purpose, and must stay one text.

Each of ``contrib/colony_hooks.py``, ``contrib/colony_mcp_stdio.py`` and ``contrib/colony_stop_hook.py`` is
copied alone onto an agent's machine and uses the standard library only, so none can import the others: the
timeouts caught, the opener that refuses redirects (a redirect must not carry the token to another host),
the direct and proxied openers, ``urlopen``, ``token_problem`` and ``base_url`` are written out in each. A fix
made in one copy and not the others would leave one script with the old behaviour; this test reads the three
files (without importing them) and fails as soon as one of those definitions differs.
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

CONTRIB = Path(__file__).resolve().parent.parent / "contrib"
SCRIPTS = ("colony_hooks.py", "colony_mcp_stdio.py", "colony_stop_hook.py")
#: The definitions each script holds word for word (a constant, a class or a function, by the name it binds).
SHARED = ("TIMEOUTS", "_NoRedirect", "_DIRECT", "_PROXIED", "urlopen", "token_problem", "base_url")
#: ... and those the two scripts that read Colony's answers hold (the Stop hook reads only a status).
READERS = ("colony_hooks.py", "colony_mcp_stdio.py")
READ = ("MAX_ANSWER_BYTES", "read_within")


def definitions(path: Path) -> dict[str, str]:
    """The source text of each top-level definition of ``path`` named in ``SHARED``."""
    source = path.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for node in ast.parse(source, filename=str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            continue
        for name in names:
            if name in SHARED or name in READ:
                found[name] = ast.get_source_segment(source, node, padded=True)
    return found


@pytest.mark.parametrize("scripts, shared", [(SCRIPTS, SHARED), (READERS, READ)], ids=["all", "readers"])
def test_the_contrib_scripts_copies_of_the_http_plumbing_are_identical(scripts, shared):
    copies = {script: definitions(CONTRIB / script) for script in scripts}
    reference_script = scripts[0]
    problems = []
    for name in shared:
        missing = [script for script in scripts if name not in copies[script]]
        if missing:
            problems.append(f"{name}: not defined at top level in {', '.join(missing)}")
            continue
        reference = copies[reference_script][name]
        for script in scripts[1:]:
            if copies[script][name] != reference:
                diff = difflib.unified_diff(
                    reference.splitlines(),
                    copies[script][name].splitlines(),
                    f"contrib/{reference_script}",
                    f"contrib/{script}",
                    lineterm="",
                )
                problems.append(f"{name} differs:\n" + "\n".join(diff))
    assert not problems, (
        "contrib/colony_hooks.py, contrib/colony_mcp_stdio.py and contrib/colony_stop_hook.py hold deliberate "
        "word-for-word copies of " + ", ".join(shared) + " (each script is copied alone onto an agent's machine, "
        "standard library only, so they cannot share a module). Change the copies together, in all three "
        "files:\n\n" + "\n\n".join(problems)
    )
