"""A composition fuzzer against the forward pass (issue 19; docs/theory/composition.md and section 10 rule 1).

For a small random network of every mapped family (BERT post-LN GELU, GPT-2 pre-LN, LLaMA with RoPE, GQA and a gated
SiLU MLP, ``torch.nn.TransformerEncoder`` post-LN ReLU; non-zero random biases, gains and betas), every matrix the
bound covers is perturbed by an adversarially chosen ``Delta_j`` (scipy's L-BFGS-B from seeded restarts) whose size in
the bound's metric is ``eps_j``, and the output of the real network (``tests/composition_forward.py``: a functional
forward over the bound's own matrices, checked here to equal the transformers / torch forward to ``1e-10``) must move
by at most the composed budget ``sum_j rho_j eps_j``, with ``rho_j``, ``s_j``, ``B_j`` and ``centres`` read from
specbound's analysis of the saved checkpoint (``theorem_inputs``).

Allocations: ``small`` gives every matrix the same share of a budget of ``10^-2`` (``eps_j = 10^-2 / (J rho_j)``, first
order); ``tail`` gives the last feedforward block's first-layer matrices ``eps_j = 2 s_j B_j`` and its second-layer
matrix ``10 s_j B_j``, every other matrix ``eps_j = 10^-4 s_j B_j / rho_j`` (every matrix is perturbed); ``cross``
(gated blocks only) gives the last block's gate and up ``8 s_j B_j`` and every other matrix the tail's small share. The last is where docs/theory/composition.md bites: with
Theorem 4.1's centres outside the class, the covered first-layer matrices make the rows entering FF2 (or the gated
product) longer than the input scale the bound assigns, and the gated "up" factor sees the covered gate (``cross``:
the second-order term ``(a' - a) * (g' - g)`` alone, rows of the gate and up all inside the ball, exceeds the budget).

Norm gains and betas (docs/theory/normlayers.md) are terms of the bound: every allocation perturbs them too (each with
its ``eps_j``, ``rho_j`` and class radius ``s_j`` from ``norm_parameters``); ``norms`` gives the gain and beta of the norm feeding the
last feedforward block ``eps_j = s_j B_j / 2`` (a gain moves its norm's rows by up to ``s_j sqrt(N)``, a beta by
``s_j``) and every other term the tail's small share (an earlier norm's ``rho_j`` carries every later block's
constant, so its budget would swamp the comparison; ``small`` perturbs them all at first order). The local property the norm terms rest on is checked on the real norm modules (a gain changes its
norm's output rows by at most ``||Delta||_inf sqrt(N)``, a beta by ``||Delta||_2``, the radius ``B`` is the largest
output of the class), and so is the one they do not: the Lipschitz model treats every norm as a projection
(1-Lipschitz, Edelman et al.'s idealisation, stated in the README), which a real LayerNorm is not
(``test_real_norm_layers_are_lipschitz_with_their_true_constant``, ``test_a_real_layernorm_of_small_variance``).

The stronger search (issue 29, item 8): deeper variants (``composition_forward.DEEP``: 4-layer GPT-2, 4-layer LLaMA
with 8 query heads over 1 and 2 key-value heads, 3-layer BERT), the input optimised jointly with the perturbations,
starts along every term's top singular pair, and ``last``, an allocation aimed at the last layer (each of its
matrices at its class radius). Two cases run in the suite; ``SPECBOUND_FUZZ_LONG=1`` runs every variant and allocation.

The input tables (issue 29 item 5): with them covered, the forward reads the embeddings sum from the word, position
and token-type tables, which the adversary perturbs with every other term (``tables``: each table at its class radius).

``centres`` missing from ``theorem_inputs`` means ``"free"`` (what main's bound implicitly claims): the adversary is
then unconstrained and the tail cases exceed the budget (they were ``xfail(strict=True)`` on a bound without rule 1).
The bound now evaluates ``K_j`` at ``eps_j / 2`` and says ``centres == "class"`` (issue 19 rule 1): the adversary is
held to ``||W_j'||_2 <= s_j`` and every case must pass.
"""

from __future__ import annotations

import math
import os

import pytest
import sympy as sp
import torch
from composition_forward import DEEP, FAMILIES, Network, attack, build, build_thin_layernorm, network

from numerics.bounds import ModelSettings
from theory import normlayers
from theory.symbols import SYMBOLS

#: Float tolerance of the comparison ``change <= budget``: LLaMA's softmax and RMSNorm run in float32 (as in
#: transformers), so its outputs carry float32 rounding (relative 1e-7 of values of order 1-10).
TOLERANCE = {"llama": 1e-5}

RULE_1 = (
    "issue 19 rule 1: Theorem 4.1's centres lie outside the class, so the covered first-layer matrices "
    "make the rows entering FF2 / the gated product longer than the bound's input scale; "
    "remove once theorem_inputs says centres == 'class' (internal covers, K_j at eps_j / 2)"
)


@pytest.fixture(scope="module")
def networks(tmp_path_factory: pytest.TempPathFactory):
    cache: dict[str, Network] = {}

    def get(name: str) -> Network:
        if name not in cache:
            cache[name] = network(build(name, tmp_path_factory.mktemp(name), seed=0))
        return cache[name]

    return get


def allocation(net: Network, kind: str) -> list[float]:
    """``eps_j`` per term (matrices, norm gains and betas), in units of ``s_j B_j`` (see the module docstring);
    ``last`` gives every matrix of the last layer (attention and feedforward) its class radius ``s_j B_j`` (``s_j B_j^2``
    for a score matrix) and every other term the tail's small share."""
    last, count = net.num_layers - 1, len(net.terms)
    out = []
    for m in net.terms:
        unit = m.inputs["s"] * m.inputs["B"]
        if kind == "last" and m.layer == last and m.role not in ("gain", "beta"):
            out.append(unit * (m.inputs["B"] if m.role == "qk" else 1.0))
        elif kind == "small":
            out.append(1e-2 / (count * m.rho))
        elif kind == "norms" and m.role in ("gain", "beta") and m.layer == last and m.inputs["group"].endswith("/ff"):
            out.append(0.5 * unit)
        elif kind == "cross" and m.layer == last and m.role in ("gate", "up"):
            out.append(8.0 * unit)
        elif kind == "tail" and m.layer == last and m.role in ("ff1", "gate", "up"):
            out.append(2.0 * unit)
        elif kind == "tail" and m.layer == last and m.role == "ff2":
            out.append(10.0 * unit)
        else:
            out.append(1e-4 * unit / m.rho)
    return out


@pytest.mark.parametrize("name", FAMILIES)
def test_the_functional_forward_is_the_real_network(networks, name: str) -> None:
    net = networks(name)
    with torch.no_grad():
        out = net.forward([m.w for m in net.terms])
    assert torch.allclose(net.final(out), net.built.reference, rtol=0, atol=1e-10), name
    # and the terms are the analysis's: the spectral norm of each (a gain's largest absolute entry) is its
    # theorem_inputs' s (realised value, or the grid value above it)
    for m in net.terms:
        s = float(m.w.abs().max() if m.role == "gain" else torch.linalg.matrix_norm(m.w, 2))
        assert s <= m.inputs["s"] * (1 + 1e-12), m.name
        assert s == pytest.approx(m.inputs["s_realised"], rel=1e-6), m.name
    # every norm feeding a block is counted: BERT's embeddings norm and every attention and feedforward norm except
    # the last post-LN one (it feeds no block); a gain per norm, a beta per LayerNorm
    fed = {stem for pair in net.norm_stems for stem in pair} - {net.norm_stems[-1][1] if net.layout == "post" else ""}
    fed |= {net.embed_stem} if net.embed_stem else set()
    assert {(m.stem, m.role) for m in net.params} == {
        (stem, role) for stem in fed for role in (("gain", "beta") if not net.rmsnorm else ("gain",))
    }


def _case(name: str, kind: str):
    # The bound now says centres == "class" (internal covers, K_j at eps_j / 2): the tail and cross cases hold the
    # adversary to ||W_j'||_2 <= s_j and must pass (the strict xfail of RULE_1 is gone).
    return pytest.param(name, kind, id=f"{name}-{kind}")


CASES = [*((n, k) for n in FAMILIES for k in ("small", "tail", "norms")), ("llama", "cross")]


@pytest.mark.parametrize("name, kind", [_case(n, k) for n, k in CASES])
def test_adversarial_perturbations_stay_within_the_composed_budget(networks, name: str, kind: str) -> None:
    net = networks(name)
    found = attack(
        net,
        allocation(net, kind),
        restarts=1 if kind in ("small", "norms") else 2,
        iterations=10 if kind == "small" else 12 if kind == "norms" else 20,
        seed=0,
    )
    assert found.ratio <= 1 + TOLERANCE.get(name, 1e-9), (
        f"{name} {kind}: the output moved by {found.change:.6g}, the composed budget is {found.budget:.6g} "
        f"(ratio {found.ratio:.6f}; rows up to {found.row_excess:.4f} x the input scale; restarts {found.restarts})"
    )


@pytest.mark.parametrize("name, kind", [(n, k) for n, k in CASES if k not in ("small", "norms")])
def test_centres_in_the_class_keep_the_tail_within_the_budget(networks, name: str, kind: str) -> None:
    """What rule 1 buys: the same allocations with every perturbed matrix held in its class (``||W'||_2 <= s_j``)
    stay within the budget (the adversary of the xfail cases above, constrained as internal covers constrain it)."""
    net = networks(name)
    found = attack(net, allocation(net, kind), centres="class", restarts=1, iterations=20, seed=0)
    assert found.row_excess <= 1 + 1e-9
    assert found.ratio <= 1 + TOLERANCE.get(name, 1e-9), (found.ratio, found.change, found.budget)


# --------------------------------------------------------------------------- the stronger search (issue 29, item 8)

#: Deeper models (4-layer GPT-2, 4-layer LLaMA with 8 query heads over 1 and 2 key-value heads, 3-layer BERT), the
#: input optimised jointly with the perturbations, starts along every term's top singular pair, allocations aimed at
#: the last layer. In the suite: two of them, briefly; ``SPECBOUND_FUZZ_LONG=1`` runs every variant and allocation at
#: length (a few minutes; marked slow).
DEEP_CI = [("gpt2-4", "last"), ("llama-4-kv1", "last")]
DEEP_LONG = [(d, k) for d in DEEP for k in ("small", "tail", "last", "norms")] + [
    (d, "cross") for d in DEEP if d.startswith("llama")
]
LONG = os.environ.get("SPECBOUND_FUZZ_LONG") == "1"


def _tolerance(net: Network) -> float:
    return TOLERANCE.get(net.built.name, 1e-9)


@pytest.mark.parametrize("name", sorted({n for n, _ in DEEP_CI}))
def test_the_deeper_forward_is_the_real_network(networks, name: str) -> None:
    # the functional forward of the deeper variants (grouped-query attention with one key-value head included)
    # equals the transformers forward, and its input override is the built input
    net = networks(name)
    with torch.no_grad():
        out = net.forward([m.w for m in net.terms])
        again = net.forward([m.w for m in net.terms], inputs=net.start.clone())
    assert torch.allclose(net.final(out), net.built.reference, rtol=0, atol=1e-10), name
    assert torch.equal(out, again)
    heads = {m.head for m in net.matrices if m.role == "vo"}
    assert net.num_layers == DEEP[name][1]["layers"] and len(heads) == DEEP[name][1].get("heads", 2)


@pytest.mark.parametrize("name, kind", DEEP_CI)
def test_the_stronger_search_on_deeper_models(networks, name: str, kind: str) -> None:
    net = networks(name)
    found = attack(net, allocation(net, kind), starts=("singular+",), iterations=10, inputs=True, seed=0)
    assert found.ratio <= 1 + _tolerance(net), (name, kind, found)


@pytest.mark.slow
@pytest.mark.skipif(not LONG, reason="the long run of the stronger search: SPECBOUND_FUZZ_LONG=1 (minutes)")
@pytest.mark.parametrize("name, kind", DEEP_LONG)
def test_the_stronger_search_at_length(networks, name: str, kind: str) -> None:
    net = networks(name)
    found = attack(
        net, allocation(net, kind), starts=("singular+", "singular-", "gaussian"), iterations=25, inputs=True, seed=1
    )
    print(f"{name} {kind}: ratio {found.ratio:.6f} (restarts {[round(r, 6) for r in found.restarts]})")
    assert found.ratio <= 1 + _tolerance(net), (name, kind, found)


# --------------------------------------------------------------------------- the input tables as terms (issue 29 item 5)

#: The families whose forward starts from embedding tables (the torch encoder reads rows).
TABLE_FAMILIES = ("bert", "gpt2", "llama")


@pytest.fixture(scope="module")
def table_networks(tmp_path_factory: pytest.TempPathFactory):
    cache: dict[str, Network] = {}

    def get(name: str) -> Network:
        if name not in cache:
            built = build(name, tmp_path_factory.mktemp(f"{name}-tables"), seed=0)
            cache[name] = network(built, ModelSettings(embeddings=True))
        return cache[name]

    return get


@pytest.mark.parametrize("name", TABLE_FAMILIES)
def test_the_forward_from_the_tables_is_the_real_network(table_networks, name: str) -> None:
    # with the tables covered (the default), the forward reads the embeddings sum from the table terms: it equals the
    # transformers forward, and every table the model reads is a term (word, position, token type; BERT's three)
    net = table_networks(name)
    with torch.no_grad():
        out = net.forward([m.w for m in net.terms])
    assert torch.allclose(net.final(out), net.built.reference, rtol=0, atol=1e-10), name
    tables = {net.matrices[j].name for j, _ in net.tables}
    assert tables == set(net.analysis.model["network"]["embeddings"]["tables"]) and len(tables) == {"bert": 3}.get(
        name, 2 if name == "gpt2" else 1
    )


def _table_allocation(net: Network, kind: str) -> list[float]:
    """``tables``: every table at its class radius ``s_j B_j`` (a row of the embeddings sum may move by ``s_j`` per
    table), every other term the tail's small share; ``small``: the first-order budget of :func:`allocation`."""
    if kind == "small":
        return allocation(net, "small")
    return [
        m.inputs["s"] * m.inputs["B"] if m.role == "emb" else 1e-4 * m.inputs["s"] * m.inputs["B"] / m.rho
        for m in net.terms
    ]


@pytest.mark.parametrize("name", TABLE_FAMILIES)
@pytest.mark.parametrize("kind", ["small", "tables"])
def test_perturbed_tables_stay_within_the_composed_budget(table_networks, name: str, kind: str) -> None:
    """A table's term (theory.embeddings: Theorem 4.1's vector cover on one-hot rows, input scale 1) promises that a
    perturbation of size ``eps_j`` (the largest change of a row the model reads) moves the output by at most
    ``rho_j eps_j``, with ``rho_j`` every block's constant (and the projection's, the embeddings norm's with real
    norms). The adversary perturbs the tables with every other term, held in the class (``||W'||_2 <= s_j``)."""
    net = table_networks(name)
    found = attack(net, _table_allocation(net, kind), restarts=1, iterations=12, seed=0, starts=("singular+",))
    assert found.ratio <= 1 + TOLERANCE.get(name, 1e-9), (name, kind, found)


# --------------------------------------------------------------------------- the norm terms, locally


def _rows(net: Network) -> dict[str, torch.Tensor]:
    """The rows entering every norm layer in the unperturbed forward, by stem."""
    rows: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        net.forward([m.w for m in net.terms], record=rows)
    return rows


def _run(module: torch.nn.Module, x: torch.Tensor, gain: torch.Tensor, beta: torch.Tensor | None) -> torch.Tensor:
    """The model's own norm module on ``x`` with its gain (and bias) replaced, restored afterwards."""
    saved = [p.detach().clone() for p in (module.weight, getattr(module, "bias", None)) if p is not None]
    with torch.no_grad():
        try:
            module.weight.copy_(gain)
            if beta is not None:
                module.bias.copy_(beta)
            return module(x)
        finally:
            module.weight.copy_(saved[0])
            if len(saved) > 1:
                module.bias.copy_(saved[1])


@pytest.mark.parametrize("name", FAMILIES)
def test_a_norm_terms_metric_bounds_the_real_norm_output_change(networks, name: str) -> None:
    """What each norm term's cover rests on (theory.normlayers): a gain ``Delta`` moves the norm's output row by
    ``||Delta * z|| <= ||Delta||_inf ||z|| <= ||Delta||_inf sqrt(N)``, a beta by ``||Delta||_2``, i.e. by at most
    ``size * B_j`` with ``B_j`` the term's input scale (``sqrt(N)``, resp. 1). Run through the model's own norm module
    (transformers' or torch's) on the rows that enter it; a sign vector attains ``||Delta||_inf ||z_t||``, and
    ``||z_t|| = sqrt(N v / (v + eps_ln))`` is within ``10^-4`` of ``sqrt(N)`` on these rows, so the bound is tight: a
    ``B_j`` too small fails the first check, one too large the second."""
    net = networks(name)
    rows = _rows(net)
    gen = torch.Generator().manual_seed(5)
    for m in net.params:
        module = net.built.model.get_submodule(m.stem)
        x = rows[m.stem][None]
        g, b = net.norm_tensors[m.stem]
        sign = torch.where(torch.rand(g.shape, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
        delta = 0.01 * sign * (1 + torch.rand(g.shape, generator=gen, dtype=torch.float64) * (m.role == "beta"))
        size = float(delta.abs().max() if m.role == "gain" else delta.norm())
        y = _run(module, x, g, b)
        moved = _run(module, x, g + delta, b) if m.role == "gain" else _run(module, x, g, b + delta)
        change = float((moved - y)[0].norm(dim=1).max())
        claimed = size * m.inputs["B"]
        assert change <= claimed * (1 + 1e-9), (m.name, change, claimed)
        assert change >= claimed * (1 - 1e-4), (m.name, change, claimed)


@pytest.mark.parametrize("name", FAMILIES)
def test_each_block_radius_is_the_largest_real_output_of_its_norms_class(networks, name: str) -> None:
    """The radius ``B`` of the rows a block reads (``settings["input_norms"]``) is ``G sqrt(N) + beta_norm`` at the
    class radii, the grid values ``s`` of the norm's gain and beta terms (theory.normlayers.layernorm_radius): the
    extreme member ``g' = G 1``, ``beta' = beta_norm z_t / ||z_t||`` run through the model's norm module reaches it
    up to the factor ``||z_t|| / sqrt(N)``, and ``B`` is never below it."""
    net = networks(name)
    rows, a = _rows(net), net.analysis
    radius = {}
    for layer, row in enumerate(a.model["network"]["input_norms"]):
        for which in ("attention", "feedforward"):
            radius[row[which]["source"]] = a.settings["input_norms"][layer][which]
    classes = {(m.stem, m.role): m.inputs["s"] for m in net.params}
    for stem in {m.stem for m in net.params}:
        module = net.built.model.get_submodule(stem)
        g, b = net.norm_tensors[stem]
        x = rows[stem][None]
        z = _run(module, x, torch.ones_like(g), None if b is None else torch.zeros_like(b))[0]
        t = int(z.norm(dim=1).argmax())
        G, beta = classes[(stem, "gain")], classes.get((stem, "beta"), 0.0)
        extreme = _run(module, x, G * torch.ones_like(g), None if b is None else beta * z[t] / z[t].norm())[0]
        largest = float(extreme.norm(dim=1).max())
        assert largest <= radius[stem] * (1 + 1e-9), (stem, largest, radius[stem])
        assert largest >= radius[stem] * (1 - 1e-4), (stem, largest, radius[stem])


@pytest.mark.parametrize("name", FAMILIES)
def test_real_norm_layers_are_lipschitz_with_their_true_constant(networks, name: str) -> None:
    """What the norm terms' propagation factors do *not* rest on: the Lipschitz model treats every norm as a projection
    (1-Lipschitz), a real LayerNorm / RMSNorm has ``||J||_2 <= g_inf / sigma`` at a row with ``sigma = sqrt(v + eps_ln)``
    (``sqrt(mean(x^2) + eps_ln)`` for RMSNorm; theory.normlayers.layernorm_lipschitz). On every row entering a norm
    here, autograd's Jacobian of the model's module is within that constant, and on every family some norm amplifies
    by more than 1 (up to about 2.7): the end-to-end cases above hold by the slack of the blocks' constants, not
    because the norms contract (``test_a_real_layernorm_of_small_variance`` shows the budget broken)."""
    net = networks(name)
    rows = _rows(net)
    constant = sp.lambdify((SYMBOLS["g_inf"], SYMBOLS["std_min"]), normlayers.layernorm_lipschitz())
    worst = 0.0
    for stem, x in rows.items():
        module = net.built.model.get_submodule(stem)
        g_inf = float(net.norm_tensors[stem][0].abs().max())
        for row in x:
            jac = torch.autograd.functional.jacobian(lambda r, module=module: module(r[None])[0], row)
            amplification = float(torch.linalg.matrix_norm(jac, 2))
            centred = row if net.rmsnorm else row - row.mean()
            sigma = math.sqrt(float(centred.pow(2).mean()) + net.eps)
            assert amplification <= constant(g_inf, sigma) * (1 + 1e-5), (stem, amplification, g_inf, sigma)
            worst = max(worst, amplification)
    assert worst > 1.0, f"{name}: every norm contracts on these rows ({worst})"


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="the Lipschitz model keeps Edelman et al.'s projection idealisation (docs/design.md, 'The network evaluated'): "
    "a real LayerNorm amplifies by up to g_inf / sigma, here the output moves by 77 times the composed budget, so it is not an upper bound "
    "for the real network under the default (projection) model; with --layernorm lipschitz the norms' global "
    "constants enter the propagation factors and the same attack stays within budget "
    "(tests/test_layernorm_lipschitz.py)",
)
def test_a_real_layernorm_of_small_variance(tmp_path) -> None:
    """A post-LN encoder whose attention cancels the residual (``build_thin_layernorm``): the LayerNorm sees the output
    bias ``b_o`` (std about 0.02) alone. Perturbing ``b_o`` (``rho`` = the feedforward block's constant, about 1) by
    ``10^-3`` moves the real output by about ``g / std`` times that; every other term gets a negligible share."""
    net = network(build_thin_layernorm(tmp_path / "thin"))
    eps = [1e-3 if m.role == "bo" else 1e-6 * m.inputs["s"] * m.inputs["B"] / m.rho for m in net.terms]
    found = attack(net, eps, restarts=1, iterations=10, seed=0)
    assert found.ratio <= 1 + 1e-9, (
        f"the output moved by {found.change:.4g}, the composed budget is {found.budget:.4g} (ratio {found.ratio:.2f})"
    )
