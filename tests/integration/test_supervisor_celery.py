"""A job a real Celery worker (prefork pool, filesystem broker) is running when `make run`'s supervisor
stops finishes before the worker exits: Celery's warm shutdown, which a SIGTERM to the worker's whole
process group defeated (its pool processes died of it mid-job).

The worker serves a small Celery app of the test's own (no Django, no database): one job that marks its
start, sleeps, and marks its end.
"""

from __future__ import annotations

import io
import os
import runpy
import sys
import threading
import time
from pathlib import Path

import pytest

from runtime.supervisor import Supervisor

pytestmark = pytest.mark.integration

APP = """
import time
from pathlib import Path
from celery import Celery

FOLDER = Path(__file__).parent
# Not made the current app: the test loads this module too, to send the job, and the suite's Celery
# app must stay current.
app = Celery("stoptest", broker="filesystem://", set_as_current=False)
app.conf.broker_transport_options = {
    "data_folder_in": str(FOLDER / "queue"),
    "data_folder_out": str(FOLDER / "queue"),
    "control_folder": str(FOLDER / "control"),
}
app.conf.task_acks_late = True
app.conf.worker_prefetch_multiplier = 1


@app.task(name="stoptest.slow_job")  # the same name when the test loads this file
def slow_job():
    (FOLDER / "job.started").write_text("started")
    time.sleep(3)
    (FOLDER / "job.done").write_text("done")
"""


def test_a_running_job_finishes_when_the_supervisor_stops_the_worker(tmp_path):
    for name in ("queue", "control"):
        (tmp_path / name).mkdir()
    (tmp_path / "stoptest.py").write_text(APP)
    out = io.StringIO()
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # else Celery's Django fixup loads Colony's settings
    supervisor = Supervisor(
        {
            "worker": "celery -A stoptest:app worker --loglevel INFO --concurrency 2 --without-mingle"
            " --without-gossip --hostname stoptest@%h"
        },
        env=env,
        cwd=tmp_path,
        out=out,
    )
    thread = threading.Thread(target=supervisor.run, daemon=True)
    thread.start()
    try:
        # The worker's own app (its broker folders) sends the job.
        runpy.run_path(str(tmp_path / "stoptest.py"))["slow_job"].delay()
        deadline = time.monotonic() + 60
        while not (tmp_path / "job.started").exists():
            assert time.monotonic() < deadline, f"the job did not start:\n{out.getvalue()}"
            time.sleep(0.1)
    finally:
        supervisor.request_stop()
        thread.join(40)
    assert not thread.is_alive(), f"the supervisor did not return:\n{out.getvalue()}"
    log = out.getvalue()
    assert (tmp_path / "job.done").exists(), f"the running job was killed:\n{log}"
    assert "did not stop" not in log
    assert "exited with 'signal 15" not in log
