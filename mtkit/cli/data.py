"""`mtkit prepare` and `mtkit bpe`: from a named corpus to binarized BPE data."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import revision_option

if TYPE_CHECKING:
    from mtkit.data.tokenizer import Tokenizer


def _by_corpus(attr: str) -> str:
    """A per-corpus default for --help, from the registry: `250 wmt14-en-de, ...; 0 multi30k-en-de, ...`."""
    from mtkit.data.corpora import default_registry

    groups: dict[object, list[str]] = {}
    for corpus in default_registry():
        groups.setdefault(getattr(corpus, attr), []).append(corpus.name)
    return "; ".join(f"{value} {', '.join(names)}" for value, names in groups.items())


def _corpus_names() -> list[str]:
    from mtkit.data.corpora import default_registry

    return [corpus.name for corpus in default_registry()] + ["custom"]


def _list_corpora() -> None:
    from rich.table import Table

    from mtkit.data.corpora import default_registry, shipped_copy, unpinned

    table = Table(
        title="mtkit prepare NAME: named corpora (all splits of both directions come from the same files)",
        title_justify="left",
    )
    for column in ("name", "train", "valid", "test", "pairs", "download", "vocab"):
        table.add_column(column, overflow="fold", no_wrap=column in ("name", "pairs", "vocab"))
    for corpus in default_registry():
        table.add_row(
            corpus.name,
            corpus.contents("train"),
            corpus.contents("valid"),
            corpus.contents("test"),
            corpus.pairs,
            "shipped" if shipped_copy(corpus) else corpus.download_size(),
            str(corpus.vocab_size),
        )
    table.add_row(
        "custom",
        "--train-src/--train-tgt",
        "--valid-src/--valid-tgt",
        "[--test-src/--test-tgt]",
        "yours",
        "-",
        "by size",
    )
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 140)
    console.print(table)
    loose = unpinned(default_registry())
    if loose:
        console.print(
            "unpinned downloads (their sha256 is recorded at the first download and checked from then on): "
            + "; ".join(f"{name} ({why})" for name, why in sorted(loose.items())),
            soft_wrap=True,
        )


@app.command()
def prepare(
    name: Optional[str] = typer.Argument(
        None,
        help=f"A named corpus ({', '.join(_corpus_names())}); `--list` shows what each holds.",
        show_default=False,
        autocompletion=lambda incomplete: [n for n in _corpus_names() if n.startswith(incomplete)],
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="Output directory.", show_default="data/NAME"),
    mirror: Optional[list[Path]] = typer.Option(
        None,
        "--mirror",
        help="A directory holding the archives, put there by hand "
        "(no network is used); a missing one is named with its URL. Give it twice to read from two directories. "
        "Multi30k needs none: its files ship with mtkit.",
    ),
    cache: Optional[Path] = typer.Option(
        None,
        "--cache",
        help="Download cache.",
        show_default="$MTKIT_CACHE, else the user's cache dir, e.g. ~/.cache/mtkit",
    ),
    list_: bool = typer.Option(False, "--list", help="Show the named corpora, their sizes and contents, and exit."),
    dedup: bool = typer.Option(False, "--dedup", help="Also drop repeated training pairs (after normalisation)."),
    max_words: Optional[int] = typer.Option(
        None,
        "--max-words",
        min=0,
        show_default=_by_corpus("max_words"),
        help="Drop training pairs with a side longer than this many whitespace-separated words; 0: no limit "
        "(refused for a language written without spaces, e.g. zh, ja, th: use --max-chars).",
    ),
    max_ratio: Optional[float] = typer.Option(
        None,
        "--max-ratio",
        min=0,
        show_default=_by_corpus("max_ratio"),
        help="Drop training pairs whose word counts differ by more than this factor; 0: no limit.",
    ),
    max_chars: int = typer.Option(
        0,
        "--max-chars",
        min=0,
        help="Drop training pairs with a side longer than this many characters (Unicode code points, spaces "
        "included: works for every script); 0: no limit. Example: --max-chars 1000",
    ),
    max_char_ratio: float = typer.Option(
        0.0,
        "--max-char-ratio",
        min=0,
        help="Drop training pairs whose character counts differ by more than this factor; 0: no limit. "
        "Example: --max-char-ratio 3",
    ),
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1, help="Processes for cleaning.", show_default="all cores"
    ),
    base_url: Optional[str] = typer.Option(
        None,
        "--base-url",
        help="Fetch every file from BASE_URL/<file name> instead of its origin (a private HTTP mirror).",
    ),
    retries: int = typer.Option(
        5, "--retries", min=0, help="Retries of a dropped download, each resuming where it stopped."
    ),
    force: bool = typer.Option(False, "--force", help="Redo the work even if DIR/prepare.json says it is done."),
    src_lang: Optional[str] = typer.Option(
        None, "--src-lang", help="custom: source language code", show_default="from the file suffix"
    ),
    tgt_lang: Optional[str] = typer.Option(
        None, "--tgt-lang", help="custom: target language code", show_default="from the file suffix"
    ),
    train_src: Optional[Path] = typer.Option(None, "--train-src", help="custom: training source text (.gz is fine)."),
    train_tgt: Optional[Path] = typer.Option(None, "--train-tgt", help="custom: training target text."),
    valid_src: Optional[Path] = typer.Option(None, "--valid-src", help="custom: validation source text."),
    valid_tgt: Optional[Path] = typer.Option(None, "--valid-tgt", help="custom: validation target text."),
    test_src: Optional[Path] = typer.Option(None, "--test-src", help="custom: test source text."),
    test_tgt: Optional[Path] = typer.Option(None, "--test-tgt", help="custom: test target text."),
) -> None:
    """Fetch, extract and clean a named corpus into DIR/raw.

    Example: mtkit prepare multi30k-en-de

    Multi30k's files ship with mtkit: they are read offline. Other corpora are downloaded (resumable,
    sha256-checked) into the cache, or read from a directory where you put their archives by hand:
    mtkit prepare wmt14-en-de --mirror DIR
    """
    if list_:
        _list_corpora()
        return
    setup_logging(logging.INFO)
    from mtkit.data.prepare import PrepareOptions
    from mtkit.data.prepare import prepare as run_prepare

    files = {"train": (train_src, train_tgt), "valid": (valid_src, valid_tgt), "test": (test_src, test_tgt)}
    options = PrepareOptions(
        out=out,
        cache=cache,
        mirror=mirror or None,
        base_url=base_url,
        retries=retries,
        workers=workers,
        dedup=dedup,
        max_words=max_words,
        max_ratio=max_ratio,
        max_chars=max_chars,
        max_char_ratio=max_char_ratio,
        progress=sys.stderr.isatty(),
        force=force,
    )
    record = run_prepare(name, options, custom_files=files, langs=(src_lang, tgt_lang))
    out_dir = out or Path("data") / record["corpus"]
    splits = record["splits"]
    summary = []
    for split, info in splits.items():
        if split == "train":
            rules = record.get("cleaning", {}).get("rules", list(info["dropped"]))
            dropped = ", ".join(f"{rule} {info['dropped'].get(rule, 0)}" for rule in rules)
            summary.append(f"train {info['kept']} pairs (of {info['pairs_in']}; dropped: {dropped})")
        else:
            summary.append(f"{split} {info['lines']}")
    err.print(
        f"[green]prepared[/] {escape(str(out_dir))}/raw ({record['src_lang']}->{record['tgt_lang']}): "
        f"{escape('; '.join(summary))}"
    )
    err.print(f"next: mtkit bpe {escape(str(out_dir))}")


@app.command()
def bpe(
    data_dirs: list[Path] = typer.Argument(
        ...,
        help="A directory written by `mtkit prepare` (holding raw/); several, with --out, for one multilingual model.",
        show_default=False,
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        show_default="DIR itself",
        help="With several DIRs: the multilingual data directory to write (their pairs, each source after its "
        "target-language token >>xx<<; docs/multilingual.md).",
    ),
    vocab_size: Optional[int] = typer.Option(
        None,
        "--vocab-size",
        min=16,
        help="Pieces in the joint vocabulary.",
        show_default=f"{_by_corpus('vocab_size')}; custom: 8000 / 16000 / 32000 under 100k / 1M / above training pairs",
    ),
    sample: int = typer.Option(
        2_000_000,
        "--sample",
        min=2,
        help="At most this many training sentences (both languages together) are drawn, seeded, to learn from.",
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, help="Threads for encoding; the result does not depend on it. \\[default: all cores]"
    ),
    seed: int = typer.Option(1, "--seed", help="Seed of the sentence sample."),
    force: bool = typer.Option(False, "--force", help="Relearn and re-encode even if bpe.json says it is up to date."),
    from_model: Optional[str] = typer.Option(
        None,
        "--from",
        help="Learn nothing: encode with this model's own tokenizer (an mtkit model or checkpoint, a Marian "
        "directory such as an OPUS-MT model, or a Hugging Face Hub name), for `mtkit train --init MODEL`.",
        show_default="none",
    ),
    revision: Optional[str] = revision_option(),
) -> None:
    """Learn a joint SentencePiece BPE vocabulary and binarize every split.

    Example: mtkit bpe data/multi30k-en-de --vocab-size 8000

    Fine-tuning data: mtkit bpe data/multi30k-en-fr --from Helsinki-NLP/opus-mt-en-fr

    Multilingual: mtkit bpe data/multi30k-en-de data/multi30k-en-fr data/multi30k-en-cs --out data/multi30k-en-xx
    """
    setup_logging(logging.INFO)
    from mtkit.data.bpe import BpeOptions, encode_dirs

    def open_tokenizer() -> Tokenizer:  # what --from names, through mtkit/sources/ (the data layer opens no model)
        from mtkit import sources

        return sources.tokenizer_of(sources.find(str(from_model), revision))

    options = BpeOptions(
        vocab_size=vocab_size,
        sample=sample,
        threads=threads,
        seed=seed,
        force=force,
        progress=sys.stderr.isatty(),
        tokenizer_from=from_model,
    )
    gathered, record = encode_dirs(data_dirs, out, options, open_tokenizer if from_model is not None else None)
    if gathered is not None:
        pairs = ", ".join(f"{p['src']}->{p['tgt']} ({p['token']})" for p in gathered["pairs"])
        err.print(f"[green]gathered[/] {escape(str(out))}/raw: {escape(pairs)}")
    data_dir = out or data_dirs[0]
    parts = []
    for split, info in record["splits"].items():
        tokens = ", ".join(f"{lang} {n}" for lang, n in info["tokens"].items())
        parts.append(f"{split} {info['sentences']} sentences ({tokens} tokens)")
    how = "reused" if record["reused_model"] else "learned" if from_model is None else f"took {escape(from_model)}'s"
    err.print(
        f"[green]{how}[/] {escape(str(data_dir))}/{record['model']['file']} ({record['model']['pieces']} pieces); "
        f"{escape('; '.join(parts))}"
    )
