"""Which ASGI server for the web process: a retrieve-only memory GET under each candidate.

    python -m benchmarks.web_server [--thoughts 2000] [--requests 300] [--clients 4] [--workers 2]
        [--port 8401] [--only uvicorn,granian]

Seeds the ``colony_bench`` database (real embeddings, reused), starts each server on 127.0.0.1
serving ``config.asgi`` with the same number of workers, warms every worker up, then measures
(a) one client in sequence: p50/p95/p99, (b) ``--clients`` concurrent clients: requests/s and
p50/p95, and the servers' resident memory (all processes). Loopback only, bounded request count.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import db

BASE_DIR = Path(__file__).resolve().parent.parent
PROMPTS = [
    "how do deploys work?",
    "why did the billing job time out?",
    "what broke the search index last week?",
    "how is the backup verified?",
    "which cache settings do we use for auth?",
]


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def candidates(port: int, workers: int) -> dict[str, list[str]]:
    python = sys.executable
    return {
        # What `make run` starts (core/serve.py): uvicorn, uvloop + httptools.
        "uvicorn": [python, "-m", "core.serve"],
        "granian": [
            python,
            "-m",
            "granian",
            "--interface",
            "asgi",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--no-ws",
            "config.asgi:application",
        ],
    }


def rss_mb(pid: int) -> float:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs if p.is_running()) / 2**20
    except psutil.Error:
        return 0.0


def run_one(name: str, command: list[str], *, env: dict, port: int, token: str, args) -> dict:
    import httpx

    base = f"http://127.0.0.1:{port}"
    log = open(BASE_DIR / "var" / f"bench-{name}.log", "w")
    process = subprocess.Popen(
        command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    headers = {"Authorization": f"Bearer {token}"}
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise SystemExit(f"{name} exited with {process.returncode}; see var/bench-{name}.log")
            try:
                if httpx.get(f"{base}/api/v1/agents/me", headers=headers, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not answer in 120 s; see var/bench-{name}.log")
            time.sleep(0.5)
        # Warm-up: every worker loads the model on its first memory call.
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            for i in range(10 * args.workers):
                client.get("/api/v1/memory", params={"prompt": PROMPTS[i % len(PROMPTS)]})

        def call(client, i: int) -> float:
            started = time.perf_counter()
            response = client.get("/api/v1/memory", params={"prompt": f"{PROMPTS[i % len(PROMPTS)]} ({i % 50})"})
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{name}: memory GET answered {response.status_code}: {response.text[:300]}")
            return elapsed

        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            sequential = [call(client, i) for i in range(args.requests)]
        concurrent: list[float] = []
        lock = threading.Lock()
        per_client = args.requests // args.clients

        def worker(k: int) -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
                mine = [call(client, k * per_client + i) for i in range(per_client)]
            with lock:
                concurrent.extend(mine)

        started = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        return {
            "name": name,
            "seq": sequential,
            "conc": concurrent,
            "rps": len(concurrent) / wall,
            "rss": rss_mb(process.pid),
        }
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--thoughts", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8401)
    parser.add_argument("--only", default="uvicorn,granian")
    args = parser.parse_args(argv)

    url = db.setup()
    from benchmarks.brain import _client
    from benchmarks.seed import seed_thoughts

    space, _ = _client()
    seed_thoughts(space, args.thoughts)
    from core import services
    from core.models import Agent

    agent = Agent.objects.get(space=space, name="bench-agent")
    token = services.token_create(agent=agent, label="web-server-benchmark")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "PORT": str(args.port),
        "WEB_WORKERS": str(args.workers),
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    results = []
    for name in args.only.split(","):
        command = candidates(args.port, args.workers)[name]
        print(f"{name}: {' '.join(command[1:])} ...", flush=True)
        results.append(run_one(name, command, env=env, port=args.port, token=token, args=args))
    print(
        f"\nretrieve-only GET /api/v1/memory, {args.thoughts} thoughts, {args.workers} workers, "
        f"{args.requests} requests each way (ms)"
    )
    print(
        f"{'server':10} {'seq p50':>8} {'seq p95':>8} {'seq p99':>8} | "
        f"{args.clients} clients: {'req/s':>6} {'p50':>7} {'p95':>7} | RSS MB"
    )
    for r in results:
        print(
            f"{r['name']:10} {percentile(r['seq'], 0.5):8.1f} {percentile(r['seq'], 0.95):8.1f} "
            f"{percentile(r['seq'], 0.99):8.1f} | {'':10} {r['rps']:6.1f} {percentile(r['conc'], 0.5):7.1f} "
            f"{percentile(r['conc'], 0.95):7.1f} | {r['rss']:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
