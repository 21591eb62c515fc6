"""irt/cat.py: hand-worked likelihoods, EAP/MAP against brute-force integration, expected scores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragrade.irt import cat
from ragrade.irt.model import information, prob


def _items() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array([1.0, 1.5, 0.7]), np.array([0.0, 1.0, -0.5]), np.array([0.0, 0.2, 0.25])


def test_response_loglik_hand_worked() -> None:
    grid = np.array([0.0])
    d, b, g = _items()
    # item 0 at theta = b: p = 0.5, so a right answer has log-likelihood log 0.5
    assert cat.response_loglik(grid, d[:1], b[:1], g[:1], [1])[0] == pytest.approx(math.log(0.5))
    p1 = 0.2 + 0.8 / (1 + math.exp(1.5))  # item 1 at theta 0
    want = math.log(0.5) + math.log(1 - p1)
    assert cat.response_loglik(grid, d[:2], b[:2], g[:2], [1, 0])[0] == pytest.approx(want)
    assert cat.response_loglik(grid, d[:0], b[:0], g[:0], []).tolist() == [0.0]


def test_eap_matches_fine_numerical_integration() -> None:
    d, b, g = _items()
    grid = cat.theta_points()
    ll = cat.response_loglik(grid, d, b, g, [1, 0, 1])
    m, sd, w = cat.eap(grid, ll[None, :], np.array([0.3]), np.array([1.2]))
    fine = np.linspace(-8, 8, 20001)
    post = np.exp(cat.response_loglik(fine, d, b, g, [1, 0, 1]) - 0.5 * ((fine - 0.3) / 1.2) ** 2)
    post /= post.sum()
    mean = float(post @ fine)
    assert m[0] == pytest.approx(mean, abs=1e-3)
    assert sd[0] == pytest.approx(math.sqrt(post @ fine**2 - mean**2), abs=1e-3)
    assert w.shape == (1, len(grid)) and w.sum() == pytest.approx(1.0)


def test_eap_without_answers_is_the_prior() -> None:
    grid = cat.theta_points()
    m, sd, _ = cat.eap(grid, np.zeros((2, len(grid))), np.array([0.0, 1.0]), np.array([1.0, 0.5]))
    assert m == pytest.approx([0.0, 1.0], abs=1e-6) and sd == pytest.approx([1.0, 0.5], abs=1e-3)


def test_map_is_the_posterior_mode_and_its_se() -> None:
    d, b, g = _items()
    grid = cat.theta_points()
    y = [1, 1, 0]
    mode = cat.map_estimate(grid, cat.response_loglik(grid, d, b, g, y)[None, :], np.array([0.0]), np.array([1.0]))
    fine = np.linspace(-4, 4, 80001)
    lp = cat.response_loglik(fine, d, b, g, y) - 0.5 * fine**2
    assert mode[0] == pytest.approx(fine[np.argmax(lp)], abs=2e-3)
    info = information(mode, d, b, g).sum()
    assert cat.map_se(np.array([info]), np.array([1.0]))[0] == pytest.approx(1 / math.sqrt(info + 1.0))


def test_information_is_the_models() -> None:
    d, b, g = _items()
    assert np.allclose(cat.information_at(np.array([0.2, -1.0]), d, b, g), information(np.array([0.2, -1.0]), d, b, g))


def test_expected_score_at_a_known_ability_is_the_sum_of_probabilities() -> None:
    d, b, g = _items()
    grid = np.array([-1.0, 0.5, 2.0])
    P, Q = cat.grid_probabilities(grid, d, b, g)
    w = np.array([[0.0, 1.0, 0.0]])  # all posterior mass at theta = 0.5
    unasked = np.array([[1.0, 0.0, 1.0]])
    mean, var = cat.expected_score(w, P, Q, unasked)
    p = prob(np.array([0.5]), d, b, g)[:, 0]
    assert mean[0] == pytest.approx(p[0] + p[2])
    assert var[0] == pytest.approx(p[0] * (1 - p[0]) + p[2] * (1 - p[2]))
    # spread over abilities adds the variance of the expected sum
    w2 = np.array([[0.5, 0.0, 0.5]])
    mean2, var2 = cat.expected_score(w2, P, Q, unasked)
    s = (unasked @ P)[0]
    v = (unasked @ Q)[0]
    assert mean2[0] == pytest.approx(0.5 * s[0] + 0.5 * s[2])
    assert var2[0] == pytest.approx(0.25 * (s[0] - s[2]) ** 2 + 0.5 * (v[0] + v[2]))
