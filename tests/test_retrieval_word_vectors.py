"""The dev-only word-vectors script's pooling (benchmarks/retrieval/word_vectors.py)."""

import numpy as np
import pytest

from benchmarks.retrieval.word_vectors import mean_unit_vectors


def test_a_text_is_the_unit_mean_of_its_tokens_rows_and_a_text_without_tokens_is_zeros():
    matrix = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]], dtype=np.float16)
    vectors = mean_unit_vectors([[0, 1], [2], [], [0, 0, 1]], matrix)
    assert vectors.dtype == np.float32
    assert vectors[0] == pytest.approx([2**-0.5, 2**-0.5])
    assert vectors[1] == pytest.approx([0.6, 0.8])
    assert vectors[2] == pytest.approx([0.0, 0.0])
    assert vectors[3] == pytest.approx(np.array([2.0, 1.0]) / 5**0.5)  # a repeated token counts twice
