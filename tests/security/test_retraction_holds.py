"""Attacks on retraction and redaction through what a caller can write (SPEC 5 retract/redact, SPEC 6).

SPEC 6: "who wrote a thought and when come from the token and the clock, never from the body ... only
the operator's CLI restores other agents' thoughts, dates and markers from an export". A retraction's
record (who, when, why, whether the text was erased) is audit that Colony writes, and ``redact`` must
erase a leaked secret (docs/api.md, "Retraction").

Each test names the attack and the rule that holds instead.
"""

from __future__ import annotations

import json

import pytest

from brain.models import Thought
from tests import web_support

pytestmark = pytest.mark.django_db

ada = web_support.ada  # a fixture: a human member of the space, logged in on ``client``

MEMORY = "/api/v1/memory"
IMPORT = "/api/v1/thoughts/import"
SECRET = "The staging database password is hunter2-very-secret, use it for the migration."


def _import(client, item):
    return client.post(IMPORT, data=json.dumps([item]), content_type="application/json")


def test_an_imported_retraction_record_can_not_stop_a_humans_redaction(dev, space, fake_embedder, client, ada):
    """Attack: an agent imports a thought carrying a leaked secret with a forged retraction record
    (``context_metadata.retraction`` naming the human ``ada``, dated 2099, ``redacted: true``) and the
    ``retracted`` flag. The thought page said "Retracted by ada: reviewed by security" and hid the
    redact form; a human who redacted it anyway got 409 ALREADY_RETRACTED and the secret stayed.

    Rule: the retraction record is Colony's. An agent's import writes it again from the token and the
    clock (by the caller, now, not redacted while the text is there); whether a text is erased is read
    from what is stored, never from a record, so a human's redaction erases the secret."""
    response = _import(
        dev,
        {
            "content": SECRET,
            "quality_flags": ["retracted"],
            "superseded": True,
            "context_metadata": {
                "retraction": {
                    "by": "ada",
                    "by_kind": "human",
                    "at": "2099-01-01T00:00:00+00:00",
                    "reason": "reviewed by security",
                    "redacted": True,
                }
            },
        },
    )
    assert response.status_code == 201, response.content
    thought_id = response.json()["ids"][0]
    record = Thought.objects.get(pk=thought_id).context_metadata["retraction"]
    assert (record["by"], record["by_kind"]) == (dev.agent.name, "agent")
    assert not record["at"].startswith("2099") and "redacted" not in record
    page = client.get(f"/brain/thoughts/{thought_id}/").content.decode()
    assert "Retracted by ada" not in page, "a forged retraction record is shown as a human's"
    assert "Erase its text" in page  # the text is there: the page offers to erase it
    client.post(f"/brain/thoughts/{thought_id}/retract/", {"reason": "leaked secret", "redact": "on"})
    assert "hunter2" not in Thought.objects.get(pk=thought_id).content, "the human's redaction erased nothing"


def test_an_imported_retracted_flag_can_not_make_a_live_thought_unretractable(dev, space, fake_embedder, client, ada):
    """Attack: an agent imports a live thought (``superseded`` false) flagged ``retracted``. It stayed
    live, ranked first, and every retraction (the human's page, or the agent itself) answered 409
    ALREADY_RETRACTED and changed nothing.

    Rule: only a consistent state is imported: ``retracted`` goes with ``superseded`` true (400
    IMPORT_INVALID naming ``quality_flags``), a retraction record only with the flag; and "already
    retracted" is what a retraction leaves (superseded, the flag and Colony's record), so a live thought
    is retracted whatever flags it carries."""
    response = _import(
        dev, {"content": "Deploys go through the staging bastion at 10.0.0.9 as root.", "quality_flags": ["retracted"]}
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "IMPORT_INVALID" and error["lines"][0]["field"] == "quality_flags"
    forged = _import(
        dev, {"content": "Deploys go through the bastion.", "context_metadata": {"retraction": {"by": "ada"}}}
    )
    assert forged.status_code == 400, forged.content
    assert forged.json()["error"]["lines"][0]["field"] == "context_metadata.retraction"
    assert not Thought.objects.filter(space=space).exists()  # nothing stored

    # A live thought carrying the flag (an operator's restore keeps what a file says) is still retractable.
    live = Thought.objects.get(pk=_import(dev, {"content": "Deploys go through the staging bastion."}).json()["ids"][0])
    Thought.objects.filter(pk=live.pk).update(quality_flags=["retracted"])
    client.post(f"/brain/thoughts/{live.pk}/retract/", {"reason": "wrong and dangerous"})
    live.refresh_from_db()
    assert live.superseded, "a human could not retract the live thought"
    assert live.quality_flags == ["retracted"] and live.context_metadata["retraction"]["by_kind"] == "human"


def test_an_agents_own_retracted_thought_comes_back_retracted_from_its_export(dev, space, fake_embedder):
    """Attack surface: the round trip an import exists for. An agent exports its own retracted thought
    (Colony's export row carries the flag, ``superseded`` and the record) and imports it again.

    Rule: it is restored retracted (superseded, the flag, ranked last), its record written again as the
    importer's retraction at the server's time, the reason kept as the importer's words; a redacted
    one comes back erased (nothing left to erase: a second redaction is a 409)."""
    from brain.services.retraction import REDACTED_CONTENT
    from brain.transfer.export import thought_export_row

    kept = dev.post(MEMORY, {"prompt": SECRET, "store": True}, format="json").json()["trace"]["thought_id"]
    assert (
        dev.post(f"/api/v1/thoughts/{kept}/retract", {"reason": "stored by mistake"}, format="json").status_code == 200
    )
    erased = dev.post(
        MEMORY, {"prompt": "The relay token is relay-Kept-55, stored here by mistake; rotate it.", "store": True},
        format="json",
    ).json()["trace"]["thought_id"]  # fmt: skip
    redacted = dev.post(f"/api/v1/thoughts/{erased}/retract", {"reason": "a token", "redact": True}, format="json")
    assert redacted.status_code == 200, redacted.content
    rows = [thought_export_row(Thought.objects.get(pk=pk), [], embeddings=False) for pk in (kept, erased)]
    for row in rows:
        row.pop("id")  # the originals are still in this space: stored again under new ids

    response = dev.post(IMPORT, data=json.dumps(rows), content_type="application/json")
    assert response.status_code == 201, response.content
    restored, restored_erased = (Thought.objects.get(pk=pk) for pk in response.json()["ids"])
    assert restored.superseded and "retracted" in restored.quality_flags
    record = restored.context_metadata["retraction"]
    assert (record["by"], record["by_kind"], record["reason"]) == (dev.agent.name, "agent", "stored by mistake")
    assert "redacted" not in record and restored.context_metadata["imported"]["by"] == dev.agent.name
    assert restored_erased.content == REDACTED_CONTENT
    assert restored_erased.context_metadata["retraction"]["redacted"] is True
    again = dev.post(f"/api/v1/thoughts/{restored_erased.pk}/retract", {"reason": "x", "redact": True}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "ALREADY_RETRACTED"
    # The restored copy of the kept secret can still be erased by its author.
    erase = dev.post(f"/api/v1/thoughts/{restored.pk}/retract", {"reason": "a password", "redact": True}, format="json")
    assert erase.status_code == 200, erase.content
    assert "hunter2" not in Thought.objects.get(pk=restored.pk).content


def test_redacting_ones_own_short_thought_does_not_rewrite_other_agents_records(
    dev, agent_factory, space, fake_embedder
):
    """Attack: an agent stores a short phrase it expects in other agents' words ("billing pipeline",
    ``store: true``), then retracts it with ``redact``. The redaction erased every copy of that text in
    the space: another agent's query-log prompt and the contradicting statement of a pending suggestion
    that another agent raised against the attacker's own thought were rewritten to "[redacted]".

    Rule (docs/api.md: "Text an agent wrote in its own words elsewhere is not searched for"): an agent's
    redaction erases its own thought and the copies Colony made of it, not other agents' records that
    merely contain the same words."""
    from brain.models import CorrectionSuggestion, QueryLog
    from brain.services.suggestions import suggestion_create

    qa = agent_factory("qa", name="qa-1")
    asked = "how do we rotate the billing pipeline credentials safely"
    assert qa.post(MEMORY, {"prompt": asked, "contribute": False}, format="json").status_code == 200
    mine = dev.post(
        MEMORY, {"prompt": "Deploys of the billing pipeline run on Fridays at 5pm.", "store": True}, format="json"
    ).json()["trace"]["thought_id"]
    statement = "Deploys of the billing pipeline were moved to Tuesdays at 10am in March."
    suggestion, _ = suggestion_create(
        thought=Thought.objects.get(pk=mine), statement=statement, origin="judge", agent=qa.agent, session_id="s-qa"
    )
    bait = dev.post(MEMORY, {"prompt": "billing pipeline", "store": True}, format="json").json()["trace"]["thought_id"]
    # Another agent's kept answer (Idempotency-Key) lists both: the bait's preview is a copy of the bait,
    # the other source's preview is not.
    kept = qa.post(MEMORY, {"prompt": "billing pipeline deploys", "contribute": False}, format="json",
                   HTTP_IDEMPOTENCY_KEY="ask-1").json()["result"]["sources"]  # fmt: skip
    assert {bait, mine} <= {source["thought_id"] for source in kept}, kept
    response = dev.post(f"/api/v1/thoughts/{bait}/retract", {"reason": "secret", "redact": True}, format="json")
    assert response.status_code == 200, response.content
    prompts = set(QueryLog.objects.filter(agent=qa.agent).values_list("query_text", flat=True))
    assert prompts == {asked, "billing pipeline deploys"}, "another agent's prompts were rewritten"
    assert CorrectionSuggestion.objects.get(pk=suggestion.pk).statement == statement, "a suggestion was rewritten"
    replay = qa.post(MEMORY, {"prompt": "billing pipeline deploys", "contribute": False}, format="json",
                     HTTP_IDEMPOTENCY_KEY="ask-1")  # fmt: skip
    assert replay.get("Idempotent-Replayed") == "true"
    previews = {source["thought_id"]: source["content_preview"] for source in replay.json()["result"]["sources"]}
    assert "billing pipeline" not in previews[bait], "the redacted thought's preview stayed in a kept answer"
    assert previews[mine] == "Deploys of the billing pipeline run on Fridays at 5pm.", "another preview was rewritten"
