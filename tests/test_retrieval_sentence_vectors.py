"""The dev-only sentence-vectors script: where it cuts a turn, and the "best part" similarity."""

import numpy as np
import pytest

from benchmarks.retrieval.sentence_vectors import best_part, parts


def test_a_turn_is_cut_at_sentences_colons_dashes_and_conjunction_clauses():
    assert parts("The pool has 30 connections per pod. We run eight pods now.") == [
        "The pool has 30 connections per pod.",
        "We run eight pods now.",
    ]
    assert parts("Decision for the retro: we keep the Tuesday slot - Ada books the room") == [
        "Decision for the retro",
        "we keep the Tuesday slot",
        "Ada books the room",
    ]
    assert parts("The canary passed on staging, but the rollout waits for Friday's freeze to end.") == [
        "The canary passed on staging",
        "but the rollout waits for Friday's freeze to end.",
    ]


def test_a_turn_that_says_one_thing_has_no_parts_and_short_bits_are_not_parts():
    assert parts("The migration finished at 02:10 without errors.") == []
    assert parts("OK. Thanks, Ada. The freeze ends on Friday at noon.") == []  # one part of 3+ words
    assert parts("") == []


def test_best_part_is_the_highest_cosine_of_the_turn_or_any_part():
    x, y, z = np.eye(3, dtype=np.float32)
    assert best_part(x, 0.4, None) == pytest.approx(0.4)  # one part: the turn's own cosine
    assert best_part(x, 0.4, np.stack([y, x])) == pytest.approx(1.0)
    assert best_part(x, 0.4, np.stack([y, z])) == pytest.approx(0.4)  # no part beats the turn
