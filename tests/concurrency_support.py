"""Run callables in threads released at once (races against the real database)."""

from __future__ import annotations

import threading

from django.db import connection


def run_concurrently(jobs: list, *, timeout: float = 60) -> list:
    """Run ``jobs`` (callables) in as many threads, released together; returns each result or exception.
    Each thread closes its own database connection when done."""
    barrier = threading.Barrier(len(jobs))
    results: list = [None] * len(jobs)

    def run(index, job):
        try:
            barrier.wait(timeout)
            results[index] = job()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung: deadlock or lost wake-up"
    return results
