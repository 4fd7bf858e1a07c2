"""How loose the certified amplification is: per block output of MiniLM-L6, certified ``kappa_o`` beside an attack.

What it runs (``python -m benchmarks.all_layer_amplification``; writes ``benchmarks/all_layer_amplification.json``):
for the first ``SENTENCES`` sentence(s) of ``benchmarks/data/sentences_minilm_ids.json`` and the block outputs ``o`` in
``OUTPUTS`` (0 the embedding sum, ``o`` the output of block ``o - 1``), only output ``o`` is perturbed (``omega_o = 1``, every other weight
infinite) and

* the certificate (``numerics.margin.certify.certify``) gives the largest radius ``r_o`` at which no perturbation
  of output ``o`` moves the network's output by ``gamma = 1``: the certified amplification is ``gamma / r_o``
  (``kappa_o`` at that radius);
* the attack (``numerics.margin.attack.attack``, 60 Adam steps per radius, the radius grown 16-fold from the
  certified one until it succeeds, then 12 bisections) finds a perturbation of output ``o`` of
  size ``R_o`` that does: ``gamma / R_o`` is a lower bound on the true amplification at that size.

``ln(R_o / r_o)`` is how much the certificate gives away on that block (both are natural logs in the JSON).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
IDS = HERE / "data" / "sentences_minilm_ids.json"
OUT = HERE / "all_layer_amplification.json"
SENTENCES = 1
#: The block outputs measured: the embedding sum (0), and the outputs of layers 1, 3 and 5's feedforward blocks.
OUTPUTS = (0, 4, 8, 12)
GAMMA = 1.0


def run() -> dict:
    import torch

    from numerics.io.checkpoint import open_checkpoint
    from numerics.io.resolve import resolve_source
    from numerics.margin import attack, certify, network

    encoder = network.load_encoder(open_checkpoint(resolve_source("minilm-l6")))
    ids = json.loads(IDS.read_text(encoding="utf-8"))[:SENTENCES]
    rows = []
    t0 = time.perf_counter()
    with network.torch_threads(1):
        consts = certify.constants(encoder)
        for i, seq in enumerate(ids):
            tokens = torch.tensor(seq)
            prof = certify.profiles(encoder, tokens)
            for o in OUTPUTS:
                omega = np.full(encoder.num_blocks + 1, np.inf)
                omega[o] = 1.0
                cert = certify.certify(prof, consts, omega, GAMMA)
                found = attack.attack(
                    encoder, tokens, omega, GAMMA, start_radius=cert.radius, steps=60, growth=16.0, bisections=12
                )
                rows.append(
                    {
                        "sentence": i,
                        "output": o,
                        "log_certified_amplification": math.log(GAMMA / cert.radius),
                        "log_attack_amplification": math.log(GAMMA / found.radius),
                        "log_gap": math.log(found.radius / cert.radius),
                    }
                )
                print(f"[amplification] sentence {i} output {o}: {rows[-1]}", file=sys.stderr)
    return {"what": __doc__.split("\n\n")[0], "gamma": GAMMA, "rows": rows, "seconds": time.perf_counter() - t0}


def main() -> int:
    OUT.write_text(json.dumps(run(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
