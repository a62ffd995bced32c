"""``make soak``: a mixed load against a live Colony on 127.0.0.1, with faults, and a ground-truth
check from the client's own log.

    python -m benchmarks.soak [--duration 600] [--rate 60] [--target http://127.0.0.1:PORT]
        [--fault-worker] [--fault-postgres] [--fault-redis] [--redis-down 30] [--postgres-down 10]
        [--web-workers 2] [--threads 24]

Without ``--target`` it starts Colony in its production shape on the ops ports (``tests/standalone.py``):
PostgreSQL from the embedded wheel on 127.0.0.1:5440 over TCP, its own redis-server on 6390 as the
broker, ``python -m runtime.serve`` (uvicorn, several workers) on 8400, two Celery workers and beat,
all under Colony's supervisor; faults need this (they stop and kill those processes). With
``--target`` it drives a running server; ``DATABASE_URL`` must then name that server's database (the
soak creates its agents there and reads it for the ground truth).

Load (open loop at ``--rate`` requests/s, bounded by the duration; loopback only), from 8 agents
(pdsa, dev, qa, liaison) in each of two spaces: 50% memory search (retrieve-only,
``contribute: false``), 20% contribute, 15% task steps with their DNA gates (a refusal provoked on
purpose in every task's cycle, counted as expected), 10% turns, 5% lineage/thought reads.

Printed: throughput, p50/p95/p99 per operation, responses by status code, server CPU and memory,
what ``/api/v1/health`` said during each fault, the latency of the 503s, and the ground truth:
accepted / verified present / lost for contributions, transitions (with TransitionLog row and marker
thought), turns; tasks half-moved; thoughts without an embedding after the safety net ran.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.stats import percentile

BASE_DIR = Path(__file__).resolve().parent.parent
ROLES = ("pdsa", "dev", "qa", "liaison")
SPACES = ("soak-a", "soak-b")
MIX = [("search", 50), ("contribute", 20), ("task", 15), ("turn", 10), ("read", 5)]
CLIENT_TIMEOUT = 10.0
PG_PORT, REDIS_PORT, WEB_PORT = 5440, 6390, 8400
TOPICS = ["deploy", "billing", "search", "auth", "backup", "ci", "queue", "cache"]
QUESTIONS = [
    "how do deploys work?",
    "why did the billing job time out?",
    "what do we know about the search index?",
    "how is the backup verified?",
    "which cache settings do we use?",
    "what breaks the CI pipeline?",
]


#: The soak's target: p95 under this for every operation, at the asked rate of at least TARGET_RATE.
TARGET_P95_MS = 100.0
TARGET_RATE = 50.0
#: The whole machine above this share of its cores: the latencies are mostly queueing.
SATURATED_SHARE = 0.8


def targets_report(
    *,
    latencies: dict[str, list[float]],
    fivexx: int,
    unexpected: int,
    asked_rate: float,
    achieved_rate: float,
    machine_percent: float | None,
    cores: int,
    faults: bool = False,
) -> list[str]:
    """The soak's targets, one line each (met / NOT met), and a warning when the machine was saturated.
    With faults injected the rate and latency targets are not judged (they are the plain soak's)."""
    lines = []
    slow = {op: percentile(samples, 0.95) for op, samples in latencies.items() if samples}
    over = {op: p95 for op, p95 in slow.items() if p95 >= TARGET_P95_MS}
    worst = ", ".join(f"{op} {p95:.0f}" for op, p95 in sorted(over.items(), key=lambda item: -item[1])[:3])
    # The rate is the one answered: a machine that can't keep up with the asked rate has not met it.
    # With faults, requests wait out the outages, so neither the rate nor the latency is judged.
    checks = [
        (
            None if faults else asked_rate >= TARGET_RATE and achieved_rate >= TARGET_RATE,
            f"rate >= {TARGET_RATE:.0f} requests/s (asked {asked_rate:.0f}, answered {achieved_rate:.1f}/s)",
        ),
        (
            None if faults else not over and bool(slow),
            f"p95 < {TARGET_P95_MS:.0f} ms for every operation" + (f" (over: {worst} ms)" if over else ""),
        ),
        (fivexx == 0, f"zero 5xx outside the faults ({fivexx})"),
        (unexpected == 0, f"zero unexpected errors ({unexpected})"),
    ]
    lines.append("mixed-load targets (docs/performance.md):")
    verdicts = {True: "met    ", False: "NOT met", None: "not judged (faults injected)"}
    lines += [f"  {verdicts[ok]}  {text}" for ok, text in checks]
    saturated = machine_percent is not None and machine_percent >= SATURATED_SHARE * 100 * cores
    behind = not faults and achieved_rate < 0.95 * asked_rate
    if saturated or behind:
        why = f"the whole machine at {machine_percent:.0f}% of {100 * cores}%" if saturated else ""
        short = f"{achieved_rate:.1f} of {asked_rate:.0f} responses/s" if behind else ""
        lines.append(
            f"  note: this machine was saturated ({', '.join(x for x in (why, short) if x)}): the latencies are "
            "mostly queueing for a core; run it at a lower --rate or on a machine with more cores"
        )
    return lines


# --- the production-shape stack ---------------------------------------------------------------------
class Stack:
    """PostgreSQL (TCP), Redis, web, two workers and beat under the supervisor, in ``folder``."""

    def __init__(self, folder: Path, *, web_workers: int, port: int = WEB_PORT):
        from tests.standalone import PgServer, RedisServer

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
        self.pg = PgServer(folder / "pg", PG_PORT)
        self.redis = RedisServer(folder / "redis", REDIS_PORT)
        self.port = port
        self.log = folder / "supervisor.log"
        self.env = {
            **os.environ,
            "DATABASE_URL": self.pg.url(),
            "REDIS_URL": self.redis.url(),
            "COLONY_BROKER": "redis",
            "COLONY_DATA_DIR": str(folder / "data"),
            "SECRET_KEY": "soak-" + "x" * 40,
            "DEBUG": "false",
            "PORT": str(port),
            "WEB_WORKERS": str(web_workers),
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=self.env, capture_output=True, text=True
        )
        if result.returncode:
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def start(self) -> None:
        say(f"starting PostgreSQL on 127.0.0.1:{PG_PORT} and redis-server on {REDIS_PORT} in {self.folder} ...")
        self.pg.start()
        self.redis.start()
        self.manage("migrate", "--no-input", "-v", "0")
        self.manage("collectstatic", "--no-input", "-v", "0")
        procfile = self.folder / "Procfile"
        worker = "celery -A config.celery:app worker --loglevel WARNING --concurrency 1 --without-gossip"
        procfile.write_text(
            "web: python -m runtime.serve\n"
            f"worker1: {worker} --hostname soak-worker1@%h\n"
            f"worker2: {worker} --hostname soak-worker2@%h\n"
            f"beat: celery -A config.celery:app beat --loglevel WARNING --schedule {self.folder / 'beat-schedule'}\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "runtime.supervisor", str(procfile)],
            cwd=BASE_DIR,
            env=self.env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        say(f"web on http://127.0.0.1:{self.port}/ (uvicorn, {self.env['WEB_WORKERS']} workers), 2 workers, beat")

    def pids(self, name: str) -> list[int]:
        return [int(p) for p in re.findall(rf"started {name} \(pid (\d+)\)", self.log.read_text(errors="replace"))]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.redis.stop()
        self.pg.stop()


def say(message: str) -> None:
    print(f"[soak] {message}", flush=True)


# --- the client's own log ---------------------------------------------------------------------------
@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict = field(default_factory=lambda: collections.defaultdict(list))
    statuses: collections.Counter = field(default_factory=collections.Counter)
    expected_refusals: collections.Counter = field(default_factory=collections.Counter)
    unexpected: list = field(default_factory=list)
    fault_503: list = field(default_factory=list)  # latencies (ms) of 503s
    missing_retry_after: int = 0
    contributions: list = field(default_factory=list)  # thought ids that got a 2xx
    transitions: list = field(default_factory=list)  # (task slug, transition id, marker id, to)
    turns: list = field(default_factory=list)  # turn_log ids
    thought_ids: dict = field(default_factory=lambda: collections.defaultdict(list))
    late: int = 0
    faults: bool = False  # with faults, a 503 is the expected answer while a dependency is down

    def record(self, op: str, response, elapsed_ms: float, *, expect_refusal: bool = False, error: str = "") -> None:
        with self.lock:
            if response is None:
                self.statuses[(op, "timeout/conn")] += 1
                self.unexpected.append((op, "timeout/conn", error[:200]))
                return
            code = response.status_code
            self.statuses[(op, code)] += 1
            if code < 400:
                self.latencies[op].append(elapsed_ms)
            elif expect_refusal and code in (400, 403, 409, 422):
                self.expected_refusals[(op, code)] += 1
                self.latencies[op].append(elapsed_ms)
            elif code == 503 and self.faults:
                self.fault_503.append(elapsed_ms)
                if "Retry-After" not in response.headers:
                    self.missing_retry_after += 1
            else:
                self.unexpected.append((op, code, response.text[:200]))


class Agent:
    def __init__(self, *, name: str, role: str, space: str, token: str, base: str):
        import httpx

        self.name, self.role, self.space, self.token = name, role, space, token
        self.client = httpx.Client(
            base_url=base,
            headers={"Authorization": f"Bearer {token}"},
            timeout=CLIENT_TIMEOUT,
            limits=httpx.Limits(max_connections=8),
        )
        self.session = f"soak-{name}-{uuid.uuid4().hex[:8]}"


class Load:
    """The operations; each call does one (a task step may do up to three requests)."""

    def __init__(self, agents: list[Agent], ledger: Ledger, rng_seed: int = 7):
        self.agents = agents
        self.by_space = {space: {a.role: a for a in agents if a.space == space} for space in SPACES}
        self.ledger = ledger
        self.rng = random.Random(rng_seed)
        self.counter = itertools.count()
        self.task_lock = threading.Lock()
        self.free_tasks: dict[str, list[dict]] = {space: [] for space in SPACES}
        self.tasks: list[dict] = []

    def call(self, op: str, agent: Agent, method: str, path: str, *, expect_refusal: bool = False, **kwargs):
        import httpx

        started = time.perf_counter()
        error = ""
        try:
            response = agent.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            response, error = None, f"{type(exc).__name__} after {time.perf_counter() - started:.1f} s: {exc}"
        elapsed_ms = (time.perf_counter() - started) * 1000
        self.ledger.record(op, response, elapsed_ms, expect_refusal=expect_refusal, error=error)
        return response

    def search(self, agent: Agent) -> None:
        prompt = random.choice(QUESTIONS)
        self.call("search", agent, "GET", "/api/v1/memory", params={"prompt": prompt, "contribute": "false"})

    def contribute(self, agent: Agent) -> None:
        topic = random.choice(TOPICS)
        text = soak_note(next(self.counter), agent.name, topic, random)
        response = self.call("contribute", agent, "POST", "/api/v1/memory", json={"prompt": text, "topic": topic})
        if response is not None and response.status_code < 300:
            thought_id = response.json()["trace"]["thought_id"]
            if thought_id:
                with self.ledger.lock:
                    self.ledger.contributions.append(thought_id)
                    self.ledger.thought_ids[agent.space].append(thought_id)

    def turn(self, agent: Agent) -> None:
        n = next(self.counter)
        body = {
            "session_id": agent.session,
            "turn_id": f"t{n}",
            "user_prompt": f"question {n} about {random.choice(TOPICS)}",
            "assistant_response": "Answered from the brain; nothing contradicted.",
        }
        response = self.call("turn", agent, "POST", "/api/v1/turns", json=body)
        if response is not None and response.status_code < 300:
            with self.ledger.lock:
                self.ledger.turns.append(response.json()["turn_log_id"])

    def read(self, agent: Agent) -> None:
        with self.ledger.lock:
            ids = self.ledger.thought_ids[agent.space][-200:]
        if not ids:
            return self.search(agent)
        thought_id = random.choice(ids)
        if random.random() < 0.5:
            self.call("read", agent, "GET", f"/api/v1/thoughts/{thought_id}/lineage")
        else:
            self.call("read", agent, "GET", f"/api/v1/thoughts/{thought_id}")

    # Task cycle: create (pending) -> ready -> [refused claim: no memory session] -> query memory,
    # record the session in DNA -> active -> (blocked <- reason; restore by liaison) x2 -> cancelled.
    def task(self, agent_hint: Agent) -> None:
        space = agent_hint.space
        with self.task_lock:
            task = self.free_tasks[space].pop() if self.free_tasks[space] else None
        if task is None:
            task = self.task_create(space)
            if task is None:
                return
        try:
            self.task_step(task)
        finally:
            if task["step"] != "done":
                with self.task_lock:
                    self.free_tasks[space].insert(0, task)

    def task_create(self, space: str) -> dict | None:
        pdsa = self.by_space[space]["pdsa"]
        slug = f"soak-{space}-{next(self.counter)}-{uuid.uuid4().hex[:6]}"
        body = {"project": f"soak-{space}", "slug": slug, "title": f"Soak task {slug}", "status": "pending"}
        response = self.call("task:create", pdsa, "POST", "/api/v1/tasks", json=body)
        if response is None or response.status_code >= 300:
            return None
        task = {"slug": slug, "space": space, "step": "ready", "blocks": 0, "status": "pending"}
        with self.task_lock:
            self.tasks.append(task)
        return task

    def transition(self, task: dict, agent: Agent, to: str, *, expect_refusal: bool = False) -> bool:
        op = "task:refusal" if expect_refusal else "task:transition"
        response = self.call(
            op,
            agent,
            "POST",
            f"/api/v1/tasks/{task['slug']}/transition",
            json={"to": to, "summary": f"soak {task['step']}"},
            expect_refusal=expect_refusal,
        )
        if response is None or response.status_code >= 300:
            if not expect_refusal:
                # A timeout or a 503 may hide a transition that did happen: read the task back first.
                task["resync"] = True
            return False
        data = response.json()
        with self.ledger.lock:
            self.ledger.transitions.append(
                (task["slug"], data["transition"]["id"], data["transition"]["marker_id"], data["task"]["status"])
            )
        task["status"] = data["task"]["status"]
        return True

    def dna(self, task: dict, agent: Agent, patch: dict) -> bool:
        response = self.call("task:dna", agent, "PATCH", f"/api/v1/tasks/{task['slug']}/dna", json=patch)
        return response is not None and response.status_code < 300

    RESYNC_STEP = {"pending": "ready", "ready": "claim", "active": "block", "blocked": "restore", "cancelled": "done"}

    def task_step(self, task: dict) -> None:
        team = self.by_space[task["space"]]
        pdsa, liaison = team["pdsa"], team["liaison"]
        if task.get("resync"):
            response = self.call("task:read", pdsa, "GET", f"/api/v1/tasks/{task['slug']}")
            if response is None or response.status_code >= 300:
                return
            task["status"] = response.json()["status"]
            task["step"] = self.RESYNC_STEP.get(task["status"], "done")
            if task["step"] == "block" and task["blocks"] >= 2:
                task["step"] = "cancel"
            task["resync"] = False
            return
        step = task["step"]
        if step == "ready":
            if self.transition(task, pdsa, "ready"):
                task["step"] = "refuse"
        elif step == "refuse":
            # Provoked on purpose: claiming without a memory session is refused by the gate.
            self.transition(task, pdsa, "active", expect_refusal=True)
            task["step"] = "claim"
        elif step == "claim":
            session = f"soak-claim-{uuid.uuid4().hex[:10]}"
            response = self.call(
                "search",
                pdsa,
                "GET",
                "/api/v1/memory",
                params={
                    "prompt": f"what should I know before {task['slug']}?",
                    "contribute": "false",
                    "session_id": session,
                },
            )
            if response is None or response.status_code >= 300:
                return
            if self.dna(task, pdsa, {"memory_query_session": session}) and self.transition(task, pdsa, "active"):
                task["step"] = "block"
        elif step == "block":
            if self.dna(task, pdsa, {"blocked_reason": "waiting for the soak"}) and self.transition(
                task, pdsa, "blocked"
            ):
                task["step"] = "restore"
        elif step == "restore":
            if self.transition(task, liaison, "restore"):
                task["blocks"] += 1
                task["step"] = "block" if task["blocks"] < 2 else "cancel"
        elif step == "cancel":
            if self.dna(task, liaison, {"abstract_ref": "soak"}) and self.transition(task, liaison, "cancelled"):
                task["step"] = "done"

    def one(self, rng: random.Random) -> None:
        op = rng.choices([name for name, _ in MIX], weights=[w for _, w in MIX])[0]
        agent = rng.choice(self.agents)
        getattr(self, op)(agent)


# --- resources and faults ---------------------------------------------------------------------------
class Sampler(threading.Thread):
    """CPU % (of one core) and resident memory of the server processes, once a second."""

    def __init__(self, root_pids: list[int]):
        super().__init__(daemon=True)
        self.root_pids = root_pids
        self.cpu: list[float] = []
        self.rss: list[float] = []
        self.by_kind: collections.Counter = collections.Counter()  # summed CPU % samples per kind
        # Beside the server: the whole machine (% of one core, all cores summed), this load client,
        # and every PostgreSQL and Redis process on the machine (their servers aren't our children).
        self.machine: list[float] = []
        self.beside: collections.Counter = collections.Counter()
        self.stop = threading.Event()

    @staticmethod
    def kind(proc) -> str:
        """web / worker / beat / other, from the process's command line."""
        try:
            line = " ".join(proc.cmdline())
        except Exception:  # noqa: BLE001 - a process that just went away
            return "other"
        if "runtime.serve" in line or "uvicorn" in line or "multiprocessing" in line:
            return "web"
        if " beat" in line:
            return "beat"
        if "worker" in line:
            return "worker"
        return "other"

    def processes(self):
        import psutil

        found = {}
        for pid in self.root_pids:
            try:
                root = psutil.Process(pid)
                for proc in [root, *root.children(recursive=True)]:
                    found[proc.pid] = proc
            except psutil.Error:
                pass
        return found

    def sample_beside(self, others: dict) -> None:
        import psutil

        cores = psutil.cpu_count() or 1
        self.machine.append(psutil.cpu_percent(None) * cores)
        seen = set()
        for proc in psutil.process_iter(["name"]):
            name = proc.info["name"] or ""
            label = "client" if proc.pid == os.getpid() else "postgres" if name.startswith("postgres") else None
            label = label or ("redis" if name.startswith("redis-server") else None)
            if label is None:
                continue
            seen.add(proc.pid)
            try:
                if proc.pid not in others:
                    others[proc.pid] = proc
                    proc.cpu_percent(None)
                    continue
                self.beside[label] += others[proc.pid].cpu_percent(None)
            except psutil.Error:
                others.pop(proc.pid, None)
        for pid in set(others) - seen:
            others.pop(pid)

    def run(self):
        import psutil

        known: dict[int, psutil.Process] = {}
        others: dict[int, psutil.Process] = {}
        psutil.cpu_percent(None)
        while not self.stop.wait(1.0):
            self.sample_beside(others)
            current = self.processes()
            new = set()
            for pid, proc in current.items():
                if pid not in known:
                    known[pid] = proc
                    new.add(pid)
                    proc.colony_kind = self.kind(proc)
                    try:
                        proc.cpu_percent(None)
                    except psutil.Error:
                        pass
            cpu = rss = 0.0
            for pid in list(known):
                if pid not in current:
                    known.pop(pid)
                    continue
                try:
                    # A process seen for the first time was just primed: its share over the few
                    # microseconds since is meaningless (a restarted worker read as ~3000%).
                    share = 0.0 if pid in new else known[pid].cpu_percent(None)
                    cpu += share
                    self.by_kind[getattr(known[pid], "colony_kind", "other")] += share
                    rss += known[pid].memory_info().rss
                except psutil.Error:
                    known.pop(pid)
            self.cpu.append(cpu)
            self.rss.append(rss / 2**20)


def health(base: str) -> str:
    import httpx

    started = time.perf_counter()
    try:
        response = httpx.get(f"{base}/api/v1/health", timeout=CLIENT_TIMEOUT)
        body = response.json()
        parts = {k: body.get(k) for k in ("database", "broker", "worker")}
        return f"{response.status_code} {parts} in {(time.perf_counter() - started) * 1000:.0f} ms"
    except Exception as exc:
        return f"no answer ({exc!r})"


def run_faults(args, stack: Stack, base: str, events: list[str], done: threading.Event) -> None:
    plan = []
    if args.fault_worker:
        plan.append((0.2, "worker"))
    if args.fault_postgres:
        plan.append((0.4, "postgres"))
    if args.fault_redis:
        plan.append((0.6, "redis"))
    started = time.monotonic()
    for share, kind in plan:
        if done.wait(max(0.0, started + share * args.duration - time.monotonic())):
            return
        stamp = f"{time.monotonic() - started:5.0f}s"
        if kind == "worker":
            pid = stack.pids("worker1")[-1]
            os.kill(pid, signal.SIGKILL)
            events.append(f"{stamp} SIGKILL worker1 (pid {pid}); supervisor restarts it")
        elif kind == "postgres":
            stack.pg.stop()
            events.append(f"{stamp} PostgreSQL stopped for {args.postgres_down} s")
            time.sleep(min(2, args.postgres_down))
            events.append(f"        health while down: {health(base)}")
            time.sleep(max(0, args.postgres_down - 2))
            stack.pg.start()
            events.append(f"{time.monotonic() - started:5.0f}s PostgreSQL started again")
        elif kind == "redis":
            stack.redis.stop()
            events.append(f"{stamp} redis-server stopped for {args.redis_down} s")
            time.sleep(min(3, args.redis_down))
            events.append(f"        health while down: {health(base)}")
            time.sleep(max(0, args.redis_down - 3))
            stack.redis.start()
            events.append(f"{time.monotonic() - started:5.0f}s redis-server started again")


# --- setup and ground truth -------------------------------------------------------------------------
def soak_note(n: int, agent_name: str, topic: str, rng) -> str:
    """A contribution's text: the soak's notes share most of their words, like a team's routine notes."""
    return (
        f"Soak note {n} from {agent_name}: the {topic} step {uuid.uuid4().hex[:10]} needs a retry with "
        f"backoff after {rng.randint(2, 90)} seconds when the upstream answers slowly."
    )


def django_setup(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def make_agents(base: str) -> list[Agent]:
    from core import services
    from core.models import Agent as AgentRow
    from core.models import Space

    agents = []
    for slug in SPACES:
        space, _ = Space.objects.get_or_create(slug=slug, defaults={"name": f"Soak {slug}"})
        for role in ROLES:
            name = f"{slug}-{role}"
            row = AgentRow.objects.filter(space=space, name=name).first()
            if row is None:
                row, token = services.agent_create(name=name, role=role, space=space, label="soak")
            else:
                token = services.token_create(agent=row, label="soak")
            agents.append(Agent(name=name, role=role, space=slug, token=token, base=base))
    return agents


def ensure_projects(agents: list[Agent]) -> None:
    for agent in agents:
        if agent.role == "pdsa":
            agent.client.post("/api/v1/projects", json={"slug": f"soak-{agent.space}", "name": "Soak"})


def wait_embedded(space_slugs, *, sender, timeout: float) -> int:
    """Ask the workers to run the safety net until no thought of the soak lacks a vector."""
    from brain.models import Thought

    deadline = time.monotonic() + timeout
    while True:
        missing = Thought.objects.filter(space__slug__in=space_slugs, embedding__isnull=True).count()
        if missing == 0 or time.monotonic() > deadline:
            return missing
        if sender is not None:
            sender.send_task("brain.jobs.embed_missing")
        time.sleep(5)


def ground_truth(ledger: Ledger, load: Load, *, sender, timeout: float) -> bool:
    from django.db import connections

    from brain.models import Thought
    from quality.models import TurnLog
    from tasks.models import Task, TransitionLog

    # This process's own connection did not survive a PostgreSQL restart: start afresh.
    connections.close_all()
    say("ground truth: waiting for the workers and the embedding safety net ...")
    missing_vectors = wait_embedded(SPACES, sender=sender, timeout=timeout)
    if missing_vectors and sender is not None:
        say(f"{missing_vectors} thoughts still without a vector; running the safety net in this process")
        from brain.services.thoughts import thoughts_embed_missing

        thoughts_embed_missing()
        missing_vectors = Thought.objects.filter(space__slug__in=SPACES, embedding__isnull=True).count()

    present = set(map(str, Thought.objects.filter(id__in=ledger.contributions).values_list("id", flat=True)))
    transition_ids = [t[1] for t in ledger.transitions]
    logs = {row.id: row for row in TransitionLog.objects.filter(id__in=transition_ids).select_related("marker")}
    transitions_ok = sum(
        1 for _, tid, marker, _ in ledger.transitions if tid in logs and str(logs[tid].marker_id) == str(marker)
    )
    turns_present = TurnLog.objects.filter(id__in=ledger.turns).count()
    half_moved = 0
    for task in load.tasks:
        row = Task.objects.filter(slug=task["slug"], space__slug=task["space"]).first()
        last = TransitionLog.objects.filter(task=row).order_by("-created_at", "-id").first() if row else None
        if row is None or (last is not None and last.to_status != row.status):
            half_moved += 1
    rows = [
        ("contributions (2xx)", len(ledger.contributions), len(present)),
        ("transitions (2xx, log + marker)", len(ledger.transitions), transitions_ok),
        ("turns (2xx)", len(ledger.turns), turns_present),
    ]
    print("\nground truth from the client's log")
    print(f"{'write':34} {'accepted':>9} {'verified':>9} {'lost':>6}")
    lost_total = 0
    for label, accepted, verified in rows:
        lost_total += accepted - verified
        print(f"{label:34} {accepted:9} {verified:9} {accepted - verified:6}")
    print(f"tasks half-moved (status != its last TransitionLog's target): {half_moved} of {len(load.tasks)}")
    print(f"soak thoughts without an embedding after the safety net: {missing_vectors}")
    return lost_total == 0 and half_moved == 0 and missing_vectors == 0


# --- main ---------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Colony soak and fault harness (see the module docstring).")
    parser.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    parser.add_argument("--rate", type=float, default=60, help="requests started per second (default 60)")
    parser.add_argument("--target", default="", help="a running server's base URL (default: start the stack)")
    parser.add_argument("--threads", type=int, default=24, help="client threads (default 24)")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--fault-worker", action="store_true", help="SIGKILL a Celery worker at 20%%")
    parser.add_argument("--fault-postgres", action="store_true", help="stop PostgreSQL at 40%%, then start it")
    parser.add_argument("--fault-redis", action="store_true", help="stop redis-server at 60%% for --redis-down s")
    parser.add_argument("--postgres-down", type=float, default=10)
    parser.add_argument("--redis-down", type=float, default=30)
    parser.add_argument("--folder", default=str(BASE_DIR / "var" / "soak"))
    parser.add_argument("--drain-timeout", type=float, default=180)
    args = parser.parse_args(argv)
    faults = args.fault_worker or args.fault_postgres or args.fault_redis
    if args.target and faults:
        parser.error("faults need the stack this script starts: drop --target")
    if args.target and not urlparse_host_is_loopback(args.target):
        parser.error("--target must be on 127.0.0.1/localhost (the soak sends traffic to loopback only)")

    exit_on_sigterm()
    stack = None
    if args.target:
        base = args.target.rstrip("/")
        if not os.environ.get("DATABASE_URL"):
            parser.error("--target needs DATABASE_URL naming that server's database")
        django_setup(os.environ["DATABASE_URL"])
        sender = None
    try:
        if not args.target:
            stack = Stack(Path(args.folder), web_workers=args.web_workers)
            stack.start()
            base = f"http://127.0.0.1:{stack.port}"
            django_setup(stack.env["DATABASE_URL"])
            os.environ["REDIS_URL"] = stack.env["REDIS_URL"]
            from celery import Celery

            sender = Celery("soak-sender", broker=stack.env["REDIS_URL"], set_as_current=False)
        return soak(args, base, stack, sender)
    finally:
        if stack is not None:
            say("stopping the stack ...")
            stack.stop()


def exit_on_sigterm() -> None:
    """SIGTERM (``kill``, ``timeout``, a CI runner) ends the soak as Ctrl-C does: ``main``'s ``finally``
    stops the stack it started (PostgreSQL, Redis, the supervisor and its processes) instead of leaving
    them running on their ports."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def urlparse_host_is_loopback(url: str) -> bool:
    from urllib.parse import urlparse

    host = urlparse(url).hostname or ""
    return host in {"localhost", "::1"} or host.startswith("127.")


def soak(args, base: str, stack: Stack | None, sender) -> int:
    import httpx

    agents = make_agents(base)
    deadline = time.monotonic() + 180
    while True:
        try:
            if agents[0].client.get("/api/v1/agents/me").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the server at {base} did not answer in 180 s")
        time.sleep(1)
    ensure_projects(agents)
    ledger = Ledger(faults=bool(args.fault_worker or args.fault_postgres or args.fault_redis))
    load = Load(agents, ledger)
    say("warming up (every web worker loads the model once) ...")
    for i in range(4 * args.web_workers):
        load.search(agents[i % len(agents)])
    ledger.latencies.clear()
    ledger.statuses.clear()
    ledger.unexpected.clear()

    sampler = Sampler([stack.process.pid] if stack else [])
    sampler.start()
    events: list[str] = []
    done = threading.Event()
    fault_thread = None
    if stack is not None:
        fault_thread = threading.Thread(target=run_faults, args=(args, stack, base, events, done), daemon=True)
        fault_thread.start()

    tickets: queue.Queue = queue.Queue(maxsize=args.threads * 4)

    def worker(k: int) -> None:
        rng = random.Random(k)
        while True:
            item = tickets.get()
            if item is None:
                return
            load.one(rng)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(args.threads)]
    for thread in threads:
        thread.start()
    say(f"load: {args.rate:.0f} req/s for {args.duration:.0f} s against {base} from {len(agents)} agents ...")
    started = time.monotonic()
    sent = 0
    next_report = started + 30
    while True:
        now = time.monotonic()
        if now - started >= args.duration:
            break
        due = int((now - started) * args.rate)
        while sent < due:
            try:
                tickets.put_nowait(sent)
            except queue.Full:
                ledger.late += 1
            sent += 1
        if now >= next_report:
            with ledger.lock:
                total = sum(ledger.statuses.values())
            say(f"{now - started:4.0f}s: {total} responses, {total / (now - started):.1f}/s")
            next_report += 30
        time.sleep(0.005)
    for _ in threads:
        tickets.put(None)
    for thread in threads:
        thread.join(CLIENT_TIMEOUT * 4)
    wall = time.monotonic() - started
    done.set()
    sampler.stop.set()
    if fault_thread is not None:
        fault_thread.join(120)

    total = sum(ledger.statuses.values())
    print(
        f"\nsoak: {wall:.0f} s, {total} responses, {total / wall:.1f} responses/s (asked {args.rate:.0f}/s; "
        f"{ledger.late} tickets dropped because all {args.threads} client threads were busy)"
    )
    print(f"{'operation':16} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for op in sorted(ledger.latencies):
        samples = ledger.latencies[op]
        print(
            f"{op:16} {len(samples):6} {percentile(samples, 0.5):8.1f} {percentile(samples, 0.95):8.1f} "
            f"{percentile(samples, 0.99):8.1f}"
        )
    by_code = collections.Counter()
    for (_op, code), n in ledger.statuses.items():
        by_code[code] += n
    print("responses by status: " + ", ".join(f"{code}: {n}" for code, n in sorted(by_code.items(), key=str)))
    print(
        "expected refusals (provoked gate refusals): "
        + (", ".join(f"{op} {code}: {n}" for (op, code), n in ledger.expected_refusals.items()) or "none")
    )
    print(
        f"503 during faults: {len(ledger.fault_503)}, p50 {percentile(ledger.fault_503, 0.5):.0f} ms, "
        f"max {max(ledger.fault_503, default=0):.0f} ms, without Retry-After: {ledger.missing_retry_after}"
    )
    unexpected = collections.Counter((op, code) for op, code, _ in ledger.unexpected)
    print("unexpected errors: " + (", ".join(f"{op} {code}: {n}" for (op, code), n in unexpected.items()) or "none"))
    examples = {}
    for op, code, text in ledger.unexpected:
        examples.setdefault((op, code), text)
    for (op, code), text in examples.items():
        print(f"  e.g. {op} {code}: {text}")
    if sampler.cpu:
        print(
            f"server CPU (sum of its processes, % of one core): mean {sum(sampler.cpu) / len(sampler.cpu):.0f}%, "
            f"max {max(sampler.cpu):.0f}%; resident memory max {max(sampler.rss):.0f} MB "
            f"(web, workers, beat; PostgreSQL and Redis not counted)"
        )
        samples = len(sampler.cpu)
        shares = ", ".join(f"{kind} {total / samples:.0f}%" for kind, total in sampler.by_kind.most_common())
        print(f"  mean CPU by process kind (% of one core): {shares}")
        beside = ", ".join(f"{kind} {total / samples:.0f}%" for kind, total in sampler.beside.most_common())
        machine = sum(sampler.machine) / max(1, len(sampler.machine))
        print(
            f"  beside the server (% of one core): {beside}; the whole machine: mean {machine:.0f}% "
            f"of {100 * (os.cpu_count() or 1)}%"
        )
    if events:
        print("faults:")
        for event in events:
            print(f"  {event}")
    fivexx = sum(n for code, n in by_code.items() if isinstance(code, int) and code >= 500 and code != 503)
    machine_percent = sum(sampler.machine) / len(sampler.machine) if sampler.machine else None
    for line in targets_report(
        latencies=ledger.latencies,
        fivexx=fivexx,
        unexpected=len(ledger.unexpected),
        asked_rate=args.rate,
        achieved_rate=total / wall,
        machine_percent=machine_percent,
        cores=os.cpu_count() or 1,
        faults=ledger.faults,
    ):
        print(line)
    ok = ground_truth(ledger, load, sender=sender, timeout=args.drain_timeout)
    print(f"verdict: {'OK' if ok and not unexpected and not fivexx else 'PROBLEMS (see above)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
