"""The dev-only scripts' way of mixing another similarity into Colony's ranking (benchmarks/retrieval/sweep.py).

``signal_mixed_in`` wraps the real search: a wrapper that drifted from what ``search._fetch`` returns
would break every "worth building?" script that measures a signal inside Colony (late interaction,
sentence vectors), so the wrapper is run here against the real statement on a real space.
"""

from benchmarks.retrieval.sweep import signal_mixed_in
from brain import ranking
from brain.selectors import search
from brain.selectors.search import thought_search
from tests.conftest import fake_vector


def test_a_mixed_in_signal_reorders_the_real_search_and_is_undone_on_leaving(thought_factory, space):
    near = thought_factory("Deploy runbook for the payments service.")
    far = thought_factory("Deploy checklist for the search cluster.")
    query = "Deploy runbook for the payments service."
    favoured = str(far.id)

    def signal(query_text, vector, candidates):
        assert query_text == query and len(vector) == 384
        return [1.0 if c.id == favoured else 0.0 for c in candidates]

    def order():
        result = thought_search(space=space, vector=fake_vector(query), query_text=query, limit=2)
        return [c.id for c in result.candidates]

    fetch, similarity = search._fetch, ranking._similarity
    assert order() == [str(near.id), str(far.id)]
    with signal_mixed_in(signal) as weight:
        assert order() == [str(near.id), str(far.id)]  # weight 0: the cosine alone
        weight["w"] = 1.0
        assert order() == [str(far.id), str(near.id)]  # the signal alone decides the dense side
    assert (search._fetch, ranking._similarity) == (fetch, similarity)
    assert order() == [str(near.id), str(far.id)]
