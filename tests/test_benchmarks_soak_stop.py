"""The soak stops the stack it started when it is killed with SIGTERM (``kill``, ``timeout``, a CI
runner), not only on Ctrl-C: before, PostgreSQL, Redis and the supervisor's processes kept running on
the soak's ports after the script was gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

# The real Stack starts PostgreSQL, Redis, two web and three Celery processes (tens of seconds); this
# one stands in for it and records what main() asks of it. Its start() blocks, as a slow start does,
# so SIGTERM arrives while the stack is half up: the case that used to leave it running.
CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from benchmarks import soak

    folder = Path(sys.argv[1])

    class FakeStack:
        def __init__(self, folder, *, web_workers):
            self.folder = folder
        def start(self):
            (self.folder / "started").write_text("yes")
            time.sleep(60)
        def stop(self):
            (self.folder / "stopped").write_text("yes")

    soak.Stack = FakeStack
    soak.main(["--duration", "5", "--folder", str(folder)])
    """
)


def test_sigterm_stops_the_stack_the_soak_started(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=BASE_DIR)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists():
            assert child.poll() is None, "the soak ended before it started its stack"
            assert time.monotonic() < deadline, "the soak did not start its stack within 30 s"
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        returncode = child.wait(20)
    finally:
        if child.poll() is None:
            child.kill()
    assert (tmp_path / "stopped").exists(), "SIGTERM left the stack running"
    assert returncode == 128 + signal.SIGTERM
