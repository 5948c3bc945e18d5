"""An OPUS-MT directory translated three ways on the CPU: mtkit, Transformers' `generate`, CTranslate2.

    python bench/opus_speed.py [--model DIR] [--sentences 100] [--rounds 2] [--threads 2] [--out FILE.json]

The same directory and sentences (Multi30k's test sources) through:
- mtkit: `mtkit.load_translator(DIR)` (what `mtkit translate -m DIR` runs), beam 4, its token-packed batches;
- Transformers: `MarianMTModel.generate`, beam 4, batches of --hf-batch sentences sorted by length;
- CTranslate2: `mtkit export DIR --format ctranslate2` translated by `mtkit translate -m CT2_DIR` (same pipeline).
Each run is a fresh process on --threads threads that reports its sentences/s (translation only; loading is
not timed) and its peak resident memory (ru_maxrss, loading included). Runs are interleaved A B C C B A per
round, so that a machine shared with other work weighs on every engine alike.

Without --model a transformer-base-shaped OPUS-MT directory is built with random weights (d_model 512, 6+6
layers, d_ff 2048, 8 heads, swish, 58,101 vocabulary entries as opus-mt-en-de has). Random weights never
choose EOS on their own, so every engine is held to the same output length (--length tokens, then EOS): the
work per sentence is the same for all three, and the figures compare engines, not translations.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "sample"
OPUS_EN_DE_VOCAB = 58101


def _spm(lines: list[str], size: int) -> bytes:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=size, model_type="unigram", minloglevel=2
    )
    return model.getvalue()


def build_model(path: Path) -> Path:
    """A transformer-base OPUS-MT-shaped directory with random weights (see the module docstring)."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    path.mkdir(parents=True, exist_ok=True)
    sides = {}
    for name, lang in (("source.spm", "en"), ("target.spm", "de")):
        lines = (SAMPLE / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        sides[name] = _spm(lines, 800)
        (path / name).write_bytes(sides[name])
    pieces: list[str] = []
    for proto in sides.values():
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i)]
    pieces = [p for p in dict.fromkeys(pieces) if p != "<unk>"]
    filler = [f"<unused{i}>" for i in range(OPUS_EN_DE_VOCAB - 3 - len(pieces))]
    vocab = ["</s>", "<unk>", *pieces, *filler, "<pad>"]
    (path / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}), encoding="utf-8")
    MarianTokenizer(str(path / "source.spm"), str(path / "target.spm"), str(path / "vocab.json")).save_pretrained(path)
    pad = len(vocab) - 1
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=512,  # transformer-base (MarianConfig's own defaults are a 12-layer d_model 1024 model)
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        activation_function="swish",
        max_position_embeddings=512,
        scale_embedding=True,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )
    torch.manual_seed(0)
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias[0, 0] = -100.0  # never EOS before the length limit (see the module docstring)
    model.save_pretrained(path)
    return path


def run_one(engine: str, model: str, lines: list[str], threads: int, length: int, hf_batch: int) -> dict:
    """One engine in this process: sentences/s of the translation alone, and the process's peak memory."""
    import torch

    torch.set_num_threads(threads)
    if engine == "transformers":
        from transformers import MarianMTModel, MarianTokenizer

        tok, hf = MarianTokenizer.from_pretrained(model), MarianMTModel.from_pretrained(model).eval()
        order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
        t0 = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(order), hf_batch):
                batch = tok([lines[j] for j in order[i : i + hf_batch]], return_tensors="pt", padding=True)
                hf.generate(**batch, num_beams=4, max_new_tokens=length + 1, bad_words_ids=[[hf.config.pad_token_id]])
        seconds = time.perf_counter() - t0
    else:
        from mtkit.decode.loading import load_translator

        translator = load_translator([model], device="cpu", precision="fp32", workers=1, threads=threads)
        t0 = time.perf_counter()
        translator.translate(lines, beam=4, max_len_a=0, max_len_b=length, lenpen="fairseq", alpha=1.0)
        seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"engine": engine, "seconds": seconds, "sentences_per_s": len(lines) / seconds, "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="An OPUS-MT directory (default: a random base-size one).")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mtkit-opus-bench"))
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--length", type=int, default=24, help="Output tokens before EOS (random weights only).")
    parser.add_argument("--hf-batch", type=int, default=16)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--run", help=argparse.SUPPRESS)  # a child: one engine, one JSON line
    args = parser.parse_args()
    lines = (SAMPLE / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()[: args.sentences]
    if args.run:
        model = str(args.model)
        print(json.dumps(run_one(args.run, model, lines, args.threads, args.length, args.hf_batch)))
        return
    model = args.model or (args.work / "opus-base")
    if args.model is None and not (model / "config.json").exists():
        build_model(model)
    ct2 = args.work / "opus-base-ct2"
    if not (ct2 / "model.bin").exists():
        subprocess.run([sys.executable, "-m", "mtkit", "export", str(model), "-o", str(ct2)], check=True, cwd=ROOT)
    paths = {"mtkit": model, "transformers": model, "ctranslate2": ct2}
    order = ["mtkit", "transformers", "ctranslate2"]
    results: dict[str, list[dict]] = {e: [] for e in order}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads)}
    for r in range(args.rounds):
        for engine in order + order[::-1]:  # A B C C B A
            cmd = [sys.executable, __file__, "--run", engine, "--model", str(paths[engine])]
            cmd += ["--sentences", str(args.sentences), "--threads", str(args.threads), "--length", str(args.length)]
            cmd += ["--hf-batch", str(args.hf_batch)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
            results[engine].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {r + 1} {engine}: {results[engine][-1]}", file=sys.stderr)
    summary = {
        e: {
            "sentences_per_s": statistics.median(x["sentences_per_s"] for x in runs),
            "peak_mib": max(x["peak_mib"] for x in runs),
            "runs": runs,
        }
        for e, runs in results.items()
    }
    text = json.dumps({"model": str(model), "sentences": len(lines), "threads": args.threads, **summary}, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    for e in order:
        print(f"{e:13s} {summary[e]['sentences_per_s']:7.2f} sentences/s  peak {summary[e]['peak_mib']:7.0f} MiB")


if __name__ == "__main__":
    main()
