"""Concurrent writers evolving the same thoughts (SPEC 2.4 lineage, 2.5 corrections, 5 retraction, 6).

Real threads, each on its own connection, against the real PostgreSQL, through the API. After every
round the lineage invariant is checked: a superseded thought that is not retracted is live again or
has a live replacement reachable through ``refined_by`` / ``superseded_by`` (a retracted replacement
that was itself replaced carries the line on); every call got an answer in the error envelope, never
a 500 (a deadlock's victim is run again, or answered 409/503 ``DATABASE_CONFLICT``).

Each test names the race and what should happen instead.
"""

from __future__ import annotations

import pytest

from brain.models import CorrectionSuggestion, Thought
from brain.services.suggestions import suggestion_create
from tests.concurrency_support import never_500, offline, run_concurrently  # noqa: F401 - offline: a fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("offline")]

MEMORY = "/api/v1/memory"
ROUNDS = 20


# --- helpers -----------------------------------------------------------------------------------------


def store(client, prompt: str, **fields) -> str:
    """Store ``prompt`` (a memory call); the stored thought's id."""
    response = client.post(MEMORY, {"prompt": prompt, "store": True, **fields}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["trace"]["thought_id"]


def correct(client, thought_id: str, fact: str) -> str:
    response = client.post(f"/api/v1/thoughts/{thought_id}/correct", {"correct_fact": fact}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["correction"]["thought_id"]


def post(client, path: str, body: dict):
    """A call run in a thread: (status, body) so nothing of the client's state crosses threads."""

    def send():
        response = client.post(path, body, format="json")
        return response.status_code, response.json()

    return send


def retract(client, thought_id: str):
    return post(client, f"/api/v1/thoughts/{thought_id}/retract", {"reason": "withdrawn"})


def is_retracted(thought: Thought) -> bool:
    return "retracted" in (thought.quality_flags or [])


def orphans(space) -> list[str]:
    """The superseded, not retracted thoughts of ``space`` with no live replacement reachable through
    ``refined_by`` / ``superseded_by``: each described as "id -> pointers"."""
    rows = {t.pk: t for t in Thought.objects.filter(space=space)}
    lost = []
    for thought in rows.values():
        if not thought.superseded or is_retracted(thought):
            continue
        seen, frontier, found = set(), [thought.pk], False
        while frontier and not found:
            pk = frontier.pop()
            if pk in seen:
                continue
            seen.add(pk)
            row = rows[pk]
            if pk != thought.pk and not row.superseded:
                found = True
            frontier += [nxt for nxt in (row.refined_by_id, row.superseded_by_id) if nxt is not None]
        if not found:
            chain = [
                f"{pk}(retracted={is_retracted(rows[pk])}, superseded={rows[pk].superseded})"
                for pk in seen
                if pk != thought.pk
            ]
            lost.append(f"{thought.pk} -> {chain or 'nothing'}")
    return lost


# --- retractions racing retractions -------------------------------------------------------------------


def test_two_refiners_of_one_thought_retracted_at_once_leave_it_live_or_replaced(agent_factory, space):
    """Race: X is refined by K (agent A) and later by K2 (agent B), so X.refined_by = K2. A retracts K
    while B retracts K2, at the same moment.

    Instead of: K2's retraction hands X to the newest other refiner still standing, K, read without a
    lock while K's retraction is under way; K's retraction read the rows pointing at it (none: X
    pointed at K2) before that. Nothing makes them wait for each other, so X can end superseded,
    ``refined_by`` = the retracted K, nothing live in its place: served as a superseded thought with no
    replacement, never handed back.

    Expected: X is live again (or refined by something live); both retractions 200."""
    owner, a, b = agent_factory("dev"), agent_factory("dev"), agent_factory("qa")
    lost = []
    for n in range(ROUNDS):
        x = store(owner, f"Round {n}: the nightly export job writes its files to the reports bucket.")
        k = store(a, f"Round {n}: the nightly export job writes its files to the reports bucket in us-east.", refines=x)
        k2 = store(
            b, f"Round {n}: the nightly export job writes its files to the reports bucket in eu-west.", refines=x
        )
        assert str(Thought.objects.get(pk=x).refined_by_id) == k2
        results = run_concurrently([retract(a, k), retract(b, k2)], timeout=30)
        never_500(results)
        assert {status for status, _ in results} <= {200, 503}, results  # 503: a deadlock's victim
        lost += [f"round {n}: {orphan}" for orphan in orphans(space)]
        if lost:
            break
    assert not lost, lost


def test_a_correction_and_the_correction_that_replaced_it_retracted_at_once_leave_the_thought_live(
    agent_factory, space
):
    """Race: T is corrected by C1 (agent A), then by C2 (agent B), which supersedes T and C1
    (T.superseded_by = C1.superseded_by = C2). A retracts C1 while B retracts C2, at the same moment.

    Instead of: C1's retraction reads the rows C1 supersedes before it locks anything (none: T points
    at C2), then waits for C1's row, which C2's retraction holds while it hands T back to C1 (the
    correction still standing for it). Once it gets C1 it retracts it and hands back nothing: T ends
    superseded by the retracted C1, no correction standing for it and not live.

    Expected: T is live again (both corrections withdrawn) or superseded by a live correction."""
    owner, a, b = agent_factory("dev"), agent_factory("qa"), agent_factory("liaison")
    lost = []
    for n in range(ROUNDS):
        t = store(owner, f"Round {n}: the backup bucket keeps nightly snapshots for seven days.")
        c1 = correct(a, t, f"Round {n}: the backup bucket keeps nightly snapshots for thirty days.")
        c2 = correct(b, t, f"Round {n}: the backup bucket keeps nightly snapshots for ninety days.")
        assert str(Thought.objects.get(pk=c1).superseded_by_id) == c2
        results = run_concurrently([retract(a, c1), retract(b, c2)], timeout=30)
        never_500(results)
        assert {status for status, _ in results} <= {200, 503}, results  # 503: a deadlock's victim
        lost += [f"round {n}: {orphan}" for orphan in orphans(space)]
        if lost:
            break
    assert not lost, lost


def test_both_ends_of_a_refinement_chain_retracted_at_once_hand_the_first_thought_back(agent_factory, space):
    """Race: R1 (agent A) refines T (agent O), R2 (agent A) refines R1. A retracts R1 and R2 at once
    (two sessions).

    Expected (holds: both lock R1, so one waits for the other and reads what it left): T is live again
    whichever goes first, and exactly one retraction's ``live_again`` names it."""
    owner, a = agent_factory("dev"), agent_factory("qa")
    for n in range(ROUNDS):
        t = store(owner, f"Round {n}: the staging cluster restarts its workers every Sunday night.")
        r1 = store(a, f"Round {n}: the staging cluster restarts its workers every Sunday night at two.", refines=t)
        r2 = store(a, f"Round {n}: the staging cluster restarts its workers every Sunday night at three.", refines=r1)
        results = run_concurrently([retract(a, r1), retract(a, r2)], timeout=30)
        never_500(results)
        assert [status for status, _ in results] == [200, 200], results
        assert orphans(space) == [], n
        assert Thought.objects.get(pk=t).superseded is False, n
        # what the answers say is handed back: T once (by whichever retraction released it)
        handed_back = [pk for _, body in results for pk in body.get("live_again", [])]
        assert handed_back.count(t) == 1, (n, results)


# --- writes racing writes on one thought ----------------------------------------------------------------


def test_a_refinement_racing_the_retraction_of_its_sources_current_refiner_leaves_one_live_head(agent_factory, space):
    """Race: T (agent O) is refined by R1 (agent A). B refines T again (R2) while A retracts R1, at the
    same moment.

    Expected (holds: both lock T): both succeed; T is superseded with refined_by = R2 (live), whichever
    went first; R1 is retracted; nothing is left superseded without a live replacement."""
    owner, a, b = agent_factory("dev"), agent_factory("qa"), agent_factory("liaison")
    for n in range(ROUNDS):
        t = store(owner, f"Round {n}: the search index is rebuilt from the replica every night.")
        r1 = store(a, f"Round {n}: the search index is rebuilt from the replica every night at one.", refines=t)
        refine = post(
            b, MEMORY, {"prompt": f"Round {n}: the search index is rebuilt from the replica every night at four.",
                        "refines": t},
        )  # fmt: skip
        results = run_concurrently([retract(a, r1), refine], timeout=30)
        never_500(results)
        assert [status for status, _ in results] == [200, 200], results
        r2 = results[1][1]["trace"]["thought_id"]
        row = Thought.objects.get(pk=t)
        assert row.superseded and str(row.refined_by_id) == r2, n
        assert orphans(space) == [], n


def test_a_correction_racing_a_refinement_of_the_same_thought(agent_factory, space):
    """Race: A corrects T (agent O) while B refines T, at the same moment.

    Expected (holds: both lock T): both stored; T is superseded by the correction and refined by the
    refinement, both live; the correction's ``superseded_count`` is 1, what the database has."""
    owner, a, b = agent_factory("dev"), agent_factory("qa"), agent_factory("liaison")
    for n in range(ROUNDS):
        t = store(owner, f"Round {n}: the billing report is mailed to finance every Monday.")
        corrected = post(
            a, f"/api/v1/thoughts/{t}/correct", {"correct_fact": f"Round {n}: the billing report goes out on Tuesdays."}
        )
        refine = post(
            b, MEMORY, {"prompt": f"Round {n}: the billing report is mailed to finance every Monday at nine.",
                        "refines": t},
        )  # fmt: skip
        results = run_concurrently([corrected, refine], timeout=30)
        never_500(results)
        assert [status for status, _ in results] == [201, 200], results
        correction = results[0][1]
        assert correction["superseded_count"] == 1
        row = Thought.objects.get(pk=t)
        assert str(row.superseded_by_id) == correction["correction"]["thought_id"]
        assert str(row.refined_by_id) == results[1][1]["trace"]["thought_id"]
        assert orphans(space) == [], n


@pytest.mark.parametrize("other", ["refine", "retract"])
def test_accepting_a_suggestion_while_its_thought_is_refined_or_retracted(agent_factory, space, other):
    """Race: T (agent O) has a pending correction suggestion. A accepts it while B refines T (or O
    retracts T), at the same moment.

    Expected (holds: the accept locks T before the suggestion, as the refinement and the retraction
    lock T before closing T's suggestions): the accept wins (201, a live correction supersedes T, the
    suggestion accepted with it) or finds the suggestion closed (409 CONFLICT, no correction stored);
    the other call succeeds; never a 500, and the suggestion is never left pending on a superseded T."""
    owner, a, b = agent_factory("dev"), agent_factory("qa"), agent_factory("liaison")
    for n in range(ROUNDS):
        t = store(owner, f"Round {n}: the audit log is kept for ninety days on the archive disk.")
        suggestion, _ = suggestion_create(
            thought=Thought.objects.get(pk=t),
            statement=f"Round {n}: the audit log is kept for one year.",
            origin="contradiction_detector",
        )
        accept = post(a, f"/api/v1/corrections/{suggestion.pk}/accept", {})
        if other == "refine":
            prompt = f"Round {n}: the audit log is kept for ninety days on the archive disk in the vault."
            rival = post(b, MEMORY, {"prompt": prompt, "refines": t})
        else:
            rival = retract(owner, t)
        results = run_concurrently([accept, rival], timeout=30)
        never_500(results)
        (accepted, body), (rival_status, _) = results
        assert rival_status == 200, results
        assert accepted in (201, 409), results
        suggestion.refresh_from_db()
        corrections = Thought.objects.filter(space=space, thought_category="correction", supersedes__contains=[t])
        if accepted == 201:
            assert suggestion.status == "accepted" and suggestion.correction_id is not None
            assert [str(c.pk) for c in corrections] == [str(suggestion.correction_id)]
            assert not corrections.get().superseded
            assert Thought.objects.get(pk=t).superseded_by_id == suggestion.correction_id
        else:
            assert body["error"]["code"] == "CONFLICT" and suggestion.status == "superseded", body
            assert not corrections.exists()
        assert not CorrectionSuggestion.objects.filter(thought__superseded=True, status="pending").exists()
        assert orphans(space) == [], n


def test_a_consolidation_of_a_and_b_racing_one_of_b_and_c(agent_factory, space):
    """Race: A consolidates thoughts P and Q while B consolidates Q and R (and, to close a ring, C
    consolidates R and P), at the same moment.

    Expected (holds: sources are locked in id order): all stored, no deadlock answered as an error;
    each source is superseded by the newest consolidation naming it, and each consolidation inherited
    max(1, avg·0.5) of the weights it read."""
    owner = agent_factory("dev")
    agents = [agent_factory("qa"), agent_factory("liaison"), agent_factory("dev")]
    for n in range(ROUNDS):
        words = ("deploys", "rollbacks", "migrations")
        ids = [store(owner, f"Round {n}: staging {word} run from the release pipeline after review.") for word in words]
        Thought.objects.filter(pk__in=ids).update(pheromone_weight=4.0)
        pairs = [(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[0])]
        calls = [
            post(client, MEMORY, {"prompt": f"Round {n}: staging {words[i]} and {words[(i + 1) % 3]} run from the "
                                  "release pipeline after review.", "consolidates": list(pair)})
            for i, (client, pair) in enumerate(zip(agents, pairs, strict=True))
        ]  # fmt: skip
        results = run_concurrently(calls, timeout=30)
        never_500(results)
        assert [status for status, _ in results] == [200, 200, 200], results
        made = {result[1]["trace"]["thought_id"]: pair for result, pair in zip(results, pairs, strict=True)}
        rows = {str(t.pk): t for t in Thought.objects.filter(pk__in=[*made, *ids])}
        for source in ids:
            naming = [pk for pk, pair in made.items() if source in pair]
            newest = max(naming, key=lambda pk: (rows[pk].created_at, pk))
            assert rows[source].superseded and str(rows[source].refined_by_id) == newest, n
        for pk in made:
            assert 2.0 <= rows[pk].pheromone_weight <= 2.1, rows[pk].pheromone_weight
        assert orphans(space) == [], n
