"""Queued work acts on the world as it is when the job runs, not as it was when it was queued
(SPEC 1 Celery, 2.5, 2.6, 4.5, 6).

Colony's jobs (embedding a thought, contradiction detection, turn scoring, the hourly decay) run after
the request that queued them. Celery delivers at least once (``task_acks_late``, retries with backoff),
and between the queueing and the run a thought may be redacted, retracted or superseded, its text or
its corrected fact edited by staff, its agent deactivated, its space deleted. Each test captures a job
(or calls it with the arguments its request queued), changes the world, runs it, and checks what it
leaves: no erased text back in a cache, no suggestion a reviewer already dismissed raised again, none in
a revoked agent's name, no hourly step applied twice, no vector of a text that is gone.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from django.db import OperationalError

from brain import embedding, jobs
from brain.choices import SuggestionStatus
from brain.judging import JudgeUnavailable, Verdict
from brain.judging import embedding as judge_embedding
from brain.judging.embedding import EmbeddingJudge
from brain.models import CorrectionSuggestion, Thought
from brain.services import contradictions, pheromones
from brain.services.retraction import REDACTED_CONTENT, thought_retract
from brain.services.suggestions import suggestion_dismiss
from config.celery import app as celery_app
from core.models import Agent
from quality import jobs as quality_jobs
from quality.models import TurnLog
from tests import web_support
from tests.conftest import fake_vector
from tests.security import support
from tests.security.support import remember, store

pytestmark = pytest.mark.django_db
boss = support.boss

TOKEN, SECRET = support.LEAKED, support.LEAKED_NOTE
TOPIC = "deploy-keys"
HONEST_FACT = "The production deploy key is rotated every Monday by the ops bot and kept in the vault."
OTHER_FACT = "The staging deploy key is rotated every Friday by the ops bot and kept in the vault."
CLAIM = "The production deploy key is never rotated and is kept in a text file on the bastion host."


def _human_redacts(space, thought) -> None:
    """Staff press "retract and redact" on the thought page (another connection, in production)."""
    thought_retract(space=space, thought_id=thought.pk, reason="it holds a password", user_name="ada", redact=True)


class Contradicts:
    """A judge that finds every pair contradicting (0.9): the detector's part is what is tested."""

    name = "contradicts"

    def contradicts(self, a, b):
        return Verdict(True, 0.9, "they disagree")


def _fake_model(monkeypatch, on_embed=None):
    """The real ``embed_many`` (its normalisation and its query cache) over a deterministic model;
    ``on_embed(texts)`` runs inside the model call, as another connection's commit would land then."""

    class FakeModel:
        def embed(self, texts, batch_size=64):
            if on_embed is not None:
                on_embed(texts)
            return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "backend", lambda: "onnx")
    monkeypatch.setattr(embedding, "_onnx_model", lambda: FakeModel())


# --- contradiction detection: a retry after a reviewer's decision ------------------------------------


def test_a_contradiction_a_reviewer_dismissed_is_not_raised_again_by_the_jobs_retry(agent_factory, space, monkeypatch):
    """Attack: mallory stores a claim in a busy topic; its ``detect_contradictions`` job raises a pending
    suggestion against honest's fact F, then the judge times out on the next candidate
    (``JudgeUnavailable``): Celery retries the whole job 10 s to 10 min later (``autoretry_for``). In
    that window a human reviews the suggestion on F and dismisses it (F stands). The retry judges every
    candidate again and ``suggestion_create`` reuses only a PENDING suggestion: the dismissed one comes
    back as a new pending suggestion on F (the same statement), in the reviewers' queue and in
    mallory's ``pending_corrections``, and after 14 days it counts toward F's ``unverified`` flag. The
    same happens when the message is redelivered (acks_late, a worker lost) or ``embed_missing``
    re-runs the check.

    Without the rule: F carries a new pending suggestion with the dismissed statement.

    Rule (SPEC 4.5; the job's docstring: "safe to run twice"): a retried or redelivered check raises
    nothing a reviewer already resolved: a suggestion on the same thought from the same contradicting
    thought that was dismissed is not raised again.
    """
    mallory = agent_factory("dev", name="mallory").agent
    honest = store(space, HONEST_FACT, topic=TOPIC)
    other = store(space, OTHER_FACT, topic=TOPIC)
    claim = store(space, CLAIM, agent=mallory, topic=TOPIC)

    class TimesOutOnce(Contradicts):
        calls = 0

        def contradicts(self, a, b):
            TimesOutOnce.calls += 1
            if TimesOutOnce.calls == 2:  # the first candidate's suggestion is raised; the judge then times out
                raised = CorrectionSuggestion.objects.get(contradicting_thought=claim, status=SuggestionStatus.PENDING)
                suggestion_dismiss(suggestion=raised, resolved_by="ada", reason="checked: it stands")
                raise JudgeUnavailable("the judge's endpoint timed out")
            return super().contradicts(a, b)

    monkeypatch.setattr(contradictions, "get_judge", lambda name=None: TimesOutOnce())
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", False)  # retries run as a worker's
    with contextlib.suppress(Exception):
        jobs.detect_contradictions.apply(args=[str(claim.pk)])

    assert TimesOutOnce.calls >= 3, "the probe's retry did not run"
    dismissed = CorrectionSuggestion.objects.get(contradicting_thought=claim, status=SuggestionStatus.DISMISSED)
    again = CorrectionSuggestion.objects.filter(
        thought_id=dismissed.thought_id, statement=dismissed.statement, status=SuggestionStatus.PENDING
    )
    assert dismissed.thought_id in (honest.pk, other.pk)
    assert not again.exists(), "the contradiction a reviewer dismissed was raised again, pending, by the job's retry"


# --- contradiction detection: a revoked agent ---------------------------------------------------------


def test_a_contradiction_check_queued_before_its_agent_was_deactivated_raises_nothing_in_its_name(
    agent_factory, space, monkeypatch
):
    """Attack: mallory (compromised) stores claims that contradict her teammates' facts; each queues a
    ``detect_contradictions`` job. The operator deactivates mallory (her token stops at once), but the
    jobs queued before run afterwards (a backlog, a retry): each raises a pending suggestion with
    ``agent=mallory``, her statement, against a teammate's fact, counted as her report (one agent's
    pending suggestion per thought) and listed for reviewers as new. The quality loop refuses exactly
    this ("A revoked agent acts no more": ``quality.services.scoring.turn_score`` checks the agent under a
    share lock before raising); the detector does not look at the agent at all.

    Without the rule: a new pending suggestion in the deactivated agent's name.

    Rule (SPEC 6, "no caller acts as someone else" / a revoked identity acts no more): a check whose
    thought's agent is deactivated (or deleted) by the time it runs raises no suggestion.
    """
    mallory = agent_factory("dev", name="mallory").agent
    store(space, HONEST_FACT, topic=TOPIC)
    claim = store(space, CLAIM, agent=mallory, topic=TOPIC)
    Agent.objects.filter(pk=mallory.pk).update(active=False)  # the operator shuts the door

    monkeypatch.setattr(contradictions, "get_judge", lambda name=None: Contradicts())
    jobs.detect_contradictions(str(claim.pk))

    raised = CorrectionSuggestion.objects.filter(agent=mallory, status=SuggestionStatus.PENDING)
    assert not raised.exists(), f"{raised.count()} pending suggestion(s) raised in the deactivated agent's name"


# --- contradiction detection: the thought left the world before its job ran --------------------------


def _retract(client, thought_id):
    response = client.post(f"/api/v1/thoughts/{thought_id}/retract", {"reason": "wrong"}, format="json")
    assert response.status_code == 200, response.content


def _refine(client, thought_id):
    remember(client, CLAIM.replace("text file", "plain text file"), topic=TOPIC, refines=thought_id)


def _correct(client, thought_id):
    response = client.post(
        f"/api/v1/thoughts/{thought_id}/correct",
        {"correct_fact": "The production deploy key is rotated weekly.", "topic": TOPIC},
        format="json",
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("change", [_retract, _refine, _correct], ids=["retracted", "refined", "corrected"])
def test_a_contradiction_check_of_a_thought_withdrawn_before_it_ran_raises_nothing(
    agent_factory, space, fake_embedder, monkeypatch, change
):
    """Attack: an agent stores a claim contradicting a fact (its check is queued), then withdraws it
    before the worker gets to it: retracts it, refines it into another wording, or (another agent)
    corrects it. The queued job then runs with the id it was given.

    Without the rule: a suggestion against the fact quoting a claim nobody is served any more, which,
    accepted, stores a withdrawn statement as the correct fact.

    Rule (SPEC 4.5; ``suggestions_close_superseded``): a check of a superseded or retracted thought
    raises nothing and ends cleanly (no exception Celery would retry)."""
    author = agent_factory("dev", name="author")
    other = agent_factory("qa", name="qa-1")
    remember(other, HONEST_FACT, topic=TOPIC)
    claim = remember(author, CLAIM, topic=TOPIC)
    change(other if change is _correct else author, claim)  # a correction is another agent's

    monkeypatch.setattr(contradictions, "get_judge", lambda name=None: Contradicts())
    assert jobs.detect_contradictions(claim) == 0
    assert not CorrectionSuggestion.objects.filter(contradicting_thought_id=claim, status=SuggestionStatus.PENDING)


# --- turn scoring: the author restates its claim before the report is scored --------------------------


def test_a_contradiction_reported_before_the_author_refined_its_claim_reaches_the_new_version(
    agent_factory, space, fake_embedder, enqueued, django_capture_on_commit_callbacks
):
    """Attack: qa's session is shown mallory's claim L; qa's turn reports L contradicted (explicit
    ``contradicted_ids``): 202, ``score_turn`` queued. Before the worker scores it (a backlog, a judge
    retry of an earlier turn), mallory restates L with one word changed (``refines``: her own thought).
    A refinement made AFTER the scoring carries qa's pending suggestion to the new version and the new
    version inherits L's scores (``lineage_supersede``, ``quality_inherited``). Made BEFORE it, the job
    finds L superseded: it steps the EMAs of L, a thought nobody is served any more, and
    ``_raise_suggestion`` raises nothing ("already replaced"). The contradiction is gone: no suggestion
    for a reviewer, the live version's contradiction score untouched, nothing to flag ``unverified``.

    Without the rule: no pending suggestion on L or its new version; the new version's
    ``contradiction_score`` is still null.

    Rule (SPEC 4.4, 4.5; "only a correction starts a fact afresh" for its author): a queued report lands
    where the same report would have landed had it been scored at once: on the author's live version
    of the claim (pending suggestion, EMA step)."""
    from tests.quality_support import make_query_log, new_session

    mallory, qa = agent_factory("dev", name="mallory"), agent_factory("qa", name="qa-1")
    fact = "Staging deploys run the database migrations before the web workers restart."
    claim = remember(mallory, fact)
    session = new_session()
    make_query_log(space, session, [Thought.objects.get(pk=claim)], agent=qa.agent)
    with django_capture_on_commit_callbacks(execute=True):
        answer = qa.post(
            "/api/v1/turns",
            {
                "session_id": session,
                "turn_id": "t1",
                "user_prompt": "Deploy staging.",
                "assistant_response": "Staging deploys do not migrate the database before the workers restart.",
                "contradicted_ids": [claim],
            },
            format="json",
        )
    assert answer.status_code == 202, answer.content
    assert enqueued == [answer.json()["turn_log_id"]], "the probe's scoring job was not queued"

    again = remember(mallory, fact.replace("restart", "come back"), refines=claim)
    quality_jobs.score_turn(enqueued[0])

    live = Thought.objects.get(pk=again)
    pending = CorrectionSuggestion.objects.filter(
        thought_id__in=[claim, again], agent=qa.agent, status=SuggestionStatus.PENDING
    )
    assert pending.exists(), "qa's reported contradiction raised no suggestion: the author's refinement erased it"
    assert live.contradiction_score is not None, "the live version never took qa's contradiction"


# --- caches refilled with an erased text by a job running across the redaction -----------------------


def test_an_embedding_job_across_a_redaction_leaves_the_secret_in_the_query_cache(space, monkeypatch):
    """Attack: an agent stores a note holding a password without a request-time vector; its
    ``embed_thought`` job reads the text and runs the model (seconds on a busy worker). Staff redact the
    note meanwhile: the redaction drops the row's vector and discards the text from this process's
    query cache (``embedding.query_cache.discard``). The model call then returns and ``embed_many``
    PUTS the password's vector into the cache, keyed by the whole note (a single text is cached), after
    the discard: the row is safe (the job re-checks the content), the cache is not, and keeps the note
    for the life of the worker.

    Without the rule: a query-cache key holding the password after the redaction and the follow-up job.

    Rule (SPEC 5 retract ``redact``, 6): no copy of an erased text survives in a cache, whatever order the
    job and the redaction land in (the job caches nothing it did not store, or the cache re-checks)."""
    embedding.query_cache.clear()
    try:
        thought = store(space, SECRET, vector=None)
        landed = []

        def redaction_lands(texts):
            if not landed and any(TOKEN in text for text in texts):
                landed.append(True)
                _human_redacts(space, thought)

        _fake_model(monkeypatch, redaction_lands)
        jobs.embed_thought(str(thought.pk))
        jobs.embed_thought(str(thought.pk))  # the job the redaction queued on commit

        stored = Thought.objects.get(pk=thought.pk)
        assert landed and stored.content == REDACTED_CONTENT, "the probe's redaction did not land"
        assert np.allclose(stored.embedding, fake_vector(REDACTED_CONTENT))
        kept = [key[1] for key in embedding.query_cache._items if TOKEN in key[1]]
        assert kept == [], f"the query cache holds the erased text after the redaction: {kept}"
    finally:
        embedding.query_cache.clear()


def test_a_contradiction_job_across_a_redaction_puts_the_secret_back_in_the_judges_cache(space, monkeypatch):
    """Attack: an agent stores a note holding a password in a busy topic; its ``detect_contradictions``
    job hands the offline judge the stored vectors (``vectors_remember``) and judges the note against
    each candidate. Staff redact the note while the first pair is judged: the redaction forgets the
    note's text in the judge's cache (``vectors_forget``). The job goes on with the text it read before:
    for the next candidates ``EmbeddingJudge._vectors`` misses the note, embeds it again and stores it
    back under the whole note, for the life of the worker (up to 4096 texts).

    Without the rule: a key of ``brain.judging.embedding._VECTOR_CACHE`` holding the password after the
    redaction.

    Rule (SPEC 5 retract ``redact``, 6): no copy of an erased text survives in a cache; a job running
    across a redaction stops using the text (or caches nothing after it)."""
    judge_embedding._VECTOR_CACHE.clear()
    try:
        _fake_model(monkeypatch)
        for n in range(3):
            store(space, f"The production database password is rotated by the deploy script, note {n}.", topic=TOPIC)
        note = store(space, SECRET, topic=TOPIC)

        class RedactedMeanwhile(EmbeddingJudge):
            landed = False

            def contradicts(self, a, b):
                if not RedactedMeanwhile.landed:
                    RedactedMeanwhile.landed = True
                    _human_redacts(space, note)
                return super().contradicts(a, b)

        monkeypatch.setattr(contradictions, "get_judge", lambda name=None: RedactedMeanwhile())
        jobs.detect_contradictions(str(note.pk))

        assert RedactedMeanwhile.landed and Thought.objects.get(pk=note.pk).content == REDACTED_CONTENT
        kept = [text for text in judge_embedding._VECTOR_CACHE if TOKEN in text]
        assert kept == [], f"the judge's cache holds the erased text after the redaction: {kept}"
    finally:
        judge_embedding._VECTOR_CACHE.clear()


@pytest.mark.parametrize("erased", ["the note", "a candidate"])
def test_a_contradiction_job_sends_no_judge_a_text_redacted_while_it_ran(space, monkeypatch, erased):
    """Attack: the same job as above, with a judge that reads texts (an LLM judge sends each pair to its
    endpoint). Staff redact the note (or one of the candidates it is judged against) while the first
    pair is judged. The job goes on with the texts it read before the redaction.

    Without the rule: every later pair still hands the judge the erased text: the password leaves the
    server after staff erased it.

    Rule (SPEC 5 retract ``redact``): once a redaction commits, no judge is given the erased text; the job
    reads each pair again before judging it and leaves out a thought that changed."""
    _fake_model(monkeypatch)
    candidates = [
        store(space, f"The production database password is rotated by the deploy script, note {n}.", topic=TOPIC)
        for n in range(3)
    ]
    if erased == "the note":
        note = store(space, SECRET, topic=TOPIC)
        targets = [note]
    else:  # every candidate holds the secret: whichever comes first, the others are judged after
        note = store(space, "The production database password is never rotated by the deploy script.", topic=TOPIC)
        targets = candidates
        for n, candidate in enumerate(candidates):
            Thought.objects.filter(pk=candidate.pk).update(content=f"{SECRET} Copy {n}.")

    class Reader(EmbeddingJudge):
        pairs: list = []

        def contradicts(self, a, b):
            if not Reader.pairs:
                for target in targets:
                    _human_redacts(space, target)
            Reader.pairs.append((a, b))
            return super().contradicts(a, b)

    monkeypatch.setattr(contradictions, "get_judge", lambda name=None: Reader())
    jobs.detect_contradictions(str(note.pk))

    assert {t.content for t in Thought.objects.filter(pk__in=[t.pk for t in targets])} == {REDACTED_CONTENT}
    assert Reader.pairs, "the job judged nothing"
    late = [pair for pair in Reader.pairs[1:] if any(TOKEN in text for text in pair)]
    assert late == [], f"{len(late)} pairs judged after the redaction still carry the erased text"


# --- staff edit a correction's wrong fact: its vector follows -----------------------------------------


def test_an_admin_edit_of_a_corrections_wrong_fact_does_not_keep_the_old_facts_vector(
    agent_factory, space, fake_embedder, client, boss, django_capture_on_commit_callbacks
):
    """Attack: a correction C says "It is wrong that <W1>; correct: <R>". Staff open C in the admin and fix
    its ``corrected_fact`` to the wrong fact actually circulating, W2 (content unchanged). The admin's
    ``save_model`` re-embeds only when ``content`` changed: no job is queued, and C keeps
    ``corrected_fact_embedding`` = the vector of W1, a text C no longer holds. The re-contamination guard
    compares every later contribution with that vector: a note repeating W2 passes unflagged, one
    repeating W1 is flagged and told W1 was corrected. ``embed_missing`` never sees it (it looks only at
    ``embedding`` null).

    Without the rule: after the save and every job it queued, C's ``corrected_fact_embedding`` is W1's.

    Rule (SPEC 2.5: a later contribution similar to a correction's ``corrected_fact`` is flagged): a
    vector always describes the text stored beside it; an edit of ``corrected_fact`` drops the old
    vector and queues its re-computation, as an edit of ``content`` does."""
    dev = agent_factory("dev", name="dev-1")
    wrong1 = "The billing export runs every night at two in the morning from the old cron host."
    wrong2 = "The billing export runs every hour from the shared jenkins runner in the staging cluster."
    old = remember(dev, wrong1, topic="billing")
    response = dev.post(
        f"/api/v1/thoughts/{old}/correct",
        {"correct_fact": "The billing export runs once a week on Sunday from the scheduler service."},
        format="json",
    )
    assert response.status_code == 201, response.content
    correction = Thought.objects.get(pk=response.json()["correction"]["thought_id"])
    assert np.allclose(correction.corrected_fact_embedding, fake_vector(wrong1)), "the probe's correction has no vector"

    url = f"/admin/brain/thought/{correction.pk}/change/"
    data = web_support.admin_form_data(client.get(url))
    data["corrected_fact"] = wrong2
    with django_capture_on_commit_callbacks(execute=True):
        saved = client.post(url, data, follow=True)
    assert saved.redirect_chain, saved.context["adminform"].form.errors
    jobs.embed_missing()

    stored = Thought.objects.get(pk=correction.pk)
    assert stored.corrected_fact == wrong2
    assert stored.corrected_fact_embedding is None or not np.allclose(
        stored.corrected_fact_embedding, fake_vector(wrong1)
    ), "the correction keeps the vector of a wrong fact it no longer states"


# --- the hourly decay, retried ------------------------------------------------------------------------


def test_an_hourly_decay_retried_after_a_lost_connection_decays_each_thought_once(space, other_space, monkeypatch):
    """Attack (or just a database failover): ``pheromone_decay`` decays space by space, each batch its own
    commit. The connection drops in the second space (``OperationalError``, which ``_space_isolated``
    lets up "for the job's retry"): Celery retries the WHOLE job 30 s later (``autoretry_for``), and
    the first space, already committed, decays again: ``w·0.995²`` in one hour. The same with a
    redelivered message (acks_late after a worker was lost, or the hard time limit). Repeated failovers
    (three retries) bury every idle thought of the spaces that come first.

    Without the rule: the first space's idle thought weighs 1.0·0.995² after one hourly run.

    Rule (SPEC 2.6: decay hourly, ``max(0.1, w·0.995)``): one hourly step per thought per hour, however
    often the job runs for that hour (a retry or redelivery resumes, it doesn't decay again)."""
    import datetime as dt

    from django.utils import timezone

    first, second = sorted([space, other_space], key=lambda s: s.pk)
    a = store(first, "The first space's runbook lists the restart order of the queue workers.")
    b = store(second, "The second space's runbook lists the restart order of the web workers.")
    idle = timezone.now() - dt.timedelta(hours=3)
    Thought.objects.filter(pk__in=[a.pk, b.pk]).update(created_at=idle, last_accessed=idle, pheromone_weight=1.0)

    real, dropped = pheromones._decay_space, []

    def decay_space(*, space, cutoff, batch_size):
        if space.pk == second.pk and not dropped:
            dropped.append(True)
            raise OperationalError("server closed the connection unexpectedly")
        return real(space=space, cutoff=cutoff, batch_size=batch_size)

    monkeypatch.setattr(pheromones, "_decay_space", decay_space)
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", False)  # retries run as a worker's
    jobs.pheromone_decay.apply()

    assert dropped, "the probe's failover did not happen"
    assert Thought.objects.get(pk=b.pk).pheromone_weight == pytest.approx(0.995), "the second space did not decay"
    weight = Thought.objects.get(pk=a.pk).pheromone_weight
    assert weight == pytest.approx(0.995), f"one hourly run decayed the first space's thought to {weight}"


# --- jobs whose objects vanished -----------------------------------------------------------------------


def test_jobs_whose_rows_were_deleted_before_they_ran_end_cleanly(space, agent_factory, monkeypatch):
    """Attack (or just staff's clean-up): a thought and a turn have jobs queued (``embed_thought``, then
    ``detect_contradictions``, and ``score_turn``); staff delete the thought in the admin and the turn
    expires (or is deleted) before the worker gets to them. A job that raised on the missing row would be
    retried by Celery for nothing (8 times with backoff) or fail loudly, and one that wrote would bring
    back rows that are gone.

    Rule (SPEC 6: one bad row never stops a job): each job finds nothing, ends with a result and no
    exception, and writes nothing back."""
    agent = agent_factory("dev", name="gone-dev").agent
    thought = store(space, "A note about the deploy order that staff deleted.", agent=agent, vector=None)
    turn = TurnLog.objects.create(
        space=space, agent=agent, agent_name=agent.name, session_id="s1", turn_id="t1", injected_from="none"
    )
    ids = (str(thought.pk), str(turn.pk))
    Thought.objects.filter(pk=thought.pk).delete()
    TurnLog.objects.filter(pk=turn.pk).delete()

    monkeypatch.setattr(contradictions, "get_judge", lambda name=None: Contradicts())
    assert jobs.embed_thought(ids[0]) is False
    assert jobs.detect_contradictions(ids[0]) == 0
    assert quality_jobs.score_turn(ids[1])["already_scored"] is True
    assert not Thought.objects.filter(pk=thought.pk).exists()
    assert not TurnLog.objects.filter(pk=turn.pk).exists()
    assert not CorrectionSuggestion.objects.exists()
