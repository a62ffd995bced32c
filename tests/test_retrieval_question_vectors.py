"""The retrieval benchmark's dense baseline searches with the vector the endpoint computes for the
question (embedded alone), not one that depends on which other questions shared its model run."""

from benchmarks.retrieval import run
from benchmarks.retrieval.dataset import load
from brain import embedding


def test_each_question_vector_is_the_one_the_endpoint_computes():
    questions = [q.question for q in load("dev").questions[:40]]
    vectors = run.question_vectors(questions)
    alone = []
    for text in questions:
        embedding.query_cache.clear()  # the endpoint's path: embed() of the prompt, computed
        alone.append(embedding.embed(text))
    assert vectors == alone
    # What the function guards against: embedded together, some questions get other vectors (int8).
    together = embedding.embed_many(questions, batch_size=len(questions))
    assert together != alone
