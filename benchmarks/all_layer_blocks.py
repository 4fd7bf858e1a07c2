"""Where the certificate's looseness sits: each MiniLM-L6 block's certified factor beside an attack on that block.

What it runs (``python -m benchmarks.all_layer_blocks``; writes ``benchmarks/all_layer_blocks.json``): for the first
sentence of ``benchmarks/data/sentences_minilm_ids.json`` and every block ``i`` at its clean input ``u_i``,

* ``certified``: ``numerics.margin.certify.block_factor`` at an input deviation ``E = 1e-6 sigma_min sqrt(N)`` (every
  perturbation with rows of norm at most ``E`` moves the block's output rows by at most that factor times its size);
* ``attack``: the largest ratio ``||f(u + D) - f(u)|| / ||D||`` (``2 -> inf``) Adam finds over such ``D`` (300 steps,
  3 starts): a lower bound on the block's true local factor.

The sum of the certified logs over the blocks after an output is that output's certified amplification at the
clean point; the sum of the attacked logs is what a certificate built block by block could at best reach, so the
difference between that and the end-to-end attack (``benchmarks/all_layer_amplification.json``) is the price of
composing blocks one at a time (a product of norms is not the norm of the product).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
IDS = HERE / "data" / "sentences_minilm_ids.json"
OUT = HERE / "all_layer_blocks.json"


def run() -> dict:
    import torch

    from numerics.io.checkpoint import open_checkpoint
    from numerics.io.resolve import resolve_source
    from numerics.margin import certify, network

    encoder = network.load_encoder(open_checkpoint(resolve_source("minilm-l6")))
    tokens = torch.tensor(json.loads(IDS.read_text(encoding="utf-8"))[0])
    gen = torch.Generator().manual_seed(0)
    rows = []
    with network.torch_threads(1):
        consts = certify.constants(encoder)
        prof = certify.profiles(encoder, tokens)
        outs = network.forward(encoder, tokens)
        for i, (block, p, c) in enumerate(zip(encoder.blocks, prof, consts)):
            u = outs[i].detach()
            E = 1e-6 * float(p.sigma.min()) * math.sqrt(c.N)
            certified = certify.block_factor(p, c, E)
            base = network.run_block(block, u).detach()
            best = 0.0
            for _ in range(3):
                Y = torch.randn(u.shape, dtype=torch.float64, generator=gen, requires_grad=True)
                opt = torch.optim.Adam([Y], lr=0.05)
                for _ in range(300):
                    D = E * Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True).clamp_min(1.0)
                    size = torch.linalg.vector_norm(D, dim=-1).max()
                    ratio = torch.linalg.vector_norm(network.run_block(block, u + D) - base, dim=-1).max() / size
                    best = max(best, float(ratio.detach()))
                    opt.zero_grad()
                    (-ratio).backward()
                    opt.step()
            rows.append(
                {"block": i, "kind": block.kind, "log_certified": math.log(certified), "log_attack": math.log(best)}
            )
            print(f"[blocks] {rows[-1]}", file=sys.stderr)
    return {"what": __doc__.split("\n\n")[0], "rows": rows}


def main() -> int:
    OUT.write_text(json.dumps(run(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
