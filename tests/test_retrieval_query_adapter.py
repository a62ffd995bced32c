"""The dev-only query-adapter script's parts: the training learns a mapping the identity misses, the
regulariser holds it at the identity, recall@10 is counted per space, and the folds never split a
conversation."""

from collections import namedtuple

import torch

from benchmarks.retrieval.query_adapter import DIMENSIONS, Split, folds, recall_at_10, share, train

Question = namedtuple("Question", "id conversation type evidence")


def _split(*, conversations: int = 4, turns: int = 40, asked: int = 12) -> Split:
    """Questions whose vectors are their evidence turn's with the coordinates permuted: the identity
    ranks the evidence at random, a learned W can undo the permutation."""
    generator = torch.Generator().manual_seed(7)
    count = conversations * turns
    turn_vectors = torch.nn.functional.normalize(torch.randn(count, DIMENSIONS, generator=generator), dim=-1)
    permutation = torch.randperm(DIMENSIONS, generator=generator)
    questions, rows, spans = [], [], {}
    for c in range(conversations):
        spans[f"c{c}"] = (c * turns, (c + 1) * turns)
        for k in range(asked):
            row = c * turns + k
            questions.append(Question(f"q{c}-{k}", f"c{c}", "paraphrase", (f"t{row}",)))
            rows.append(turn_vectors[row][permutation])
    return Split(
        questions=questions,
        turn_vectors=turn_vectors,
        question_vectors=torch.stack(rows),
        spans=spans,
        row_of={f"t{i}": i for i in range(count)},
    )


def test_training_learns_what_the_identity_misses_and_a_strong_regulariser_keeps_the_identity():
    split = _split()
    everyone = range(len(split.questions))
    before = share(recall_at_10(split, everyone))
    assert before < 50  # 10 of 40 turns at random
    learned = train(split, everyone, lam=0.0, tau=0.05, steps=60, lr=1e-2)
    assert share(recall_at_10(split, everyone, learned)) == 100.0
    held = train(split, everyone, lam=100.0, tau=0.05, steps=60, lr=1e-2)
    identity = torch.eye(DIMENSIONS)
    assert torch.linalg.norm(held - identity) < torch.linalg.norm(learned - identity) / 20
    assert share(recall_at_10(split, everyone, held)) < 50


def test_recall_ranks_only_the_questions_own_space():
    split = _split(conversations=2, turns=10, asked=3)
    # The question's vector equals its evidence exactly; a copy of it in the other space changes nothing.
    split.question_vectors = split.turn_vectors[[0, 1, 2, 10, 11, 12]].clone()
    split.turn_vectors[15] = split.turn_vectors[0]
    hits = recall_at_10(split, range(6))
    assert hits == {"paraphrase": [True] * 6}


def test_folds_cover_every_question_once_and_never_split_a_conversation():
    split = _split(conversations=12, turns=12, asked=2)
    held_out = folds(split)
    assert len(held_out) == 4
    assert sorted(i for fold in held_out for i in fold) == list(range(len(split.questions)))
    for fold in held_out:
        inside = {split.questions[i].conversation for i in fold}
        outside = {q.conversation for j, q in enumerate(split.questions) if j not in fold}
        assert inside and not inside & outside
