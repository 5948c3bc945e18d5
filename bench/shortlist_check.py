"""What a model's lexical shortlist changes: BLEU and the lines it changes, against the same model without it.

    python bench/shortlist_check.py --model runs/student/model.pt --src test.en --ref test.de
    python bench/shortlist_check.py --model M.pt --src test.en --ref test.de --beam 1 --precision int8 --threads 2

The model (a file that carries a shortlist: `mtkit shortlist`) translates the sources twice, in one process, with
the same settings but --shortlist and --no-shortlist (the default settings are the model's own: a student's
beam 1), each pass after one untimed pass over the first 8 lines. Printed: sacreBLEU of each, its change, the
fraction of lines the shortlist leaves identical, the mean rows of the output layer a batch searched over
(against the vocabulary), and each pass's sentences/s (one pass each: a figure on a loaded machine is a
rough ratio, not a speed). The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def compare(restricted: list[str], full: list[str], refs: list[str]) -> dict[str, Any]:
    """BLEU of both outputs against `refs`, its change, and the fraction of lines left identical."""
    import sacrebleu

    with_list = sacrebleu.corpus_bleu(restricted, [refs]).score
    without = sacrebleu.corpus_bleu(full, [refs]).score
    same = sum(a == b for a, b in zip(restricted, full))
    return {
        "bleu_shortlist": round(with_list, 2),
        "bleu_full": round(without, 2),
        "bleu_change": round(with_list - without, 2),
        "identical_lines": round(same / max(len(full), 1), 4),
        "lines": len(full),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="A model file that carries a shortlist.")
    parser.add_argument("--src", required=True, help="Sources, one a line.")
    parser.add_argument("--ref", required=True, help="References, one a line.")
    parser.add_argument("--beam", type=int, default=None, help="Beam size (default: the model's own).")
    parser.add_argument("--precision", default="fp32", help="fp32 or int8 (mtkit translate --precision).")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's count).")
    args = parser.parse_args()

    from mtkit.decode import loading
    from mtkit.decode.shortlist import Shortlist

    sources = Path(args.src).read_text(encoding="utf-8").splitlines()
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    given = {"beam": args.beam} if args.beam else {}
    translator = loading.prepare(args.model, "cpu", args.precision, threads=args.threads, **given)
    config = translator.defaults
    shortlist: Shortlist | None = getattr(translator.engine, "shortlist", None)
    if shortlist is None:
        sys.exit(f"{args.model} carries no shortlist; add one with `mtkit shortlist`.")
    outputs, speed = {}, {}
    for name, on in (("shortlist", True), ("full", False)):
        translator.translate(sources[:8], config, shortlist=on)
        start = time.perf_counter()
        outputs[name] = translator.translate(sources, config, shortlist=on)
        speed[f"sentences_per_s_{name}"] = round(len(sources) / (time.perf_counter() - start), 1)
    rows = [len(shortlist.rows([ids], [], translator.engine.torch_device)) for ids in _ids(translator, sources)]
    figures = {
        **compare(outputs["shortlist"], outputs["full"], refs),
        **speed,
        "beam": config.beam,
        "precision": args.precision,
        "rows_per_sentence": round(sum(rows) / max(len(rows), 1), 1),
        "vocabulary": translator.engine.model.cfg.target_vocab_size,
    }
    for key, value in figures.items():
        print(f"{key:>24}  {value}")
    print(json.dumps(figures))


def _ids(translator: Any, sources: list[str]) -> list[list[int]]:
    return [list(ids) for ids in translator.vocab.encode_batch(sources)]


if __name__ == "__main__":
    main()
