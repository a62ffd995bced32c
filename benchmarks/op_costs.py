"""What one request of each soak operation costs in CPU, in every process of the stack.

    python -m benchmarks.op_costs [--calls 200] [--web-workers 2]

The soak (``benchmarks/soak.py``) saturates two cores below its target rate; this says where the
CPU goes. It starts the same production-shape stack as the soak (PostgreSQL over TCP, Redis, uvicorn,
two Celery workers, beat), then for each operation of the soak's mix sends ``--calls`` requests one
after the other (one client, keep-alive), waits until the Celery queue is empty and the workers are
idle, and prints the CPU time per request spent by: the web processes, the Celery workers (the
follow-up jobs the request scheduled), PostgreSQL (every postgres process of the stack's server),
Redis, and the client itself. CPU time comes from /proc (utime + stime), so the figures do not
depend on the machine's load the way latencies do. Loopback only; bounded call counts.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from pathlib import Path

from benchmarks.soak import BASE_DIR, Agent, Ledger, Load, Stack, django_setup, ensure_projects, make_agents, say

OPERATIONS = ("search", "contribute", "task", "turn", "read")


def cpu_seconds(processes) -> float:
    import psutil

    total = 0.0
    for proc in processes:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


class Groups:
    """The stack's processes by kind, found again on every reading (workers may restart)."""

    def __init__(self, stack: Stack):
        self.stack = stack

    def read(self) -> dict[str, float]:
        import psutil

        from benchmarks.soak import Sampler

        groups: dict[str, list] = {"web": [], "worker": [], "beat": [], "postgres": [], "redis": []}
        root = psutil.Process(self.stack.process.pid)
        for proc in root.children(recursive=True):
            kind = Sampler.kind(proc)
            if kind in groups:
                groups[kind].append(proc)
        pgdata, redis_port = str(self.stack.pg.pgdata), str(self.stack.redis.port)
        for proc in psutil.process_iter(["name", "cmdline"]):
            line = " ".join(proc.info["cmdline"] or [])
            if (proc.info["name"] or "").startswith("postgres") and pgdata in line:  # the postmaster
                groups["postgres"] += [proc, *proc.children()]
            elif (proc.info["name"] or "").startswith("redis-server") and redis_port in line:
                groups["redis"].append(proc)
        readings = {kind: cpu_seconds(procs) for kind, procs in groups.items()}
        readings["client"] = cpu_seconds([psutil.Process(os.getpid())])
        return readings


def healthy(agent: Agent) -> bool:
    import httpx

    try:
        return agent.client.get("/api/v1/health").status_code == 200
    except httpx.HTTPError:
        return False


def queue_empty(redis_url: str) -> bool:
    import redis

    return redis.Redis.from_url(redis_url).llen("celery") == 0


def settle(groups: Groups, redis_url: str, *, timeout: float = 120.0) -> None:
    """Wait until the Celery queue is empty and the workers used no CPU for a second."""
    deadline = time.monotonic() + timeout
    last = groups.read()["worker"]
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = groups.read()["worker"]
        if queue_empty(redis_url) and now - last < 0.01:
            return
        last = now
    say(f"the workers did not settle within {timeout:.0f} s; figures include unfinished jobs")


def measure(load: Load, agents: list[Agent], op: str, calls: int, groups: Groups, redis_url: str) -> dict:
    rng = random.Random(11)
    settle(groups, redis_url)
    before = groups.read()
    started = time.perf_counter()
    for _ in range(calls):
        getattr(load, op)(rng.choice(agents))
    wall = time.perf_counter() - started
    settle(groups, redis_url)
    after = groups.read()
    # A settle second of idle beat/redis/postgres background is in the delta; it is small and shared.
    return {kind: 1000 * (after[kind] - before[kind]) / calls for kind in after} | {"wall": 1000 * wall / calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--folder", default=str(BASE_DIR / "var" / "op-costs"))
    parser.add_argument("--only", default="", help="comma-separated operations (default: all)")
    args = parser.parse_args(argv)
    operations = [op for op in (args.only.split(",") if args.only else OPERATIONS) if op]
    folder = Path(args.folder)
    if folder.exists():  # every run starts from empty spaces, so runs compare
        shutil.rmtree(folder)
    stack = Stack(folder, web_workers=args.web_workers)
    stack.start()
    try:
        django_setup(stack.env["DATABASE_URL"])
        base = f"http://127.0.0.1:{stack.port}"
        agents = make_agents(base)
        deadline = time.monotonic() + 180
        while not healthy(agents[0]):
            if time.monotonic() > deadline:
                raise SystemExit("the stack did not become healthy in 180 s")
            time.sleep(1)
        ensure_projects(agents)
        load = Load(agents, Ledger())
        for i in range(10 * args.web_workers):  # every worker loads its model (a fresh folder exports it first)
            load.search(agents[i % len(agents)])
            load.contribute(agents[i % len(agents)])
        warmup_unexpected = list(load.ledger.unexpected)  # a warm-up call may wait out the export
        load.ledger.unexpected.clear()
        groups = Groups(stack)
        rows = {}
        for op in operations:
            say(f"{op}: {args.calls} calls ...")
            rows[op] = measure(load, agents, op, args.calls, groups, stack.env["REDIS_URL"])
        unexpected = load.ledger.unexpected
        kinds = ["web", "worker", "postgres", "redis", "beat", "client"]
        print(f"\nCPU ms per request ({args.calls} calls each, one client, {args.web_workers} web workers)")
        print(f"{'operation':12}" + "".join(f"{k:>10}" for k in kinds) + f"{'total':>10}{'wall ms':>10}")
        for op, row in rows.items():
            total = sum(row[k] for k in kinds if k != "client")
            print(f"{op:12}" + "".join(f"{row[k]:10.1f}" for k in kinds) + f"{total:10.1f}{row['wall']:10.1f}")
        mix = {"search": 50, "contribute": 20, "task": 15, "turn": 10, "read": 5}
        if set(mix) <= set(rows):
            weighted = {k: sum(rows[op][k] * share for op, share in mix.items()) / 100 for k in kinds}
            total = sum(weighted[k] for k in kinds if k != "client")
            print(f"{'soak mix':12}" + "".join(f"{weighted[k]:10.1f}" for k in kinds) + f"{total:10.1f}")
            print(f"the server's CPU at 50 requests/s: {total * 50 / 10:.0f}% of one core (2 cores = 200%)")
        if warmup_unexpected:
            print(f"unexpected responses while warming up: {len(warmup_unexpected)}, e.g. {warmup_unexpected[:3]}")
        if unexpected:
            print(f"unexpected responses: {len(unexpected)}, e.g. {unexpected[:3]}")
        return 0
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(BASE_DIR))
    sys.exit(main())
