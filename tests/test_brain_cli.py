"""manage.py brain query|contribute|refine|consolidate|correct|history|highways."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from brain.models import QueryLog, Thought

pytestmark = pytest.mark.django_db

STATEMENT = "The deploy pipeline runs database migrations before it restarts the web workers."


def brain(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("brain", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_contribute_then_query(dev, fake_embedder):
    out, _ = brain("contribute", STATEMENT, "--agent", dev.agent.name, "--topic", "deploy", "--tags", "ops,deploy")
    thought = Thought.objects.get()
    assert f"Stored thought {thought.id}" in out
    assert thought.topic == "deploy" and thought.tags == ["ops", "deploy"] and thought.agent == dev.agent
    out, _ = brain("query", "deploy pipeline migrations", "--agent", dev.agent.name)
    assert str(thought.id) in out and "why: similarity" in out and " 1. " in out
    assert QueryLog.objects.count() == 2


def test_contribute_below_threshold_says_so(dev, fake_embedder):
    _, err = brain("contribute", "too short", "--agent", dev.agent.name)
    assert "Not stored" in err and Thought.objects.count() == 0


def test_query_json_output_is_the_api_response(dev, fake_embedder):
    out, _ = brain("query", "anything?", "--agent", dev.agent.name, "--json")
    body = json.loads(out)
    assert set(body) == {"result", "trace"}


def test_refine_consolidate_and_history(dev, fake_embedder, thought_factory):
    a = thought_factory("Backups are kept seven days.")
    b = thought_factory("Backups run nightly.")
    out, _ = brain("refine", str(a.id), "Backups are kept thirty days since March.", "--agent", dev.agent.name)
    refinement = Thought.objects.get(thought_type="refinement")
    assert f"Stored thought {refinement.id}" in out
    brain(
        "consolidate", f"{refinement.id},{b.id}", "Backups run nightly and are kept 30 days.", "--agent", dev.agent.name
    )
    merged = Thought.objects.get(thought_type="consolidation")
    out, _ = brain("history", str(refinement.id))
    lines = out.splitlines()
    assert lines[0] == f"Lineage of {refinement.id} (3 thought(s)):"
    assert any(line.startswith(f"  -1  {a.id}  original") and "ancestor" in line for line in lines)
    assert any(line.startswith(f"> +0  {refinement.id}  refinement") and "[superseded]" in line for line in lines)
    assert any(line.startswith(f"  +1  {merged.id}  consolidation") and "descendant" in line for line in lines)
    out, _ = brain("history", str(a.id), "--max-depth", "1")
    assert "truncated at depth 1" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (("query", "x", "--agent", "nobody"), "AGENT_NOT_FOUND"),
        (("refine", "not-a-uuid", "better", "--agent", "dev-1"), "refines"),
        (("consolidate", "00000000-0000-0000-0000-000000000001", "merged", "--agent", "dev-1"), "MIN_CONSOLIDATION"),
        (("refine", "00000000-0000-0000-0000-000000000001", "better", "--agent", "dev-1"), "THOUGHT_NOT_FOUND"),
        (("history", "00000000-0000-0000-0000-000000000001"), "THOUGHT_NOT_FOUND"),
        (("history", "00000000-0000-0000-0000-000000000001", "--max-depth", "-1"), "max-depth"),
    ],
)
def test_errors_are_clear(dev, fake_embedder, args, message):
    with pytest.raises(CommandError, match=message):
        brain(*args)
    assert Thought.objects.count() == 0


def test_correct_supersedes_and_prints_how_many(dev, fake_embedder, thought_factory):
    wrong = thought_factory("Thomas is the certified Neuroimaginations-Coach.", topic="gruendung")
    copy = thought_factory("Thomas, certified Neuroimaginations-Coach, runs the workshops.")
    out, _ = brain(
        "correct",
        str(wrong.id),
        "Neuroimaginations-Coaching is a joint venture with Gerhard Quiring; Thomas is not the coach.",
        "--agent",
        dev.agent.name,
        "--supersedes",
        str(copy.id),
        "--source-ref",
        '{"type": "url", "value": "human-correction"}',
    )
    correction = Thought.objects.get(thought_category="correction")
    assert f"Stored correction {correction.id} (topic gruendung)." in out
    assert "supersedes 2 previous thoughts" in out and str(copy.id) in out
    assert correction.agent == dev.agent and correction.corrected_fact == wrong.content
    assert correction.source_ref == {"type": "url", "value": "human-correction"}
    for thought in (wrong, copy):
        thought.refresh_from_db()
        assert thought.superseded and thought.superseded_by_id == correction.id


@pytest.mark.parametrize(
    "extra, message",
    [
        ((), "THOUGHT_NOT_FOUND"),  # the thought itself is unknown
        (("--supersedes", "00000000-0000-0000-0000-000000000002"), "THOUGHT_NOT_FOUND"),
        (("--source-ref", "{nope"), "source-ref"),
        (("--source-ref", '{"type": "email", "value": "x"}'), "source-ref"),
    ],
)
def test_correct_errors_change_nothing(dev, fake_embedder, thought_factory, extra, message):
    wrong = thought_factory("Thomas is the certified Neuroimaginations-Coach.")
    target = "00000000-0000-0000-0000-000000000001" if not extra else str(wrong.id)
    with pytest.raises(CommandError, match=message):
        brain("correct", target, "Thomas is not the coach.", "--agent", dev.agent.name, *extra)
    assert Thought.objects.count() == 1 and not Thought.objects.filter(superseded=True).exists()


def test_pending_corrections_are_printed_with_how_to_accept(dev, fake_embedder, thought_factory):
    from brain.services.suggestions import suggestion_create

    old = thought_factory("The cache uses LFU eviction.")
    suggestion, _ = suggestion_create(
        thought=old, statement="The cache uses LRU eviction.", origin="contradiction_detector", agent=dev.agent
    )
    out, _ = brain("query", "cache eviction?", "--agent", dev.agent.name)
    assert f"pending correction {suggestion.id} on {old.id}: The cache uses LRU eviction." in out
    assert f"/api/v1/corrections/{suggestion.id}/accept" in out


def test_contribute_with_related_thoughts(dev, fake_embedder, thought_factory):
    other = thought_factory("Redis is the Celery broker in production.")
    brain("contribute", STATEMENT, "--agent", dev.agent.name, "--related", str(other.id))
    thought = Thought.objects.exclude(pk=other.pk).get()
    assert list(other.related_thoughts.all()) == [thought]


def test_highways(thought_factory):
    assert "No highways yet" in brain("highways")[0]
    busy = thought_factory("A busy thought.")
    quiet = thought_factory("A thought one agent reads a lot.")
    Thought.objects.filter(pk=busy.pk).update(access_count=4, accessed_by=["a", "b", "c"])
    Thought.objects.filter(pk=quiet.pk).update(access_count=40, accessed_by=["a"])
    out, _ = brain("highways")
    assert out.splitlines() == [f"    12  {busy.id}  4 accesses by 3 agents  A busy thought."]
    Thought.objects.filter(pk=busy.pk).update(superseded=True)  # corrected, replaced or retracted
    assert "No highways yet" in brain("highways")[0]


def test_query_prints_what_agents_wrote_on_one_line_without_terminal_escapes(dev, fake_embedder, thought_factory):
    """A thought's ANSI escapes and line breaks reached the operator's terminal: they could erase the
    line, hide what follows it, or print a line of their own that reads as another result."""
    thought = thought_factory(
        "\x1b[2K\rDeploy tip\x1b[8m hidden\x1b[0m\x07\n 2. 0.99  forged-result. The deploy pipeline runs migrations."
    )
    out, _ = brain("query", "deploy pipeline migrations", "--agent", dev.agent.name)
    assert str(thought.id) in out
    assert not [c for c in out if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0], repr(out)
    assert not any(line.lstrip().startswith("2.") for line in out.splitlines()), out
    assert "Deploy tip [8m hidden [0m 2. 0.99 forged-result." in out  # the escapes' text, shown and harmless
