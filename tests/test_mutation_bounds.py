"""Tests written for mutants of the bound evaluation that survived ``./run mutate`` (benchmarks/mutation.md)."""

from __future__ import annotations

import math

import pytest

from numerics.analysis import analyze
from numerics.bounds import BoundSettings
from tests.synthetic import bert_config, bert_state, write_checkpoint

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48)


def test_reported_complexity_is_the_rademacher_bound_without_dudleys_weight(tmp_path):
    # Kills `post.log_rademacher - log_integral_weight(n)` -> `+` in numerics/analysis.py.
    # Reference: Rad <= (12 / sqrt(n)) * complexity, Dudley's entropy-integral weight 12/sqrt(n)
    # (Bartlett, Foster and Telgarsky 2017, Lemma A.5; theory/dudley.py, integral_weight), so
    # log complexity = log Rad - log 12 + log(n) / 2, computed here by hand.
    folder = write_checkpoint(
        tmp_path / "bert",
        bert_state(layers=2, hidden=24, ff=48, task_head=True),
        bert_config(layers=2, hidden=24, heads=3, ff=48),
    )
    doc = analyze(str(folder), settings=FAST).to_json()
    block = doc["bounds"]["spectrum_adaptive"]
    want = block["log_rademacher"] - math.log(12.0) + 0.5 * math.log(FAST.n)
    assert math.isclose(block["log_complexity"], want, rel_tol=1e-12, abs_tol=1e-12)


def test_rotary_diagnostic_with_a_context_of_one_token_is_the_offset_zero_product():
    # context = 1: the only offset is Delta = 0, where R(0) = I, so the largest s_1 is that of A B^T itself.
    import numpy as np

    from numerics.bounds.rotary import rotary_diagnostic

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    (row,) = rotary_diagnostic([(A, B)], head_dim=4, base=10000.0, context=1)
    assert row["max_s1"] == pytest.approx(np.linalg.norm(A @ B.T, 2), rel=1e-12)


def test_rotary_diagnostic_refuses_an_odd_head_width():
    # rotary heads pair coordinates, so d_h must be even (transformers' rotate_half); the context may be fine
    import numpy as np

    from numerics.bounds.rotary import rotary_diagnostic

    A = np.ones((3, 3))
    with pytest.raises(ValueError, match="head_dim"):
        rotary_diagnostic([(A, A)], head_dim=3, base=10000.0, context=8)
