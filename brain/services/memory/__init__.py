"""The memory endpoint's orchestration (SPEC 2.2), one small step function per step.

:func:`memory_run` runs ``steps.MEMORY_STEPS`` in order over one ``call.MemoryCall``, then
``response.memory_render`` renders the wire response of the seed brain. Where things are:

- ``threshold.py`` the contribution threshold (what is worth storing);
- ``call.py`` the state of one call;
- ``steps.py`` every step, in order (``MEMORY_STEPS``), and the guidance limits;
- ``response.py`` the response.

A step reads and writes the call object only; guidance is a list of messages joined at the end.
Adding a step means writing one function and putting it at its place in the list.

Knowledge evolution (SPEC 2.5) lives in the steps too: ``step_validate`` applies the
category table (400 MISSING_CATEGORY_FIELDS), ``step_flags`` computes every advisory flag of the
contribution BEFORE it is stored (so the flags are part of the insert, and the keyword-echo rule
reads the agent's recent queries before this call's own query is logged) and runs the
re-contamination guard, ``step_contribute`` stores a correction through ``thought_correct`` (which
supersedes in the same transaction) and schedules contradiction detection for everything else.
One row per fact: a plain contribution whose text (case, Unicode forms and whitespace aside) a live
thought of the space already holds stores nothing; ``step_contribute`` answers with that thought
(``trace.already_known``) and ``step_reinforce`` counts it as returned (``thoughts.thought_known``
locks the text's key in the storing transaction, so identical contributions at once leave one row).

Transactions are per step and short: the contribution (insert + superseding its sources) is one
transaction, the query log another (a retrieve-only call's is written in its search's transaction,
its results named after the response: ``steps.step_reinforce``), the reinforcement of what was
returned a third (run after the response is sent when the caller can, see :func:`memory_run`),
each locking its rows in id order, so
concurrent calls neither lose updates nor deadlock, and the slow model call holds no lock at all.
Everything that can refuse a request (validation, unknown ids, the embedding) runs before the
first write, so a refused call changes nothing.

The search runs before the write when the write can't change what it reads (``step_retrieve_first``:
a retrieve-only call, or a contribution that supersedes nothing), so the query is embedded while the
database runs the search's full-text side and the contribution's near-duplicate check reads the
search's rows; a correction, refinement or consolidation searches after its write
(``step_retrieve``). Either way the answer is the one SPEC 2.2's order (contribute, then retrieve)
gives (``search.thought_search(pending_text=)``), up to the HNSW scan being approximate: the insert
adds a node to its graph, which can change which neighbours a later scan visits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brain.services.memory.call import MemoryCall
from brain.services.memory.response import memory_render
from brain.services.memory.steps import MEMORY_STEPS
from core.models import Agent


def memory_run(
    *,
    agent: Agent,
    request: dict[str, Any],
    defer: Callable[[Callable[[], Any]], None] | None = None,
    read_only: bool = False,
) -> dict[str, Any]:
    """One memory call: the validated request (see brain.apis.memory) in, the wire response out.

    Work the answer does not depend on (reinforcing what was returned) is handed to ``defer``, which
    the API view uses to run it after the response is sent; without ``defer`` it runs before this
    returns. ``read_only`` (a URL token's call, which never contributes) writes nothing at all: see
    ``MemoryCall.read_only``."""
    call = MemoryCall(agent=agent, space=agent.space, request=request, read_only=read_only)
    for step in MEMORY_STEPS:
        step(call)
    rendered = memory_render(call)
    for work in call.after_response:
        if defer is None:
            work()
        else:
            defer(work)
    return rendered
