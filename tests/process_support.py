"""Reading processes from /proc for the tests of make run and its supervisor: which run, which belong
to a process group, which are a process's children. A zombie counts as gone: it holds nothing any more,
and where PID 1 does not reap orphans it stays a zombie."""

from __future__ import annotations

import time
from pathlib import Path


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command name (state, ppid, pgrp, ...), or None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def gone(*pids: int, within: float = 5.0) -> bool:
    """True once none of ``pids`` runs (a SIGKILL takes effect a moment after it is sent)."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _running() -> dict[int, list[str]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)) and fields[0] != "Z":
            found[int(entry.name)] = fields
    return found


def group(pgid: int) -> list[int]:
    """The running processes of process group ``pgid``."""
    return sorted(pid for pid, fields in _running().items() if int(fields[2]) == pgid)


def children(pid: int) -> dict[int, str]:
    """The running children of ``pid``, with their command lines."""
    found = {}
    for child, fields in _running().items():
        if int(fields[1]) == pid:
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except FileNotFoundError:
                continue
    return found
