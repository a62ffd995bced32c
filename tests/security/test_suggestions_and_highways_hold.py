"""Attacks on the highways listing and on resolving correction suggestions concurrently.

- ``manage.py brain highways`` ranks thoughts by ``traffic = access_count × agents``; the counters
  it reads may sit at the top of their range, and the listing must still work.
- Two agents resolving two different suggestions of one thought at the same moment each get a
  clear answer, never a 500.
"""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command

from brain.models import Thought
from brain.services import pheromones
from brain.services.suggestions import suggestion_create
from brain.services.thoughts import thought_create
from tests.concurrency_support import row_locked, run_concurrently, wait_for_a_lock_wait
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db


def stored(space, content: str, **fields) -> Thought:
    return thought_create(
        space=space, content=content, contributor_id="t", contributor_name="t", embedding=fake_vector(content), **fields
    )


def test_brain_highways_survives_counters_at_the_top_of_their_range(agent_factory, dev, space, fake_embedder):
    """Attack: a thought whose ``access_count`` is COUNTER_MAX (reinforcement saturates there, and an
    import may carry it) read by three agents of the space. ``access_count × agents`` is 3e9, past
    PostgreSQL's integer: computed as one, ``manage.py brain highways`` fails with a DataError for
    the whole space (one row stops an operator's command for everyone).

    Expected: the command lists the highway with its traffic. SPEC 6: every counter stays in its
    formula's range; one bad row never stops a job for the others."""
    agent_factory("qa", name="qa-1")
    agent_factory("liaison", name="lead-1")
    thought = stored(space, "The deploy console lists every rollback of the last thirty days.")
    Thought.objects.filter(pk=thought.pk).update(
        access_count=pheromones.COUNTER_MAX, accessed_by=["dev-1", "qa-1", "lead-1"]
    )
    out = io.StringIO()
    call_command("brain", "highways", "--space", space.slug, stdout=out)
    assert f"{pheromones.COUNTER_MAX * 3}  {thought.pk}" in out.getvalue()
    assert "accesses by 3 agents" in out.getvalue()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("other_action", ["accept", "dismiss"])
def test_two_suggestions_of_one_thought_resolved_at_once_never_answer_500(
    agent_factory, space, fake_embedder, other_action
):
    """Attack (or just two agents working): a thought has two pending suggestions (two contradicting
    statements); one agent accepts one while another accepts (or dismisses) the other, at the same
    moment. Accepting supersedes the thought and closes its other pending suggestions; dismissing
    takes the thought's ``unverified`` flag off. Were the suggestion locked before the thought, each
    caller would hold one row the other needs and PostgreSQL would fail one of them with a deadlock.

    Expected: each call gets its own answer (201 accepted, 200 dismissed, or 409: the suggestion is
    no longer pending), never a 500; the accept wins or finds its suggestion closed, and one
    correction of the thought is live. SPEC 6: "bad input gets a 4xx ... never a 500"; concurrent
    accept/dismiss can't double-apply and each gets a clear answer."""
    first, second = agent_factory("qa", name="qa-1"), agent_factory("liaison", name="lead-1")
    old = stored(
        space,
        "The backup bucket keeps snapshots for seven days.",
        quality_flags=["unverified"],  # its contradictions are older than 14 days (SPEC 4.5)
    )
    suggestions = [
        suggestion_create(thought=old, statement=text, origin="contradiction_detector")[0]
        for text in ("The backup bucket keeps snapshots for thirty days.", "Backups are kept for ninety days.")
    ]

    def resolve(client, suggestion, action):
        return lambda: client.post(f"/api/v1/corrections/{suggestion.pk}/{action}", {}, format="json").status_code

    results: list = []
    # Both calls wait on the thought, then run as soon as it is free: as close to "at once" as it gets.
    with row_locked(Thought.objects.filter(pk=old.pk)):
        calls = [resolve(first, suggestions[0], "accept"), resolve(second, suggestions[1], other_action)]
        runner = threading.Thread(target=lambda: results.extend(run_concurrently(calls)))
        runner.start()
        wait_for_a_lock_wait(count=2)
    runner.join(60)
    assert 500 not in results and set(results) <= {200, 201, 409} and results[0] in (201, 409), results
    assert 201 in results, results
    live = Thought.objects.filter(thought_category="correction", superseded=False, supersedes__contains=[old.pk])
    assert live.count() == 1


@pytest.mark.django_db(transaction=True)
def test_accepting_a_suggestion_while_its_statement_is_retracted_never_answers_500(agent_factory, space, fake_embedder):
    """Attack (or just two agents working): thought X has a pending suggestion raised by thought Y (its
    contradicting statement, a near paraphrase of X). One agent accepts the suggestion while Y's author
    retracts Y, at the same moment. The retraction locks Y, then closes the suggestions Y raised; the
    accept locks the suggestion, supersedes X and flags the live thoughts repeating X's wrong fact
    ``contradicts_correction``, Y among them. Were the suggestion locked before Y, each would hold a
    row the other needs and PostgreSQL would fail one with a deadlock.

    Expected: the retraction succeeds (200); the accept wins (201) or finds the suggestion closed
    (409: its statement was withdrawn), never a 500. SPEC 6: "never a 500"; each concurrent caller
    gets a clear answer."""
    accepter, author = agent_factory("qa", name="qa-1"), agent_factory("dev", name="dev-1")
    wrong = "The backup bucket of the billing team keeps nightly snapshots for seven days in the eu storage region."
    right = "The backup bucket of the billing team keeps nightly snapshots for thirty days in the eu storage region."
    old = stored(space, wrong)
    statement = stored(space, right, agent=author.agent)
    suggestion, _ = suggestion_create(
        thought=old, statement=right, origin="contradiction_detector", contradicting_thought=statement
    )

    results: dict = {}

    def retract():
        response = author.post(f"/api/v1/thoughts/{statement.pk}/retract", {"reason": "wrong"}, format="json")
        results["retract"] = response.status_code

    def accept():
        results["accept"] = accepter.post(f"/api/v1/corrections/{suggestion.pk}/accept", {}, format="json").status_code

    # The retraction waits on its statement first, then the accept reaches it too.
    with row_locked(Thought.objects.filter(pk=statement.pk)):
        threads = [threading.Thread(target=retract), threading.Thread(target=accept)]
        threads[0].start()
        wait_for_a_lock_wait(count=1)
        threads[1].start()
        wait_for_a_lock_wait(count=2)
    for thread in threads:
        thread.join(60)
    assert results["retract"] == 200 and results["accept"] in (201, 409), results
