"""Decoding speed: sentences/s and target tokens/s for beam search on the Multi30k test set, and peak RSS.

    python bench/translate_speed.py --model runs/small/averaged.pt        # the meaningful figure
    python bench/translate_speed.py --limit 100                           # a quick check, random model

Without --model a randomly initialised model (preset --preset) with a SentencePiece model
trained here on Multi30k is used; its output is noise, so output lengths are capped at the
source length (--max-len-b 0) to keep the work per sentence close to a real translation's.
The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import gzip
import io
import itertools
import json
import platform
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mtkit.config import DecodeConfig  # noqa: E402
from mtkit.data.vocab import Vocab  # noqa: E402
from mtkit.decode.translator import Translator  # noqa: E402
from mtkit.model import build_model  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k-en-de"


def read(name: str, limit: int | None = None) -> list[str]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, limit)]


def random_translator(preset: str, vocab_size: int, device: str) -> Translator:
    import sentencepiece as spm

    model = io.BytesIO()
    lines = read("train.en.gz", 10_000) + read("train.de.gz", 10_000)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   model_type="bpe", pad_id=0, unk_id=1, bos_id=2, eos_id=3,
                                   character_coverage=1.0, minloglevel=2)
    vocab = Vocab.from_bytes(model.getvalue())
    torch.manual_seed(1)
    return Translator(build_model(preset, len(vocab)), vocab, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a trained mtkit model or checkpoint (default: a random --preset model)")
    parser.add_argument("--preset", default="small", help="architecture of the random model (default: small)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="SentencePiece size for the random model")
    parser.add_argument("--input", default=str(DATA / "test_2016_flickr.en.gz"), help="source text (.gz is fine)")
    parser.add_argument("--limit", type=int, default=None, help="translate only the first N lines")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-len-b", type=int, default=None,
                        help="default: 50 (the paper) with --model, 0 (source length) for a random model")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32", help="fp32, bf16, or int8 (dynamic int8 Linear layers)")
    parser.add_argument("--early-stop", default=DecodeConfig().early_stop,
                        help="patience, exact or none (see mtkit translate --help)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    if args.model:
        translator = Translator.load(args.model, device=args.device, precision=args.precision)
    else:
        print("!" * 78 + "\n!! NO --model: a RANDOM model translates; its output is noise, lengths are capped at\n"
              "!! the source length. Only --model with a trained model gives the figure that counts.\n" + "!" * 78,
              file=sys.stderr)
        translator = random_translator(args.preset, args.vocab_size, args.device)
    max_len_b = args.max_len_b if args.max_len_b is not None else (50 if args.model else 0)
    config = DecodeConfig(beam=args.beam, max_len_b=max_len_b, early_stop=args.early_stop)
    path = Path(args.input)
    lines = read(path.name, args.limit) if path.parent == DATA else (
        [line.rstrip("\n") for line in itertools.islice(path.open(encoding="utf-8"), args.limit)])

    translator.translate(lines[:8], beam=args.beam, max_len_b=max_len_b)  # warm-up: allocator, kernels
    start = time.perf_counter()
    outputs = [t.text for t in translator.translate_stream(lines, config, args.batch_tokens)]
    seconds = time.perf_counter() - start
    tgt_tokens = sum(len(ids) for ids in translator.vocab.encode_batch(outputs))
    src_tokens = sum(len(ids) for ids in translator.vocab.encode_batch(lines))
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "bench": "translate_speed", "model": args.model or f"random {args.preset}", "device": args.device,
        "precision": args.precision, "threads": args.threads, "beam": args.beam, "max_len_b": max_len_b,
        "early_stop": args.early_stop,
        "batch_tokens": args.batch_tokens, "sentences": len(lines), "src_tokens": src_tokens,
        "tgt_tokens": tgt_tokens, "seconds": round(seconds, 3),
        "sentences_per_s": round(len(lines) / seconds, 2), "tgt_tokens_per_s": round(tgt_tokens / seconds, 1),
        "peak_rss_mib": round(peak_rss_mib, 1), "torch": torch.__version__, "cpu": platform.processor() or "",
    }
    print(f"{len(lines)} sentences in {seconds:.2f} s: {result['sentences_per_s']} sentences/s, "
          f"{result['tgt_tokens_per_s']} target tokens/s, peak RSS {peak_rss_mib:.0f} MiB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
