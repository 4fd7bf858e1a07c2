"""The composition fuzzer extended to the all-layer margin bound (issue 34; theory.all_layer_margin).

The all-layer bound rests on three statements about the network, each checked here against a small random BERT
(``composition_forward.build("bert")``: 2 layers, ``N = 8``, 2 heads, non-zero random biases, gains and betas) by a
gradient search that tries to break it, with every number read from specbound's own analysis of the saved checkpoint
and from the bound itself (:func:`numerics.bounds.all_layer.all_layer_bound`: its terms, ``rho_j``, ``omega_b``,
input scales; the certificate's radius, amplifications and claimed output bound, :mod:`numerics.margin.certify`):

1. **The margin statement** (the certificate): no perturbation ``delta`` of the block outputs of size at most the
   certified radius ``r(x)`` (block output ``o`` moved by ``delta_o / omega_o``, ``sqrt(sum_o ||delta_o||^2) <= r``)
   moves the network's output by more than the certificate's ``output_bound`` (below ``gamma``), so no readout with
   output margin ``gamma`` errs: ``m_F(x) >= r(x)``. The same over the box the certificate composes over
   (``||delta_o|| <= r`` each): the output moves by at most ``r sum_o kappa_o / omega_o`` and block ``i``'s input by
   at most the certificate's ``E_i``.
2. **The per-block covers** (the covers' metric and the composition inside a block): perturbing the terms of block
   ``b`` (its matrices and the gain and beta of the norm that starts it) by ``Delta_j``, each of size ``eps_j`` in the
   *uniform* metric the bound covers it in (``B_j ||Delta_j||_2``, ``B_j^2 ||Delta_j||_2`` for a query-key product,
   ``sqrt(N) ||Delta||_inf`` for a gain, with the perturbed term in its class, ``||W_j + Delta_j||_2 <= s_j``: internal
   covers), moves the block's output by at most ``sum_j lambda_j eps_j`` **on every input** ``u`` (the lemma's
   ``d_b`` is a sup over all inputs), ``lambda_j = rho_j / omega_b`` the local factor of the bound's term.
3. **The lemma on the sample** (what the covering step uses): with every term perturbed within an allocation the bound
   can assign at scale ``eps`` (``sum_j rho_j eps_j <= eps``), the perturbed network ``F'`` under any ``delta`` of size
   ``r(x) - sum_j rho_j eps_j`` stays within ``output_bound`` of the clean output: ``F'`` under ``delta`` computes what
   ``F`` computes under ``delta' = delta + omega (f' - f)``, whose size is at most ``r(x)`` (Minkowski), so
   ``m_{F'}(x) >= m_F(x) - eps``.

A ratio above 1 (change over what the bound promises) is a bug in the bound. The search: Adam on the raw
perturbation directions (each scaled to its size, then held in its class) and on the input, from the sample's own
block input and from random rows. In the suite: one model, the sample it was built on, three per-block allocations
(every matrix at its class radius, the value-output products alone, the output bias alone: the last is tight, ratio 1
up to rounding) and two for the lemma, briefly (about 11 s of CPU). ``SPECBOUND_FUZZ_LONG=1`` runs two more models
(another seed, 3 layers), four samples, every allocation, three sequence lengths for the per-block inputs and more
restarts, and prints every ratio (31 minutes; the ratios found are in docs/theory/all-layer-margin.md).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from composition_forward import Network, build, clip_to_class, network, outside_class  # noqa: E402

from numerics.bounds import all_layer  # noqa: E402
from numerics.io.checkpoint import open_checkpoint  # noqa: E402
from numerics.margin import certify  # noqa: E402
from numerics.margin import network as margin_network  # noqa: E402

LONG = os.environ.get("SPECBOUND_FUZZ_LONG") == "1"

#: Float tolerance of ``ratio <= 1``: everything runs in float64 on matrices of width 8 to 36.
TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class Chain:
    """One model, its samples, their certificates and the all-layer bound assembled from them.

    ``lam[j]``, ``rho[j]``, ``scale[j]``, ``block[j]``: per term of :attr:`Network.terms` (matched by name to the
    bound's terms), the local factor ``rho_j / omega_b``, the bound's ``rho_j``, its input scale in the uniform metric
    and its block; ``omega``: per block output ``o = 0 .. K`` (``inf`` for the embeddings sum: the tables are fixed).
    """

    net: Network
    bound: all_layer.AllLayerBound
    ids: tuple[torch.Tensor, ...]  # each sample's token ids (the first: the one the model was built on)
    samples: tuple[torch.Tensor, ...]  # each sample's embeddings sum [T, N]
    certificates: tuple[certify.Certificate, ...]
    omega: np.ndarray
    lam: np.ndarray
    rho: np.ndarray
    scale: np.ndarray
    block: np.ndarray


def _chain(name: str, folder, seed: int, lengths: Sequence[int]) -> Chain:
    built = build(name, folder, seed=seed)
    net = network(built)
    encoder = margin_network.load_encoder(open_checkpoint(str(built.folder)))
    rng = np.random.default_rng(seed + 11)
    ids = [built.ids] + [torch.from_numpy(rng.integers(4, 40, L)) for L in lengths]
    with margin_network.torch_threads(1):
        consts = certify.constants(encoder)
        profiles = [certify.profiles(encoder, x) for x in ids]
        clean = np.max([certify.clean_amplification(p, consts) for p in profiles], axis=0)
        kappa = {o - 1: float(k) for o, k in enumerate(clean) if o > 0}  # the tables are fixed: output 0 unperturbed
        log_omega = all_layer.weights(kappa)
        omega = np.array([math.inf] + [math.exp(log_omega[o - 1]) for o in range(1, clean.size)])
        gamma = float(net.analysis.bounds["spectrum_adaptive"]["gamma_realised"])
        certificates = tuple(certify.certify(p, consts, omega, gamma) for p in profiles)
        samples = tuple(margin_network.embed(encoder, x) for x in ids)
    bound = all_layer.all_layer_bound(net.analysis, kappa=kappa, margins=[c.radius for c in certificates])
    by_name = {t.name: t for t in bound.terms}
    assert sorted(by_name) == sorted(m.name for m in net.terms)
    terms = [by_name[m.name] for m in net.terms]
    kinds = [t.kind if t.kind != all_layer.UNIFORM_QK else "qk" for t in terms]
    block = np.array([all_layer.block_of(k, t.group, m.layer) for k, t, m in zip(kinds, terms, net.terms)])
    rho = np.array([math.exp(t.log_rho) for t in terms])
    lam = np.array([r / math.exp(bound.log_omega[b]) for r, b in zip(rho, block)])
    scale = np.array([t.input_scale for t in terms])
    return Chain(net, bound, tuple(ids), samples, certificates, omega, lam, rho, scale, block)


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Chain]:
    made: dict[str, Chain] = {}
    variants = {"bert": ("bert", 0), "bert-seed1": ("bert", 1), "bert-3": ("bert-3", 0)}

    def get(key: str) -> Chain:
        if key not in made:
            name, seed = variants[key]
            made[key] = _chain(name, tmp_path_factory.mktemp(key), seed, (6, 5, 4) if LONG else ())
        return made[key]

    return get


MODELS = ("bert", "bert-seed1", "bert-3") if LONG else ("bert",)


# --------------------------------------------------------------------------- sizes, classes and the search


def _size(chain: Chain, j: int, d: torch.Tensor) -> torch.Tensor:
    """``d``'s size in the uniform metric the bound covers term ``j`` in: ``||d||_inf`` (a gain, on normalised rows of
    norm at most ``sqrt N``) or ``||d||_2``, times the term's input scale (``B_j``; ``B_j^2`` for a query-key product)."""
    norm = d.abs().max() if d.ndim == 1 else torch.linalg.matrix_norm(d, 2)
    return norm * chain.scale[j]


def _perturbed(chain: Chain, eps: Sequence[float], raw: dict[int, torch.Tensor]) -> tuple[list, torch.Tensor]:
    """The terms with ``raw[j]`` scaled to size ``eps[j]`` and held in the class ``||W_j + Delta_j|| <= s_j`` (internal
    covers; the size shrinks where the class cuts it), and ``sum_j rho_j size_j`` and per-term sizes."""
    ws = [m.w for m in chain.net.terms]
    sizes = torch.zeros(len(ws), dtype=torch.float64)
    for j, d in raw.items():
        m = chain.net.terms[j]
        delta = d * (eps[j] / _size(chain, j, d))
        if outside_class(m.w + delta, m.inputs["s"]):
            delta = clip_to_class(m.w + delta, m.inputs["s"]) - m.w
        ws[j] = m.w + delta
        sizes[j] = _size(chain, j, delta)
    return ws, sizes


def _maximise(objective: Callable[[], torch.Tensor], params: list[torch.Tensor], steps: int, lr: float = 0.05) -> float:
    """The largest value of ``objective()`` (a ratio) seen while Adam climbs its logarithm."""
    opt = torch.optim.Adam(params, lr=lr)
    best = 0.0
    for _ in range(steps):
        opt.zero_grad()
        value = objective()
        best = max(best, float(value.detach()))
        (-torch.log(value)).backward()
        opt.step()
    return best


def _cap(Y: torch.Tensor) -> torch.Tensor:
    """Each row of ``Y`` shrunk to norm at most 1."""
    return Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True).clamp_min(1.0)


def _deviation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(a - b, dim=-1).max()


def _deltas(chain: Chain, r: float | torch.Tensor, v: torch.Tensor | None, Y: torch.Tensor) -> list:
    """Block-output perturbations ``delta_o / omega_o``: in the ball of radius ``r`` (``v`` spreads it over the
    outputs) or, with ``v=None``, in the box ``||delta_o|| <= r``; the embeddings sum (``omega_0 = inf``) unmoved."""
    inv = torch.from_numpy(np.where(np.isfinite(chain.omega), 1.0 / chain.omega, 0.0))
    w = torch.ones_like(inv) if v is None else v.abs() / torch.linalg.vector_norm(v).clamp_min(1e-300)
    return [None if inv[o] == 0 else (r * w[o] * inv[o]) * _cap(Y[o]) for o in range(inv.numel())]


def _restarts(n: int) -> int:
    return 3 * n if LONG else n


# --------------------------------------------------------------------------- the chain is the network


@pytest.mark.parametrize("key", MODELS)
def test_the_chain_of_blocks_is_the_network_the_certificate_runs(chains, key: str) -> None:
    # the all-layer chain over the bound's own (folded) terms equals the composition fuzzer's forward (checked there
    # against transformers) and numerics.margin's encoder on every sample; the bound's terms are the fuzzer's terms
    chain = chains(key)
    net = chain.net
    ws = [m.w for m in net.terms]
    encoder = margin_network.load_encoder(open_checkpoint(str(net.built.folder)))
    with torch.no_grad():
        assert torch.allclose(net.run_blocks(ws)[-1], net.forward(ws), rtol=0, atol=1e-12)
        for x, ids in zip(chain.samples, chain.ids):
            ours = net.run_blocks(ws, inputs=x)
            theirs = margin_network.forward(encoder, ids)
            assert all(torch.allclose(a, b, rtol=0, atol=1e-12) for a, b in zip(ours, theirs))
    assert set(chain.block) == set(range(2 * net.num_layers))
    assert all(c.output_bound < 1.0 for c in chain.certificates)


# --------------------------------------------------------------------------- 1. the margin statement


@pytest.mark.parametrize("key", MODELS)
def test_no_perturbation_within_the_certified_radius_moves_the_output_by_more_than_the_certificate_says(
    chains, key: str
) -> None:
    chain = chains(key)
    net, ws = chain.net, [m.w for m in chain.net.terms]
    K = 2 * net.num_layers
    gen = torch.Generator().manual_seed(3)
    ratios = []
    with margin_network.torch_threads(1):
        for x, cert in zip(chain.samples, chain.certificates):
            r = cert.radius
            with torch.no_grad():
                clean = net.run_blocks(ws, inputs=x)
            box_claim = r * float(np.sum(np.where(np.isfinite(chain.omega), cert.kappa / chain.omega, 0.0)))
            for _ in range(_restarts(1)):
                v = torch.ones(K + 1, dtype=torch.float64).requires_grad_(True)
                Y_ball = torch.randn(K + 1, *x.shape, dtype=torch.float64, generator=gen).requires_grad_(True)
                Y_box = torch.randn(K + 1, *x.shape, dtype=torch.float64, generator=gen).requires_grad_(True)

                def moved(v: torch.Tensor | None, Y: torch.Tensor, x=x, r=r) -> list[torch.Tensor]:
                    return net.run_blocks(ws, _deltas(chain, r, v, Y), x)

                ball = _maximise(
                    lambda: _deviation(moved(v, Y_ball)[-1], clean[-1]) / cert.output_bound,  # noqa: B023
                    [v, Y_ball],
                    steps=120 if LONG else 40,
                )
                box = _maximise(
                    lambda: _deviation(moved(None, Y_box)[-1], clean[-1]) / box_claim,  # noqa: B023
                    [Y_box],
                    steps=120 if LONG else 40,
                )
                with torch.no_grad():  # block i's input (output i) moved by at most the certificate's E_i in the box
                    path = moved(None, Y_box)
                    for i in range(K):
                        assert float(_deviation(path[i], clean[i])) <= cert.deviations[i] * (1 + TOLERANCE) + 1e-15
                ratios.append((ball, box))
    if LONG:
        print(f"{key}: margin statement, ball and box ratios {[(round(a, 4), round(b, 4)) for a, b in ratios]}")
    worst = max(max(pair) for pair in ratios)
    assert worst <= 1 + TOLERANCE, (key, ratios)


# --------------------------------------------------------------------------- 2. the per-block covers


def _block_allocation(chain: Chain, b: int, kind: str) -> list[float]:
    """``eps_j`` of block ``b``'s terms (0 elsewhere): at the class radius (``s_j`` times its input scale) the terms of
    ``kind`` (``matrices``: every matrix; ``norm``: the gain and beta of the norm starting the block; a role: that
    role's terms alone) or, ``small``, every term at ``10^-3`` of it (first order)."""
    out = []
    for j, m in enumerate(chain.net.terms):
        unit = m.inputs["s"] * chain.scale[j]
        picked = chain.block[j] == b and (
            kind == "small"
            or (kind == "matrices" and m.role not in ("gain", "beta"))
            or (kind == "norm" and m.role in ("gain", "beta"))
            or m.role == kind
        )
        out.append((1e-3 if kind == "small" else 1.0) * unit if picked else 0.0)
    return out


BLOCK_KINDS = (
    ("matrices", "small", "norm", "qk", "vo", "bo", "ff1", "ff2", "gain", "beta") if LONG else ("matrices", "vo", "bo")
)


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("kind", BLOCK_KINDS)
def test_each_block_moves_by_at_most_its_covers_budget_on_every_input(chains, key: str, kind: str) -> None:
    chain = chains(key)
    net = chain.net
    base = [m.w for m in net.terms]
    gen = torch.Generator().manual_seed(5)
    found = {}
    lam = torch.from_numpy(chain.lam)
    with margin_network.torch_threads(1), torch.no_grad():
        inputs = net.run_blocks(base, inputs=chain.samples[0])
    for b in range(2 * net.num_layers):
        eps = _block_allocation(chain, b, kind)
        if not any(eps):
            continue  # the role is in another block
        best = 0.0
        lengths = (inputs[b].shape[0], 2, 12) if LONG else (inputs[b].shape[0],)
        for start in range(_restarts(2)):
            T = lengths[start % len(lengths)]
            raw = {
                j: torch.randn(net.terms[j].w.shape, dtype=torch.float64, generator=gen).requires_grad_(True)
                for j, e in enumerate(eps)
                if e > 0
            }
            if start == 0:  # the sample's own block input, then random rows of random scale
                u0 = inputs[b].clone()
            else:
                u0 = torch.randn(T, inputs[b].shape[1], dtype=torch.float64, generator=gen)
                u0 = u0 * float(torch.exp(torch.randn(1, generator=gen, dtype=torch.float64)))
            U = u0.requires_grad_(True)

            def ratio(raw=raw, U=U, b=b, eps=eps) -> torch.Tensor:
                ws, sizes = _perturbed(chain, eps, raw)
                return _deviation(net.run_block(b, ws, U), net.run_block(b, base, U)) / (lam * sizes).sum()

            with margin_network.torch_threads(1):
                best = max(best, _maximise(ratio, [*raw.values(), U], steps=150 if LONG else 40))
        found[b] = best
    if LONG:
        shown = {b: round(v, 4) for b, v in found.items()}
        print(f"{key} {kind}: per-block ratios {shown}")
    assert found and max(found.values()) <= 1 + TOLERANCE, (key, kind, found)


# --------------------------------------------------------------------------- 3. the lemma on the sample


def _allocation(chain: Chain, eps: float, kind: str) -> list[float]:
    """An allocation the bound can assign at scale ``eps`` (``sum_j rho_j eps_j = eps``): ``equal`` shares (the
    engine's at ``p* = 0``, where every term keeps only its floor share ``theta / J`` of it), or the whole budget to
    the ``first`` or the ``last`` block's terms in equal shares."""
    J = len(chain.rho)
    if kind == "equal":
        picked = np.ones(J, dtype=bool)
    else:
        picked = chain.block == (0 if kind == "first" else int(chain.block.max()))
    return list(np.where(picked, eps / (picked.sum() * chain.rho), 0.0))


LEMMA_KINDS = ("equal", "first", "last") if LONG else ("equal", "last")


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("kind", LEMMA_KINDS)
def test_weights_perturbed_within_the_allocation_keep_the_certified_margin_less_their_scale(
    chains, key: str, kind: str
) -> None:
    chain = chains(key)
    net = chain.net
    base = [m.w for m in net.terms]
    K = 2 * net.num_layers
    rho = torch.from_numpy(chain.rho)
    gen = torch.Generator().manual_seed(9)
    ratios = []
    pairs = list(zip(chain.samples, chain.certificates))
    for x, cert in pairs if LONG else pairs[:1]:
        with torch.no_grad():
            clean = net.run_blocks(base, inputs=x)[-1]
        for share in (0.5, 0.9) if LONG else (0.5,):
            eps = _allocation(chain, share * cert.radius, kind)
            assert float(np.dot(chain.rho, eps)) == pytest.approx(share * cert.radius, rel=1e-12)
            for _ in range(_restarts(1)):
                raw = {
                    j: torch.randn(net.terms[j].w.shape, dtype=torch.float64, generator=gen).requires_grad_(True)
                    for j, e in enumerate(eps)
                    if e > 0
                }
                v = torch.ones(K + 1, dtype=torch.float64).requires_grad_(True)
                Y = torch.randn(K + 1, *x.shape, dtype=torch.float64, generator=gen).requires_grad_(True)

                def ratio(raw=raw, v=v, Y=Y, eps=eps, x=x, cert=cert, clean=clean) -> torch.Tensor:
                    ws, sizes = _perturbed(chain, eps, raw)
                    left = cert.radius - (rho * sizes).sum()  # what the weights leave of the certified radius
                    out = net.run_blocks(ws, _deltas(chain, left, v, Y), x)[-1]
                    return _deviation(out, clean) / cert.output_bound

                with margin_network.torch_threads(1):
                    ratios.append(_maximise(ratio, [*raw.values(), v, Y], steps=100 if LONG else 30))
    if LONG:
        print(f"{key} {kind}: lemma ratios {[round(r, 4) for r in ratios]}")
    assert max(ratios) <= 1 + TOLERANCE, (key, kind, ratios)
