"""The block kinds of the Lipschitz model are one table (``numerics.bounds.blocks.BLOCK_KINDS``, issue 33).

Each statistics kind a network's terms come from is built by exactly one applicable block kind (the plain and the
gated feedforward blocks cover the same kinds, one applies); the tie group types the report uses are the table's;
and a block kind added to the table is all it takes for its terms to enter the bound (nothing else edited).
The reference values: the terms :func:`numerics.bounds.terms.build_terms` builds for a small network whose spectral
norms are powers of two (their own grid values), so each toy term's propagation factor is a sum of the block
constants ``build_terms`` reports.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from numerics.bounds import ModelSettings, blocks
from numerics.bounds.terms import GROUP_OF_KIND, build_terms
from numerics.spectra.stats import matrix_stats

N = 4


def _stats(gated: bool) -> list:
    heads = [
        matrix_stats(f"l{layer}.{k}", [1.0], shape=(N, N), kind=k, layer=layer, head=0, rank_bound=1)
        for layer in range(2)
        for k in ("qk", "vo")
    ]
    names = ("gate_proj.weight", "up_proj.weight") if gated else ("dense.weight",)
    ff = [
        matrix_stats(f"l{layer}.{name}", [2.0], shape=(N, N), kind="ff1", layer=layer, head=None)
        for layer in range(2)
        for name in names
    ]
    ff += [
        matrix_stats(f"l{layer}.down", [2.0], shape=(N, N), kind="ff2", layer=layer, head=None) for layer in range(2)
    ]
    return [*heads, *ff]


@pytest.mark.parametrize("gated", [False, True], ids=["feedforward", "gated"])
def test_every_statistics_kind_has_exactly_one_applicable_block_kind(gated):
    gate = "gate_proj.weight" if gated else None
    terms, _ = build_terms(_stats(gated), num_layers=2, hidden_size=N, model=ModelSettings(input_norm=1.0), gate=gate)
    applicable = [k for k in blocks.BLOCK_KINDS if k.applies(SimpleNamespace(gate=gate))]  # type: ignore[arg-type]
    for kind in GROUP_OF_KIND:
        builders = [k.name for k in applicable if kind in k.groups]
        assert len(builders) == 1, (kind, builders)
    assert ("gated_feedforward" in [k.name for k in applicable]) is gated
    assert [t.kind for t in terms] == [st.kind for st in _stats(gated)]  # every matrix a term, in the stats' order
    assert GROUP_OF_KIND == {k: g for b in blocks.BLOCK_KINDS for k, g in b.groups.items()}


def test_a_block_kind_added_to_the_table_enters_the_bound(monkeypatch):
    """A toy kind ``xx`` in layer 1's feedforward block: one entry in the table, and build_terms returns its term
    with the propagation factor of what follows that block (none: the last block), in its stated place."""
    # a statistics record of a new kind (the spectra stage checks its own list of kinds; the record is what it returns)
    toy = dataclasses.replace(matrix_stats("l1.toy", [4.0], shape=(N, N), kind="ff2", layer=1, head=None), kind="xx")

    def toy_terms(net: blocks.Network) -> list:
        out = []
        for position, st in enumerate(net.stats):
            if st.kind == "xx":
                term = net.term(
                    name=st.name,
                    kind=st.kind,
                    shape=tuple(st.shape),
                    rank_bound=N,
                    singular_values=np.asarray(st.singular_values_upper, dtype=np.float64),
                    rank=1,
                    log_rho=float(net.after[2 * st.layer + 1]),
                    input_scale=1.0,
                    group=f"layer{st.layer}/ff",
                )
                out.append(((1, position), term))
        return out

    monkeypatch.setattr(blocks, "BLOCK_KINDS", (*blocks.BLOCK_KINDS, blocks.BlockKind("toy", {"xx": "ff"}, toy_terms)))
    stats = [*_stats(False), toy]
    terms, info = build_terms(stats, num_layers=2, hidden_size=N, model=ModelSettings(input_norm=1.0))
    assert [t.name for t in terms] == [st.name for st in stats]
    (got,) = [t for t in terms if t.kind == "xx"]
    assert got.log_rho == 0.0 and got.group == "layer1/ff"
    assert got.spectral_norm == float(toy.singular_values_upper[0]) >= 4.0  # the SVD allowance above 4
    # the matrices before it are unchanged by its presence (it is not in any block's constant)
    base, _ = build_terms(_stats(False), num_layers=2, hidden_size=N, model=ModelSettings(input_norm=1.0))
    assert [t.log_rho for t in terms[:-1]] == [t.log_rho for t in base]
    assert math.isfinite(info["log_lipschitz_feedforward"][1])
