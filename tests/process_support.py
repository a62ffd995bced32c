"""Which processes run, for the tests of make run and its supervisor. A zombie counts as gone: it
holds nothing any more, and where PID 1 does not reap orphans it stays a zombie."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone(*pids: int, within: float = 5.0) -> bool:
    """True once none of ``pids`` runs (a SIGKILL takes effect a moment after it is sent)."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def group(pgid: int) -> list[int]:
    """The running processes of process group ``pgid``."""
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and alive(pid):
                members.append(pid)
        except ProcessLookupError:
            continue
    return sorted(members)


def children(pid: int) -> dict[int, str]:
    """The running children of ``pid``, with their command lines."""
    try:
        kids = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return {}
    found = {}
    for child in kids:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                found[child.pid] = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
    return found


def stop(process: subprocess.Popen, timeout: float) -> None:
    """Stop a process as make run is stopped (SIGTERM), killing it if it is not gone within ``timeout``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
