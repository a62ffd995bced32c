"""docs/agents.md: every ```bash block, extracted from the file and run verbatim, in order, in one
bash against a live Colony (the production ASGI app: REST, /mcp, the hooks, the stdio bridge)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from brain.models import Thought
from core import services
from tasks.models import Task
from tests.tasks_helpers import make_project, make_task

DOC = Path(settings.BASE_DIR) / "docs" / "agents.md"

pytestmark = pytest.mark.django_db(transaction=True)


def bash_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)


def test_the_doc_has_the_protocol_and_the_plug_ins():
    script = "\n".join(bash_blocks())
    for needle in (
        "/api/v1/memory?contribute=false",
        "/tasks/fix-ci/dna",
        "/in-flight",
        "/retract",
        "/mcp",
        "colony_mcp_stdio.py",
        "colony_hooks.py prompt-submit",
        "token=$COLONY_URL_TOKEN",
    ):
        assert needle in script, needle


def test_every_bash_block_runs_verbatim_against_a_live_colony(asgi_server, agent_factory, space, fake_embedder):
    dev = agent_factory("dev", name="claude-dev")
    make_task(make_project(space, "colony"), slug="fix-ci", status="ready", role="dev", dna={"pdsa_ref": "docs/x.md"})
    _, url_token = services.url_token_create(agent=dev.agent, days=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONY_")}
    env.update({"COLONY_URL": asgi_server.url, "COLONY_TOKEN": dev.token, "COLONY_URL_TOKEN": url_token})
    script = "set -euo pipefail\n" + "\n".join(bash_blocks())
    done = subprocess.run(
        ["bash", "-c", script], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout.splitlines()
    task = Task.objects.get(slug="fix-ci")
    session = task.dna["memory_query_session"]
    thought = Thought.objects.get(id=task.dna["memory_contribution_id"])
    assert (task.status, task.role) == ("review", "qa")
    assert thought.agent == dev.agent and thought.thought_category == "task_outcome"
    assert out[:9] == [
        f"session: {session}",
        session,
        '["active"]',
        "TASK ready→active: DEV fix-ci (colony) — claiming the CI fix",
        "fix-ci active: TASK ready→active: DEV fix-ci (colony) — claiming the CI fix",
        f"contributed: {thought.id}",
        "review qa",
        '["retracted"]',
        f"{Thought.objects.get(quality_flags__contains=['retracted']).id} stored by mistake",
    ]
    paged = re.fullmatch(r"paged (\d+) of (\d+)", out[9])
    assert paged and paged[1] == paged[2] and int(paged[1]) >= 3, out[9]  # every page read once: 2 to a page
    assert out[10:13] == ["memory_search", "memory_contribute", "memory_correct"]
    assert out[13] == "colony"
    assert out[14].startswith("Colony session id: doc-session")
    assert out[15].startswith("fix-ci outcome: the CI migration step failed")
    assert out[16] == "403"
    assert len(out) == 17
