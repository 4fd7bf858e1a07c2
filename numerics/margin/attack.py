"""An upper bound on the all-layer margin: a gradient search for a small perturbation that moves the output by ``gamma``.

The margin certified by :mod:`numerics.margin.certify` is the largest radius ``r`` such that no perturbation with
``sqrt(sum_o ||delta_o||^2) <= r`` (block output ``o`` moved by ``delta_o / omega_o``, ``2 -> inf`` norms) moves
the network's output rows by ``gamma``. Any perturbation that does move them by ``gamma`` bounds that margin from
above by its own size. :func:`attack` looks for one: at a radius ``r`` it maximises the output's deviation over
perturbations of that radius (Adam on an unconstrained parametrisation: ``delta_o = r w_o cap(Y_o)`` with ``w``
on the unit sphere and ``cap`` shrinking each row of ``Y_o`` to norm at most 1), then doubles ``r`` until the
deviation reaches ``gamma`` and bisects. The perturbation found is re-run once in float64 and its own size
reported: an upper bound that needs no trust in the search.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch  # optional: torch (the margin extra)

from numerics.margin.network import Encoder, forward

__all__ = ["Attack", "attack", "deviation"]


@dataclass(frozen=True)
class Attack:
    """The attack's result for one sample.

    Attributes:
        radius: the size ``sqrt(sum_o (omega_o ||Delta_o||)^2)`` of the perturbation found (``inf`` if none moved the
            output by ``gamma`` up to ``max_radius``): an upper bound on the all-layer margin.
        deviation: the output's ``2 -> inf`` deviation under it (at least ``gamma`` when ``radius`` is finite).
        tried: the radii the search scored.
    """

    radius: float
    deviation: float
    tried: tuple[float, ...]


def deviation(
    encoder: Encoder, ids: torch.Tensor, deltas: Sequence[torch.Tensor | None], clean: torch.Tensor
) -> torch.Tensor:
    """``max_t ||F(x, Delta)_t - F(x)_t||_2``: how far the output rows move under the perturbation ``deltas``."""
    out = forward(encoder, ids, deltas)[-1]
    return torch.linalg.vector_norm(out - clean, dim=-1).max()


def _perturbation(r: float, v: torch.Tensor, Y: torch.Tensor, inv_omega: torch.Tensor) -> list[torch.Tensor]:
    w = v.abs() / torch.linalg.vector_norm(v).clamp_min(1e-300)
    rows = torch.linalg.vector_norm(Y, dim=-1, keepdim=True).clamp_min(1.0)
    return list((r * w * inv_omega)[:, None, None] * (Y / rows))


def _best_at(
    encoder: Encoder,
    ids: torch.Tensor,
    clean: torch.Tensor,
    inv_omega: torch.Tensor,
    r: float,
    start: tuple[torch.Tensor, torch.Tensor],
    steps: int,
) -> tuple[float, tuple[torch.Tensor, torch.Tensor]]:
    v, Y = (t.clone().requires_grad_(True) for t in start)
    opt = torch.optim.Adam([v, Y], lr=0.05)
    best, best_state = -math.inf, start
    for _ in range(steps):
        opt.zero_grad()
        dev = deviation(encoder, ids, _perturbation(r, v, Y, inv_omega), clean)
        if float(dev.detach()) > best:
            best, best_state = float(dev.detach()), (v.detach().clone(), Y.detach().clone())
        (-dev).backward()
        opt.step()
    return best, best_state


def attack(
    encoder: Encoder,
    ids: torch.Tensor,
    omega: Sequence[float] | np.ndarray,
    gamma: float,
    *,
    start_radius: float,
    steps: int = 60,
    bisections: int = 10,
    max_radius: float = 1e6,
    growth: float = 2.0,
    seed: int = 0,
) -> Attack:
    """A perturbation of small size that moves the output by ``gamma`` (module docstring).

    ``omega[o]`` ``inf`` for a block output that is not perturbed. ``start_radius``: where the search starts (the
    certified lower bound is a natural choice: no perturbation below it succeeds); the radius grows by ``growth``
    until the output moves by ``gamma``, then ``bisections`` halve the last step in ``log r``.
    """
    omega_arr = np.asarray(list(omega), dtype=np.float64)
    if omega_arr.size != encoder.num_blocks + 1:
        raise ValueError(f"omega has {omega_arr.size} entries; expected {encoder.num_blocks + 1}.")
    if not (start_radius > 0 and gamma > 0 and growth > 1):
        raise ValueError(f"start_radius={start_radius!r}, gamma={gamma!r} must be positive and growth={growth!r} > 1.")
    inv_omega = torch.from_numpy(np.where(np.isfinite(omega_arr), 1.0 / omega_arr, 0.0))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        clean = forward(encoder, ids)[-1]
    T, N = int(clean.shape[0]), encoder.hidden  # rows of the output (a patch model's: the patches and CLS)
    state = (
        torch.ones(omega_arr.size, dtype=torch.float64),
        torch.randn(omega_arr.size, T, N, dtype=torch.float64, generator=gen),
    )
    tried: list[float] = []
    low, high, found = 0.0, start_radius, None
    while high <= max_radius:
        tried.append(high)
        best, state = _best_at(encoder, ids, clean, inv_omega, high, state, steps)
        if best >= gamma:
            found = state
            break
        low, high = high, growth * high
    if found is None:
        return Attack(math.inf, math.nan, tuple(tried))
    success = (high, found)
    for _ in range(bisections):
        mid = math.sqrt(low * high) if low > 0 else high / 2
        tried.append(mid)
        best, state = _best_at(encoder, ids, clean, inv_omega, mid, success[1], steps)
        if best >= gamma:
            high, success = mid, (mid, state)
        else:
            low = mid
    r, (v, Y) = success
    with torch.no_grad():
        deltas = _perturbation(r, v, Y, inv_omega)
        dev = float(deviation(encoder, ids, deltas, clean))
        sizes = [float(torch.linalg.vector_norm(d, dim=-1).max()) for d in deltas]
    size = math.sqrt(sum((o * s) ** 2 for o, s in zip(omega_arr, sizes) if math.isfinite(o)))
    if not dev >= gamma:  # the re-run must confirm it; else report no upper bound rather than a wrong one
        return Attack(math.inf, dev, tuple(tried))
    return Attack(size, dev, tuple(tried))
