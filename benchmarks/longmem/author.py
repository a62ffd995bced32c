"""Write the long-conversation benchmark's data: ``python -m benchmarks.longmem.author``.

A seeded, deterministic generator. Each conversation is a small world (a team of people and agents,
four workstreams, sixteen dated sessions over about three months). Hand-written storylines are placed
into the sessions (a proposal and who made it, options listed and then chosen by reference, a value
that is "same as last time", a change of owner that decides who signs something off, an absence that
overlaps a demo...), and a large bank of hand-written chatter fills the sessions between them, so
that most turns are short and many are not self-contained. Every question is written with its
evidence: the ids of every turn needed to answer it.

No-answer prompts are drawn from the same templates with combinations the conversation never uses
(a problem never raised for that workstream, an event that never happened to it, a decision never
discussed, another team's workstream, a facet such as a budget that no turn mentions), so they share
the conversation's vocabulary and are plausible for the team, but no turn answers them.

Edit this file, never the JSONL files; ``tests/test_retrieval_longmem_dataset.py`` checks they match.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
SEED = 69
SESSIONS = 16
TURNS_PER_SESSION = (26, 30)
#: The dev split's conversations; the others (m02, m04, m06) are the test split.
DEV = ("m01", "m03", "m05")
NOANSWER_PER_CONVERSATION = 26

# --- the worlds -------------------------------------------------------------------------------------
# Workstreams: (name used in text, a short alias used in chatter and replies).
WORLDS = [
    {
        "title": "Payments platform: refunds, payouts and the card tokenizer",
        "start": "2026-01-05",
        "people": [
            ("Priya Raman", "human", "pdsa"),
            ("Jonas Weber", "human", "dev"),
            ("Ledger", "agent", "pdsa"),
            ("Anvil", "agent", "dev"),
            ("Sieve", "agent", "qa"),
            ("Relay", "agent", "liaison"),
        ],
        "ws": [
            ("refund service", "refunds"),
            ("payout batch", "payouts"),
            ("card tokenizer", "the tokenizer"),
            ("ledger export", "the export"),
        ],
    },
    {
        "title": "Search team: autocomplete, reindexing and ranking",
        "start": "2026-01-12",
        "people": [
            ("Marta Kowalski", "human", None),
            ("Dev Anand", "human", "dev"),
            ("Compass", "agent", "pdsa"),
            ("Lathe", "agent", "dev"),
            ("Probe", "agent", "qa"),
            ("Herald", "agent", "liaison"),
        ],
        "ws": [
            ("query autocomplete", "autocomplete"),
            ("reindex job", "the reindex"),
            ("ranking service", "ranking"),
            ("synonym list", "synonyms"),
        ],
    },
    {
        "title": "Mobile team: release train, push and offline sync",
        "start": "2026-02-02",
        "people": [
            ("Aiko Tanaka", "human", "pdsa"),
            ("Rafael Costa", "human", "qa"),
            ("Beacon", "agent", "pdsa"),
            ("Rivet", "agent", "dev"),
            ("Gauge", "agent", "qa"),
            ("Envoy", "agent", "liaison"),
        ],
        "ws": [
            ("iOS release train", "the train"),
            ("push notifications", "push"),
            ("offline sync", "sync"),
            ("login screen", "login"),
        ],
    },
    {
        "title": "Data platform: events pipeline, warehouse loader and schema registry",
        "start": "2026-01-19",
        "people": [
            ("Sofia Lindgren", "human", None),
            ("Kwame Mensah", "human", "dev"),
            ("Atlas", "agent", "pdsa"),
            ("Chisel", "agent", "dev"),
            ("Lens", "agent", "qa"),
            ("Bridge", "agent", "liaison"),
        ],
        "ws": [
            ("events pipeline", "the pipeline"),
            ("warehouse loader", "the loader"),
            ("schema registry", "the registry"),
            ("metrics dashboard", "the dashboard"),
        ],
    },
    {
        "title": "Infrastructure: cluster upgrade, log shipping and backups",
        "start": "2026-02-09",
        "people": [
            ("Hannah Okoye", "human", "pdsa"),
            ("Luca Bianchi", "human", "dev"),
            ("Keel", "agent", "pdsa"),
            ("Spanner", "agent", "dev"),
            ("Tally", "agent", "qa"),
            ("Courier", "agent", "liaison"),
        ],
        "ws": [
            ("cluster upgrade", "the upgrade"),
            ("log shipper", "the shipper"),
            ("backup jobs", "backups"),
            ("DNS migration", "the DNS move"),
        ],
    },
    {
        "title": "Growth team: checkout, referrals and email digests",
        "start": "2026-01-26",
        "people": [
            ("Elena Petrova", "human", None),
            ("Sam Whitfield", "human", "dev"),
            ("Pilot", "agent", "pdsa"),
            ("Forge", "agent", "dev"),
            ("Vetter", "agent", "qa"),
            ("Signal", "agent", "liaison"),
        ],
        "ws": [
            ("checkout page", "checkout"),
            ("referral program", "referrals"),
            ("email digest", "the digest"),
            ("pricing page", "pricing"),
        ],
    },
]

# --- storyline pools --------------------------------------------------------------------------------
# Problems: (how it is raised, how a question refers to it).
PROBLEMS = [
    ("{ws} timed out again on the nightly run", "the {ws} overnight run not finishing in time"),
    ("{alias} is flaky in CI, third red build today", "the {ws} pipeline failing at random"),
    ("memory on {alias} keeps creeping up until the pod gets killed", "the {ws} leaking RAM until it is restarted"),
    ("the {ws} logs are way too noisy, can't find anything", "too much output in the {ws} logging"),
    ("{alias} deploys take forever, 40 min yesterday", "how long it takes to release the {ws}"),
    ("we keep getting duplicate rows out of {alias}", "the {ws} producing the same record twice"),
    (
        "{alias} falls over whenever traffic spikes on monday morning",
        "the {ws} collapsing at the start of the week under load",
    ),
    ("nobody can tell which version of {alias} is live", "telling which build of the {ws} runs in production"),
    ("the {ws} alerts fire at 3am for nothing", "the {ws} paging people overnight without cause"),
    ("{alias} config drifted between staging and prod again", "{ws} settings differing between environments"),
    ("the {ws} test data is stale, half the fixtures are from last year", "the {ws} sample data being old"),
    ("cold starts on {alias} are awful after every deploy", "the {ws} being sluggish right after it ships"),
]
# Suggestions: (as said, how a question refers to it).
SUGGESTIONS = [
    ("what if we split it into per-region batches", "splitting the work by region"),
    ("could we just cache the results for ten minutes", "a short-lived cache"),
    ("I'd put a circuit breaker in front of it", "a circuit breaker"),
    ("maybe pin the base image and stop using latest", "pinning the base image"),
    ("let's add a canary step before the full rollout", "a canary stage"),
    ("honestly we could move it to the queue and process async", "making it asynchronous via a queue"),
    ("what about sampling, keep 1 in 20", "sampling"),
    ("we could stamp the git sha into a /version endpoint", "exposing the commit hash"),
    ("rate limit the callers, 50 a second each", "throttling the callers"),
    ("pre-warm it with a synthetic request right after deploy", "a warm-up request after each release"),
    ("just bump the limits and see, cheapest option", "raising the resource limits"),
    ("put an idempotency key on every write", "idempotency keys"),
    ("snapshot prod weekly and scrub it for fixtures", "scrubbed production snapshots"),
    ("move the schedule to 2am when nothing else runs", "shifting the schedule to the quiet hours"),
    ("only page if it's still failing after ten minutes", "a delay before paging"),
    ("generate both configs from one template, no hand edits", "a single shared config template"),
]
# Which suggestions fit which problem (indexes into SUGGESTIONS, by PROBLEMS' order).
FITS = [[0, 13, 5], [3, 12], [10, 1], [6], [3, 4], [11, 5], [8, 2, 1], [7], [14, 6], [15, 3], [12], [9, 10]]
OBJECTIONS = [
    "nope, we tried that in the autumn and it made things worse",
    "not a fan, that just hides the problem",
    "I'd rather not, that's another thing to babysit",
    "hmm no, too much work for this quarter",
    "please no, remember what happened last time",
]
AGREEMENTS = ["could work", "worth a try", "I like that", "ok let's try it", "sure, why not", "+1"]

# Decisions: (question framing, listing intro, three options, how a question refers to it).
DECISIONS = [
    (
        "the home of the {ws} monitoring graphs",
        "for the {alias} dashboards we have",
        ["Grafana", "Datadog", "a plain status page"],
    ),
    ("the tool that stresses the {ws} with traffic", "load testing {alias}, candidates", ["k6", "Locust", "Gatling"]),
    (
        "where the {ws} toggles are kept",
        "flags for {alias}: options are",
        ["LaunchDarkly", "a table in postgres", "env vars"],
    ),
    ("the {ws} git workflow", "branching for {alias}, pick one", ["trunk-based", "release branches", "gitflow"]),
    ("catching {ws} exceptions", "error tracking for {alias}:", ["Sentry", "Rollbar", "just structured logs"]),
    (
        "the pace of shipping the {ws} to users",
        "rollout plan for {alias}, three ways",
        ["all at once on a tuesday", "10% per day", "region by region"],
    ),
    (
        "how {ws} code changes get approved",
        "reviews on {alias} could be",
        ["one approver", "two approvers", "pairing instead of review"],
    ),
    (
        "the location of the {ws} operations guide",
        "runbook for {alias}, where?",
        ["the wiki", "the repo's docs folder", "Notion"],
    ),
    (
        "what the {ws} does after a failed call",
        "retries on {alias}:",
        ["fixed 5s", "exponential backoff", "no retries, dead-letter queue"],
    ),
    (
        "who gets woken up for {ws} incidents",
        "who carries the pager for {alias}:",
        ["weekly rotation", "follow the sun", "the owner only"],
    ),
]
ORDINALS = ["the first one", "the second one", "the third", "option 2", "the last one", "#1"]

# Events: (as announced, how a "when" question refers to it).
EVENTS = [
    ("{alias} is on staging now 🎉", "the {ws} first ran in the pre-production environment"),
    ("load test on {alias} done, it held up fine", "the {ws} was put under simulated heavy traffic"),
    ("security review for {alias} signed off", "the {ws} got the green light from the security people"),
    ("had to roll {alias} back, bad migration", "a {ws} release was reverted"),
    ("first real customer went through {alias} this morning", "the {ws} got its first paying user"),
    ("design doc for {alias} approved, finally", "the written plan for the {ws} was accepted"),
    ("postmortem for the {alias} outage is done, notes in the doc", "the {ws} incident was reviewed afterwards"),
    ("{alias} flag flipped on in prod", "the {ws} went live for everyone"),
]
# Facets read off a check: (asked, answered with {v}, how a question refers to it, values).
FACETS = [
    (
        "what's p95 on {alias} looking like?",
        "around {v}ms, better than before",
        "how slow the worst {ws} requests were",
        ["180", "240", "310", "420", "95"],
    ),
    (
        "error rate on {alias}?",
        "{v}%, mostly timeouts",
        "the share of {ws} calls going wrong",
        ["0.4", "1.2", "2.5", "0.08"],
    ),
    (
        "how deep is the {alias} queue?",
        "{v}k messages, draining slowly",
        "how much work was piled up for the {ws}",
        ["12", "40", "3", "75"],
    ),
    ("coverage on {alias}?", "{v}%, the new module drags it down", "the {ws} test coverage", ["61", "74", "83", "58"]),
    (
        "how many pods is {alias} running?",
        "{v}, autoscaler added a few overnight",
        "how many copies of the {ws} were up",
        ["6", "14", "22", "9"],
    ),
]
# "Same as last time": (asked the first time, answered, asked again, how a question names it, values).
SETTINGS = [
    ("batch size for {alias} this sprint?", "{v} for now", "number of records per chunk", ["200", "500", "1000"]),
    (
        "what threshold do we alert {alias} on?",
        "{v}% errors over 5 min",
        "error level that pages someone",
        ["2", "5", "3"],
    ),
    (
        "rollout percentage for {alias} this week?",
        "start at {v}%",
        "share of users in the first wave",
        ["5", "10", "25"],
    ),
    ("retry limit on {alias}?", "{v}, then dead-letter", "number of attempts before giving up", ["3", "4", "6"]),
]
AGAIN = [
    "and this time for {alias}?",
    "{alias} again, same question, what do we use?",
    "what are we going with for {alias} now?",
]
SAME = ["same as last time", "same as before, no reason to change", "keep it as it was", "same, it worked fine"]
ARTIFACTS = [
    ("the rollback plan", "plan for undoing a bad release"),
    ("the release notes", "changelog for customers"),
    ("the runbook changes", "edits to the operations handbook"),
    ("the capacity forecast", "projection of hardware needs"),
]
REASONS = ["family wedding", "finally taking holiday", "conference in Lisbon", "moving flat", "parental leave week"]
LEGACY = [
    ("the v1 API", "version 1 of the API"),
    ("Android 9", "the oldest Android release"),
    ("IE11", "Internet Explorer"),
    ("the CSV upload", "uploading spreadsheets as CSV"),
    ("SMS codes", "text-message codes"),
    ("the old webhook format", "the previous webhook payload"),
]
# Facets no turn ever mentions: plausible for any team, never answered.
UNRECORDED = [
    "What budget was approved for the {ws} next quarter?",
    "Which vendor won the contract for the {ws} penetration test?",
    "How many engineers will be hired for the {ws}?",
    "What did legal say about the {ws} terms of service?",
    "When is the accessibility audit of the {ws} scheduled?",
    "Which marketing campaign launches alongside the {ws}?",
    "What SLA credit was offered to customers after the {ws} incident?",
    "Who translated the {ws} screens into German?",
]

# --- chatter ----------------------------------------------------------------------------------------
ACKS = [
    "ok",
    "👍",
    "thanks!",
    "makes sense",
    "ha, fair",
    "got it",
    "nice",
    "sounds good",
    "yep",
    "on it",
    "agreed",
    "cool cool",
    "ty",
    "perfect",
    "noted",
    "hmm ok",
    "fine by me",
    "works for me",
    "🙏",
    "lol",
    "right",
    "oh good",
    "yes please",
    "sure",
    "same here",
]
SMALL_TALK = [
    "anyone else's coffee machine broken?",
    "weekend was rainy, didn't leave the house",
    "who took the good whiteboard marker",
    "the train was late again this morning",
    "lunch at the noodle place?",
    "I'm in the quiet room if anyone needs me",
    "my laptop fan sounds like a jet",
    "happy friday everyone",
    "the wifi on floor 3 is dying",
    "did anyone watch the match yesterday",
    "going to grab a tea, back in 5",
    "new keyboard arrived, very clicky, sorry in advance",
    "it's freezing in here",
    "brb, doorbell",
    "standup moved to 10:15 today",
    "I'll be a bit late tomorrow",
    "can someone share the meeting link again",
    "my calendar is a disaster this week",
    "sorry, was muted",
    "that meme in the general channel 😂",
    "who's bringing cake on thursday",
    "retro board is up",
    "ugh, mondays",
    "heading out, see you tomorrow",
    "back from lunch",
    "ping me if anything's urgent",
    "the office plants look sad, is anyone watering them this week?",
    "reminder that the all-hands is moved to thursday afternoon this time",
    "if anyone wants the spare ticket for the concert on saturday, shout",
    "I'm going to block my calendar in the mornings for focus time from now on",
    "does anyone know how to get the expense tool to accept a scanned receipt?",
    "the new joiner starts on monday, be nice and show them where the coffee is",
    "my kid brought home a cold again so I might be a bit slow today",
    "sorry for the delay, back to back meetings since nine",
]
STATUS = [
    "looking at {alias} after lunch",
    "still on it",
    "any news on {alias}?",
    "not yet",
    "nearly there with {alias}",
    "{alias} standup in 5",
    "I'll pair with {name} on {alias} later",
    "PR for {alias} is up, small one",
    "can someone review my {alias} PR",
    "reviewed, couple of nits",
    "merged",
    "{alias} ticket updated",
    "I'm blocked on {alias} until {name} is back",
    "quick q about {alias}, got a sec?",
    "sure, dm me",
    "{name}, did you see my comment on {alias}?",
    "yes, replied",
    "moving the {alias} card to done",
    "will write it up later",
    "I'll check with {name}",
    "let's take this to a thread",
    "good catch {name}",
    "pushed a fix",
    "rebased, CI running",
    "CI green",
    "who's on {alias} today?",
    "me",
    "{name} is",
    "updated the board",
    "let's sync on {alias} tomorrow",
    "sorry, didn't get to {alias} today",
    "nothing new on {alias} from my side",
    "same as yesterday really",
    "that one's on me, will fix",
    "do we still need the {alias} sync on thursday?",
    "I think so",
    "not sure, ask {name}",
    "{alias} docs need love",
    "agree",
    "added it to the backlog",
    "that was quick",
    "thanks {name}",
    "can we park {alias} till next week",
    "fine",
    "I'll take the {alias} one",
    "oh nice, thank you",
    "I spent the morning reading through the {alias} code, it's less scary than I thought",
    "the {alias} ticket has grown three sub-tasks since yesterday, will split it up",
    "can we keep the {alias} discussion for the planning meeting, we're over time",
    "{name} and I went through the open {alias} questions, will summarise in the doc",
    "not much progress on {alias} today, too many interruptions honestly",
    "I'll have another look at {alias} tomorrow with fresh eyes",
    "did we ever write down what we agreed on {alias} last time? I can't find it",
    "let's not reopen the {alias} debate today please",
    "the {alias} board is a mess, I'll tidy it up before standup",
]

# Near misses: the storylines' topics, in their words, answering no question.
NEAR = [
    "did anyone book the staging slot for {alias}?",
    "we should load test {alias} properly at some point",
    "who's doing the security review paperwork for {alias}?",
    "let's not roll {alias} back unless we have to",
    "any customer feedback on {alias} yet?",
    "the {alias} design doc has a lot of open comments",
    "is there a postmortem template we use for {alias}?",
    "what's the flag called for {alias} again?",
    "p95 dashboards for {alias} are broken again",
    "are the {alias} error graphs only showing 5xx?",
    "the {alias} queue alarms are too sensitive imo",
    "coverage report for {alias} didn't upload",
    "autoscaler for {alias} is doing its thing",
    "what batch size does {alias} default to?",
    "do we even have an alert threshold on {alias}?",
    "the {alias} retries are confusing to read in the logs",
    "need to book the demo room for {alias} at some point",
    "how long did the last {alias} migration take?",
    "the maintenance window calendar is a mess",
    "who signs off stuff like that usually?",
    "{alias} release notes template is outdated",
    "the {alias} rollback plan is only in someone's head",
    "the {alias} runbook needs a section on restarts",
    "should we think about capacity for {alias}?",
    "is {alias} blocked on anything?",
    "dependency graph for {alias} is scary",
    "what's the status of {alias} flag rollout?",
    "people are asking when {alias} lands",
    "who knows the {alias} deployment steps by heart?",
    "the nightly jobs are all over the place this week",
    "CI was red for everyone this morning, not just {alias}",
    "the logs from {alias} are hard to search",
    "duplicates again? which service this time",
    "monday traffic is always weird",
    "I'm going to look at memory graphs for {alias}",
    "grafana or datadog, I never remember which we use for {alias}",
    "we need a proper git workflow doc",
    "who's on call for {alias} this week?",
    "let's discuss retries for {alias} in the planning meeting",
    "do we support old browsers on {alias}?",
    "does {alias} still accept the old format?",
    "who's away next month? updating the holiday sheet",
    "the {alias} demo went ok last quarter",
    "the {alias} canary idea came up before I think",
]


def _article(text: str) -> str:
    """Aliases such as "the export" carry their article; a template's own "the" is then dropped."""
    return text.replace("the the ", "the ")


class _Builder:
    """One conversation: its world, sessions, turns and questions."""

    def __init__(self, index: int, world: dict, rng: random.Random):
        self.cid = f"m{index + 1:02d}"
        self.world = world
        self.rng = rng
        self.people = [p[0] for p in world["people"]]
        self.humans = [p[0] for p in world["people"] if p[1] == "human"]
        self.first = {p: p.split()[0] for p in self.people}
        start = dt.date.fromisoformat(world["start"])
        self.dates = []
        day = start
        for _ in range(SESSIONS):
            self.dates.append(day)
            day += dt.timedelta(days=rng.choice([5, 6, 6, 7, 7]))
        # session -> list of blocks; a block is a list of (key, speaker, text)
        self.blocks: list[list[list[tuple]]] = [[] for _ in range(SESSIONS)]
        self.questions: list[tuple[str, str, list[tuple[int, int]] | list]] = []
        self.used: dict[str, set] = {k: set() for k in ("problem", "event", "decision", "facet", "legacy")}
        self._key = 0

    # turns are referred to by a key until ids are assigned
    def turn(self, session: int, speaker: str, text: str) -> tuple:
        text = _article(text)
        self._key += 1
        return (self._key, session, speaker, text)

    def add_block(self, session: int, turns: list[tuple]) -> None:
        self.blocks[session].append(turns)

    def other(self, *exclude: str) -> str:
        return self.rng.choice([p for p in self.people if p not in exclude])

    def ask(self, qtype: str, text: str, evidence: list[tuple]) -> None:
        self.questions.append((qtype, text, [t[0] for t in evidence]))

    def fmt(self, template: str, ws: tuple[str, str], **extra) -> str:
        return template.format(ws=ws[0], alias=ws[1], **extra)

    def date_words(self, session: int) -> str:
        d = self.dates[session]
        return f"{d.strftime('%B')} {d.day}"

    # --- storylines ---------------------------------------------------------------------------------
    def proposal(self, session: int, ws, problem, suggestion, objection: bool) -> None:
        raiser, proposer = self.rng.sample(self.people, 2)
        t1 = self.turn(session, raiser, self.fmt(problem[0], ws))
        t2 = self.turn(
            session, self.other(raiser), self.rng.choice(["ugh. again?", "oh no", "seriously?", "not again", "classic"])
        )
        t3 = self.turn(session, proposer, suggestion[0])
        turns = [t1, t2, t3]
        if objection:
            objector = self.other(proposer)
            t4 = self.turn(session, objector, self.rng.choice(OBJECTIONS))
            turns.append(t4)
            self.ask("speaker", f"Who objected to {suggestion[1]} for the {ws[0]}, and on what grounds?", [t3, t4])
        else:
            turns.append(self.turn(session, self.other(proposer), self.rng.choice(AGREEMENTS)))
        self.add_block(session, turns)
        q = self.fmt(problem[1], ws)
        self.ask("speaker", f"What was {self.first[proposer]}'s idea about {q}?", [t1, t3])

    def decision(self, session: int, ws, decision) -> None:
        topic, intro, options = decision
        opener, chooser = self.rng.sample(self.people, 2)
        ordinal = self.rng.choice(ORDINALS)
        t1 = self.turn(session, opener, f"{self.fmt(intro, ws)} {options[0]}, {options[1]} or {options[2]}")
        t2 = self.turn(
            session,
            self.other(opener, chooser),
            self.rng.choice(["no strong opinion", "hmm", "depends on cost?", "what did we use before?"]),
        )
        t3 = self.turn(
            session,
            chooser,
            self.rng.choice(["{o}, no question", "{o} imo", "yes, {o}", "{o}. done deal?"]).format(o=ordinal),
        )
        t4 = self.turn(
            session,
            opener,
            self.rng.choice(["ok, going with that", "settled then", "fine, done", "agreed, writing it down"]),
        )
        self.add_block(session, [t1, t2, t3, t4])
        self.ask("single", f"What was chosen for {self.fmt(topic, ws)}?", [t1, t3, t4])

    def event(self, session: int, ws, event) -> None:
        who = self.rng.choice(self.people)
        t1 = self.turn(session, who, self.fmt(event[0], ws))
        t2 = self.turn(
            session, self.other(who), self.rng.choice(["🎉", "nice one", "finally", "oof", "ok, noted", "good to know"])
        )
        self.add_block(session, [t1, t2])
        form = self.rng.choice(
            ["When was it that {e}?", "Which week was it when {e}?", "On what date was it that {e}?"]
        )
        self.ask("temporal_when", form.format(e=self.fmt(event[1], ws)), [t1])

    def facet(self, session: int, ws, facet) -> None:
        asker, answerer = self.rng.sample(self.people, 2)
        t1 = self.turn(session, asker, self.fmt(facet[0], ws))
        t2 = self.turn(session, answerer, facet[1].format(v=self.rng.choice(facet[3])))
        self.add_block(session, [t1, t2])
        self.ask("single", f"What figure did {self.first[answerer]} give for {self.fmt(facet[2], ws)}?", [t1, t2])

    def same_as_before(self, first: int, second: int, ws, setting) -> None:
        asker, answerer = self.rng.sample(self.people, 2)
        a1 = self.turn(first, asker, self.fmt(setting[0], ws))
        b1 = self.turn(first, answerer, setting[1].format(v=self.rng.choice(setting[3])))
        self.add_block(first, [a1, b1])
        a2 = self.turn(second, self.other(), self.fmt(self.rng.choice(AGAIN), ws))
        b2 = self.turn(second, self.other(), self.rng.choice(SAME))
        self.add_block(second, [a2, b2])
        self.ask(
            "multihop", f"What {setting[2]} did the {ws[0]} use around {self.date_words(second)}?", [a1, b1, a2, b2]
        )

    def ownership(self, first: int, second: int, ws, new_owner: str, artifact) -> None:
        old = self.other(new_owner)
        t1 = self.turn(
            first,
            self.other(new_owner, old),
            f"heads up: {self.first[new_owner]} is taking over {ws[1]} from {self.first[old]}",
        )
        t2 = self.turn(
            first, new_owner, self.rng.choice(["yep, happy to", "glad to, it's in good shape", "ok, I'll read up"])
        )
        self.add_block(first, [t1, t2])
        t3 = self.turn(second, self.other(), f"reminder: whoever has {ws[1]} signs off {artifact[0]} before friday")
        self.add_block(second, [t3])
        self.ask("multihop", f"Who has to approve the {ws[0]} {artifact[1]}?", [t1, t3])

    def dependency(self, first: int, second: int, ws_a, ws_b, slip: int) -> None:
        t1 = self.turn(first, self.other(), f"{ws_a[1]} can't go out before {ws_b[1]} is finished, hard dependency")
        t2 = self.turn(first, self.other(), "right, the data model changes")
        self.add_block(first, [t1, t2])
        new = self.dates[second] + dt.timedelta(days=slip)
        t3 = self.turn(second, self.other(), f"bad news, {ws_b[1]} slipped to {new.strftime('%B')} {new.day}")
        t4 = self.turn(second, self.other(), self.rng.choice(["ouch", "of course it did", "how bad is that for us?"]))
        self.add_block(second, [t3, t4])
        self.ask("multihop", f"Given the delays, how soon could the {ws_a[0]} be released?", [t1, t3])

    def absence(self, first: int, second: int, ws, away: str, overlap: bool) -> None:
        demo = self.dates[second] + dt.timedelta(days=self.rng.choice([8, 9, 10]))
        while demo.weekday() >= 5:  # demos are on working days
            demo += dt.timedelta(days=1)
        if overlap:
            start, end = demo - dt.timedelta(days=2), demo + dt.timedelta(days=4)
        else:
            start, end = demo + dt.timedelta(days=3), demo + dt.timedelta(days=12)
        reason = self.rng.choice(REASONS)
        t1 = self.turn(
            first, away, f"I'm out {start.strftime('%b')} {start.day} to {end.strftime('%b')} {end.day}, {reason}"
        )
        t2 = self.turn(first, self.other(away), self.rng.choice(["enjoy!", "noted, have fun", "lucky you"]))
        self.add_block(first, [t1, t2])
        t3 = self.turn(
            second,
            self.other(away),
            f"{ws[1]} demo is booked for {demo.strftime('%A')} {demo.strftime('%B')} {demo.day}",
        )
        self.add_block(second, [t3])
        self.ask("inference", f"Will {self.first[away]} be around when the {ws[0]} is shown to stakeholders?", [t1, t3])

    def rollout(self, first: int, second: int, ws) -> None:
        a, b = self.rng.choice([(5, 15), (10, 20), (10, 30), (20, 25), (15, 35)])
        t1 = self.turn(first, self.other(), f"{ws[1]} flag is at {a}% of users now")
        self.add_block(
            first, [t1, self.turn(first, self.other(), self.rng.choice(["no complaints so far", "👀", "careful"]))]
        )
        t2 = self.turn(second, self.other(), f"bumped {ws[1]} by another {b} points")
        self.add_block(second, [t2])
        self.ask("inference", f"How widely is the {ws[0]} enabled after the most recent step up?", [t1, t2])

    def fit(self, first: int, second: int, ws) -> None:
        need, window = self.rng.choice([(3, 2), (5, 4), (2, 4), (6, 8), (4, 3)])
        t1 = self.turn(
            first, self.other(), f"the {ws[1]} migration takes about {need} hours end to end, measured twice"
        )
        self.add_block(first, [t1])
        t2 = self.turn(second, self.other(), f"ops gave us a {window} hour maintenance window for {ws[1]}")
        self.add_block(
            second,
            [t2, self.turn(second, self.other(), "saturday night as usual?"), self.turn(second, self.other(), "yes")],
        )
        self.ask("inference", f"Can the {ws[0]} switchover be done within the slot operations granted?", [t1, t2])

    def drop(self, session: int, ws, legacy) -> None:
        asker, answerer = self.rng.sample(self.people, 2)
        t1 = self.turn(session, asker, f"should we drop {legacy[0]} in {ws[1]}?")
        t2 = self.turn(
            session, answerer, self.rng.choice(["yes, nobody uses it", "yes. 3 calls last month", "yep, kill it"])
        )
        self.add_block(session, [t1, t2])
        self.ask("inference", f"Does the {ws[0]} keep working with {legacy[1]}?", [t1, t2])

    # --- plan, chatter, ids -------------------------------------------------------------------------
    def plan(self) -> None:
        rng, ws = self.rng, self.world["ws"]
        s = list(range(SESSIONS))

        def pair(gap_min: int = 2) -> tuple[int, int]:
            while True:
                a, b = sorted(rng.sample(s, 2))
                if b - a >= gap_min:
                    return a, b

        suggested = set()  # (workstream, suggestion): each made once, so "who objected" has one answer
        for i, (w, p) in enumerate(rng.sample([(w, p) for w in ws for p in PROBLEMS], 7)):
            choices = [SUGGESTIONS[k] for k in FITS[PROBLEMS.index(p)] if (w, SUGGESTIONS[k]) not in suggested]
            if not choices:
                continue
            sug = rng.choice(choices)
            suggested.add((w, sug))
            self.used["problem"].add((w, p))
            self.proposal(rng.choice(s), w, p, sug, objection=i < 3)
        for w, d in rng.sample([(w, d) for w in ws for d in DECISIONS], 6):
            self.used["decision"].add((w, d[0]))
            self.decision(rng.choice(s), w, d)
        for w, e in rng.sample([(w, e) for w in ws for e in EVENTS], 8):
            self.used["event"].add((w, e))
            self.event(rng.choice(s), w, e)
        for w, f in rng.sample([(w, f) for w in ws for f in FACETS], 5):
            self.used["facet"].add((w, f[0]))
            self.facet(rng.choice(s), w, f)
        for w, st in zip(rng.sample(ws, 3), rng.sample(SETTINGS, 3), strict=True):
            self.same_as_before(*pair(), w, st)
        owners = rng.sample(self.people, 3)
        for w, owner, art in zip(rng.sample(ws, 3), owners, rng.sample(ARTIFACTS, 3), strict=True):
            self.ownership(*pair(), w, owner, art)
        a, b, c, d = rng.sample(ws, 4)
        self.dependency(*pair(), a, b, 3)
        self.dependency(*pair(), c, d, 11)
        for w, overlap in zip(rng.sample(ws, 2), (True, False), strict=True):
            first, second = pair(1)
            if rng.random() < 0.5:
                first, second = second, first  # the absence may be announced before or after the demo date
            self.absence(first, second, w, rng.choice(self.humans), overlap)
        for w in rng.sample(ws, 2):
            self.rollout(*pair(), w)
        for w in rng.sample(ws, 2):
            self.fit(*pair(), w)
        for w, leg in zip(rng.sample(ws, 3), rng.sample(LEGACY, 3), strict=True):
            self.used["legacy"].add((w, leg))
            self.drop(rng.choice(s), w, leg)

    def chatter(self, session: int) -> tuple:
        rng = self.rng
        kind = rng.random()
        speaker = rng.choice(self.people)
        if kind < 0.15:
            text = rng.choice(ACKS)
        elif kind < 0.33:
            text = rng.choice(SMALL_TALK)
        elif kind < 0.66:
            text = rng.choice(NEAR).format(alias=rng.choice(self.world["ws"])[1])
        else:
            ws = rng.choice(self.world["ws"])
            name = self.first[self.other(speaker)]
            text = rng.choice(STATUS).format(alias=ws[1], name=name)
        return (None, session, speaker, _article(text))

    def sessions(self) -> tuple[list[dict], dict[int, str]]:
        """Sessions with ids assigned; a turn is a fact when some question cites it, chatter otherwise."""
        cited = {key for _, _, evidence in self.questions for key in evidence}
        rng = self.rng
        out, ids = [], {}
        for n in range(SESSIONS):
            blocks = self.blocks[n]
            rng.shuffle(blocks)
            facts = sum(len(b) for b in blocks)
            total = max(rng.randint(*TURNS_PER_SESSION), facts + 8)
            fillers = total - facts
            # chatter between blocks and inside them (replies are rarely adjacent)
            slots = [t for block in blocks for t in block]
            positions = sorted(rng.sample(range(fillers + len(slots)), len(slots)))
            seq = []
            it = iter(slots)
            for i in range(fillers + len(slots)):
                seq.append(next(it) if positions and i == positions[0] else self.chatter(n))
                if positions and i == positions[0]:
                    positions.pop(0)
            sid = f"{self.cid}-s{n + 1}"
            turns = []
            for i, (key, _, speaker, text) in enumerate(seq, start=1):
                tid = f"{sid}-t{i:02d}"
                if key is not None:
                    ids[key] = tid
                turns.append({"id": tid, "speaker": speaker, "text": text, "fact": key in cited})
            out.append({"id": sid, "date": self.dates[n].isoformat(), "turns": turns})
        return out, ids


def _noanswer(builder: _Builder, others: list[dict], rng: random.Random) -> list[str]:
    """Questions plausible for this team, in its vocabulary, that no turn of the conversation answers."""
    ws = builder.world["ws"]
    pool: list[str] = []
    for w in ws:
        for p in PROBLEMS:
            if (w, p) not in builder.used["problem"]:
                who = builder.first[rng.choice(builder.people)]
                pool.append(f"What was {who}'s idea about {p[1].format(ws=w[0])}?")
        for e in EVENTS:
            if (w, e) not in builder.used["event"]:
                pool.append(f"When was it that {e[1].format(ws=w[0])}?")
        for d in DECISIONS:
            if (w, d[0]) not in builder.used["decision"]:
                pool.append(f"What was chosen for {d[0].format(ws=w[0])}?")
        for f in FACETS:
            if (w, f[0]) not in builder.used["facet"]:
                pool.append(f"What figure was given for {f[2].format(ws=w[0])}?")
        for leg in LEGACY:
            if (w, leg) not in builder.used["legacy"]:
                pool.append(f"Does the {w[0]} keep working with {leg[1]}?")
        for u in UNRECORDED:
            pool.append(u.format(ws=w[0]))
    other_pool = []
    for world in others:
        for w in world["ws"]:
            other_pool.append(f"When was it that {rng.choice(EVENTS)[1].format(ws=w[0])}?")
            other_pool.append(f"What was chosen for {rng.choice(DECISIONS)[0].format(ws=w[0])}?")
    # mostly this team's own workstreams (hardest: same names, same kinds of fact), some from other teams
    chosen = rng.sample(pool, NOANSWER_PER_CONVERSATION - 6) + rng.sample(other_pool, 6)
    return chosen


def build() -> tuple[str, str]:
    """Both JSONL files' text, from the seed."""
    rng = random.Random(SEED)
    conversations, questions = [], []
    qn = 0
    for index, world in enumerate(WORLDS):
        builder = _Builder(index, world, random.Random(rng.randrange(2**32)))
        builder.plan()
        sessions, ids = builder.sessions()
        split = "dev" if builder.cid in DEV else "test"
        conversations.append(
            {
                "id": builder.cid,
                "split": split,
                "title": world["title"],
                "participants": [{"name": n, "kind": k, "role": r} for n, k, r in world["people"]],
                "sessions": sessions,
            }
        )
        seen = set()
        rows = [(t, q, [ids[k] for k in ev]) for t, q, ev in builder.questions]
        others = [w for w in WORLDS if w is not world]
        rows += [("noanswer", q, []) for q in _noanswer(builder, others, random.Random(rng.randrange(2**32)))]
        for qtype, text, evidence in rows:
            if text.lower() in seen:
                continue
            seen.add(text.lower())
            qn += 1
            questions.append(
                {
                    "id": f"q{qn:04d}",
                    "conversation": builder.cid,
                    "split": split,
                    "type": qtype,
                    "question": text,
                    "evidence": evidence,
                }
            )
    dump = lambda rows: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)  # noqa: E731
    return dump(conversations), dump(questions)


def main() -> None:
    conversations, questions = build()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    (DATA_DIR / "conversations.jsonl").write_text(conversations, encoding="utf-8")
    (DATA_DIR / "questions.jsonl").write_text(questions, encoding="utf-8")
    print(f"wrote {DATA_DIR}/conversations.jsonl and questions.jsonl")


if __name__ == "__main__":
    main()
