"""The dev-only late-interaction script's score: MaxSim, the mean over the question's tokens of each
one's best cosine with any token of the turn."""

import numpy as np
import pytest

from benchmarks.retrieval.late_interaction import maxsim


def test_each_question_token_takes_its_best_turn_token_and_the_bests_are_averaged():
    x, y, z = np.eye(3, dtype=np.float32)
    turn = np.stack([x, y])
    assert maxsim(np.stack([x, y]), turn) == pytest.approx(1.0)
    assert maxsim(np.stack([x, z]), turn) == pytest.approx(0.5)  # z matches nothing in the turn
    halfway = (x + z) / np.linalg.norm(x + z)
    assert maxsim(np.stack([halfway]), turn) == pytest.approx(2**-0.5)


def test_it_is_asymmetric_a_turn_with_more_than_the_question_is_not_penalised():
    x, y, z = np.eye(3, dtype=np.float32)
    assert maxsim(np.stack([x]), np.stack([x, y, z])) == pytest.approx(1.0)
    assert maxsim(np.stack([x, y, z]), np.stack([x])) == pytest.approx(1 / 3)
