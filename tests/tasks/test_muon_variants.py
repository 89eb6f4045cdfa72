"""Muon's options against their papers' reference iterations, each written here from the paper's
pseudo-code, apart from zoo's implementation: the quintic in bfloat16 is torch.optim.Muon's;
Polar Express's coefficients are Amsel et al. 2025's optimal composition (their Algorithm 2,
Remez on each interval) and its iteration theirs (Algorithm 1); NorMuon's steps are Li et al.
2025's (Algorithm 1 as their reference code runs it), on random matrices over several steps."""

from __future__ import annotations

from math import inf, sqrt

import numpy as np
import pytest
import torch
from torch.optim._muon import _zeropower_via_newtonschulz

from zoo.config.errors import ConfigError
from zoo.config.facts.muon import NS_METHODS, NsMethod, NsPrecision
from zoo.config.schema.train import OptimConfig
from zoo.tasks.muon import Muon
from zoo.tasks.orthogonalise import orthogonalise

SHAPES = [(24, 40), (48, 16), (32, 32)]


def _matrix(shape, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# -- Polar Express (Amsel et al. 2025) ------------------------------------------------------------


def _optimal_quintic(lo: float, hi: float) -> tuple[float, float, float]:
    """The odd quintic p closest to 1 on [lo, hi] in the max norm: Remez exchange on the four
    points where p - 1 equioscillates (the paper's Algorithm 2)."""
    if lo / hi >= 1 - 5e-6:
        return (15 / 8) / hi, (-10 / 8) / hi**3, (3 / 8) / hi**5
    q, r = (3 * lo + 1) / 4, (lo + 3) / 4
    error, previous = inf, None
    while previous is None or abs(previous - error) > 1e-15:
        previous = error
        points = np.array([lo, q, r, hi])
        system = np.stack([points, points**3, points**5, np.array([1, -1, 1, -1])], axis=1)
        a, b, c, error = np.linalg.solve(system, np.ones(4))
        q, r = np.sqrt((-3 * b + np.array([-1, 1]) * sqrt(9 * b**2 - 20 * a * c)) / (10 * c))
    return float(a), float(b), float(c)


def _polar_express_coefficients(lo=1e-3, iterations=10, safety=1.01, cushion=0.02):
    """The optimal composition: each iteration's quintic for the interval the previous ones leave,
    cushioned (the lower end at least cushion x the upper, the polynomial recentred around 1),
    every one but the last divided by the safety factor."""
    hi, out = 1.0, []
    for i in range(iterations):
        a, b, c = _optimal_quintic(max(lo, cushion * hi), hi)
        if cushion * hi > lo:
            rescale = 2 / sum(a * t + b * t**3 + c * t**5 for t in (lo, hi))
            a, b, c = a * rescale, b * rescale, c * rescale
        if i < iterations - 1:
            a, b, c = a / safety, b / safety**3, c / safety**5
        out.append((a, b, c))
        lo = a * lo + b * lo**3 + c * lo**5
        hi = 2 - lo
    return out


def _polar_express(g: torch.Tensor, steps: int, coefficients) -> torch.Tensor:
    """Algorithm 1: X0 = G / (1.01 ||G||_F), X <- a X + b X X^T X + c (X X^T)^2 X."""
    x = g.T if g.size(0) > g.size(1) else g
    x = x / (x.norm() * 1.01 + 1e-7)
    for a, b, c in [coefficients[min(i, len(coefficients) - 1)] for i in range(steps)]:
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if g.size(0) > g.size(1) else x


def test_polar_express_coefficients_are_the_papers_optimal_composition():
    ours = NS_METHODS[NsMethod.polar_express].table
    theirs = _polar_express_coefficients()
    # the late iterations' intervals are nearly [1, 1], where Remez's system is ill-conditioned
    assert np.allclose(np.array(ours[:5]), np.array(theirs[:5]), rtol=1e-10, atol=0)
    assert np.allclose(np.array(ours), np.array(theirs), rtol=1e-4, atol=0)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("steps", [5, 12])
def test_polar_express_is_the_papers_iteration_and_its_singular_values_reach_one(shape, steps):
    g = _matrix(shape)
    ours = orthogonalise(g, NsMethod.polar_express, steps, NsPrecision.float32)
    theirs = _polar_express(g.double(), steps, _polar_express_coefficients()).float()
    assert ours.dtype == torch.float32 and ours.shape == g.shape
    assert torch.allclose(ours, theirs, atol=2e-5), (ours - theirs).abs().max()
    if steps >= 10:  # the composition is built for 10 iterations: past them every value is near 1
        singular = torch.linalg.svdvals(ours.double())
        assert (singular - 1).abs().max() < 0.01, singular  # the quintic's stay spread (next test)


def test_the_quintic_is_torchs_iteration_bit_for_bit_and_leaves_its_singular_values_spread():
    for shape in SHAPES:
        g = _matrix(shape, seed=1)
        ours = orthogonalise(g, NsMethod.quintic, 5)
        assert torch.equal(ours, _zeropower_via_newtonschulz(g, NS_METHODS[NsMethod.quintic].table[0], 5, 1e-7))
        singular = torch.linalg.svdvals(orthogonalise(g, NsMethod.quintic, 5, NsPrecision.float32).double())
        assert (singular - 1).abs().max() > 0.1, singular


# -- NorMuon (Li et al. 2025) ---------------------------------------------------------------------


def _newton_schulz5(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """Jordan et al. 2024's iteration as NorMuon's reference code copies it."""
    a, b, c = (3.4445, -4.7750, 2.0315)
    x = g.T if g.size(0) > g.size(1) else g
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if g.size(0) > g.size(1) else x


def _normuon_steps(w, grads, *, lr, wd, beta, beta2):
    """Algorithm 1: M <- lerp(M, G, 1 - beta); U = lerp(G, M, beta) (Nesterov); O = NS5(U);
    v <- lerp(v, mean_row(O^2), 1 - beta2); O' = O / sqrt(v), rescaled to ||O||_F;
    W <- W (1 - lr wd) - lr sqrt(max(1, A / B)) O'."""
    w, m, v = w.clone(), torch.zeros_like(w), torch.zeros(w.shape[0], 1)
    for g in grads:
        m = m + (1 - beta) * (g - m)
        o = _newton_schulz5(g + beta * (m - g))
        v = v + (1 - beta2) * ((o * o).mean(dim=1, keepdim=True) - v)
        scaled = o / (v.sqrt() + 1e-10)
        scaled = scaled * (o.norm() / (scaled.norm() + 1e-10))
        w = w * (1 - lr * wd) - lr * max(1, w.shape[0] / w.shape[1]) ** 0.5 * scaled
    return w


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_normuon_steps_as_the_papers_algorithm(shape):
    w0 = _matrix(shape, seed=2) * 0.1
    grads = [_matrix(shape, seed=10 + i) for i in range(5)]
    hyper = dict(lr=0.02, wd=0.1, beta=0.9, beta2=0.8)
    param = torch.nn.Parameter(w0.clone())
    optimizer = Muon(
        [param],
        lr=hyper["lr"],
        weight_decay=hyper["wd"],
        momentum=hyper["beta"],
        adjust_lr_fn="original",
        muon_variant="normuon",
        normuon_beta2=hyper["beta2"],
        ns_precision="float32",
    )
    plain = torch.nn.Parameter(w0.clone())
    muon = Muon([plain], lr=hyper["lr"], weight_decay=hyper["wd"], momentum=hyper["beta"], adjust_lr_fn="original")
    for g in grads:
        param.grad, plain.grad = g.clone(), g.clone()
        optimizer.step()
        muon.step()
    theirs = _normuon_steps(w0.double(), [g.double() for g in grads], **hyper).float()
    assert torch.allclose(param.detach(), theirs, atol=1e-5), (param - theirs).abs().max()
    assert (plain.detach() - theirs).abs().max() > 1e-3  # Muon's step is another
    row = optimizer.state[param]["row_second_moment"]
    assert row.shape == (shape[0], 1) and row.dtype == torch.float32


def test_normuons_decay_is_read_by_normuon_only():
    assert OptimConfig(kind="muon", muon_variant="normuon", normuon_beta2=0.9).normuon_beta2 == 0.9
    with pytest.raises(ConfigError, match="optim.normuon_beta2 only applies to optim.muon_variant=normuon"):
        OptimConfig(kind="muon", normuon_beta2=0.9)
    with pytest.raises(ConfigError, match=r"optim.normuon_beta2 must be in \[0, 1\), got 1.0"):
        OptimConfig(kind="muon", muon_variant="normuon", normuon_beta2=1.0)
    with pytest.raises(ConfigError, match="optim.ns_method='cubic' is not allowed"):
        OptimConfig(kind="muon", ns_method="cubic")
