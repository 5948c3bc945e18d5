"""How every system of the decoding benches searches, in one place: mtkit's DecodeConfig and CTranslate2's
translate_batch with the same beam, length normalisation, longest output and stop rule, read from a job that
bench/translate_speed.py's command line makes (`search_settings`), so that every row's figures are of the same
search.

from searches import ct2_translate, decode_config, on_gpu, search_settings   # bench/ is a script's sys.path[0]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def on_gpu(job: dict[str, Any]) -> bool:
    return str(job["device"]).startswith("cuda")


def decode_config(job: dict[str, Any]) -> Any:
    """mtkit's DecodeConfig for the job's search: beam, fairseq's length normalisation, longest output, stop rule,
    and the model's shortlist or the whole vocabulary."""
    sys.path.insert(0, str(ROOT))
    from mtkit import DecodeConfig

    return DecodeConfig(
        beam=job["beam"],
        alpha=job["alpha"],
        lenpen="fairseq",
        max_len_a=1.0,
        max_len_b=job["max_len_b"],
        early_stop=job["early_stop"],
        shortlist=job["shortlist"],
    )


def ct2_translate(job: dict[str, Any], compute_type: str) -> tuple[Callable[[list[str]], list[str]], Any]:
    """(translate, its SentencePiece model): text to text with ctranslate2.Translator on the exported directory and
    the job's search settings, encoding and decoding the pieces included, as mtkit's child times them. With the
    job's shortlist, CTranslate2 searches each batch over the export's vocabulary map (`use_vmap`, vmap.txt: the
    model's shortlist, as `mtkit export` writes it), as mtkit searches over the shortlist."""
    import ctranslate2
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(Path(job["ct2_dir"]) / "spm.model"))
    translator = ctranslate2.Translator(
        job["ct2_dir"],
        device="cuda" if on_gpu(job) else "cpu",
        compute_type=compute_type,
        intra_threads=job["threads"],
        inter_threads=job["workers"],
    )

    def translate(lines: list[str]) -> list[str]:
        pieces = sp.encode(lines, out_type=str)
        limit = max(map(len, pieces), default=0) + 1 + job["max_len_b"]  # + 1: CTranslate2 counts EOS
        results = translator.translate_batch(
            pieces,
            max_batch_size=job["batch_tokens"],
            batch_type="tokens",
            beam_size=job["beam"],
            length_penalty=job["alpha"],
            max_decoding_length=limit,
            min_decoding_length=0,
            use_vmap=job["shortlist"],
        )
        return [sp.decode(r.hypotheses[0]) for r in results]

    return translate, sp


def search_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What a child needs of the command line to search as every other system does."""
    keys = ("beam", "alpha", "max_len_b", "batch_tokens", "threads", "workers", "device", "early_stop", "shortlist")
    return {key: getattr(args, key) for key in keys}
