"""`mtkit clean`: rules for web-crawled parallel text, before `mtkit prepare custom`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err


@app.command()
def clean(
    src: Path = typer.Argument(..., help="Source side, one sentence a line (.gz is fine).", show_default=False),
    tgt: Path = typer.Argument(..., help="Target side, aligned with SRC.", show_default=False),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Output prefix: writes PREFIX.SRC_LANG, PREFIX.TGT_LANG and PREFIX.clean.json."
    ),
    src_lang: Optional[str] = typer.Option(None, "--src-lang", show_default="from SRC's suffix"),
    tgt_lang: Optional[str] = typer.Option(None, "--tgt-lang", show_default="from TGT's suffix"),
    all_rules: bool = typer.Option(
        False,
        "--all",
        help="Every rule but the length ones: --langid --copies --dedup --near-dedup --markup --control.",
    ),
    langid: bool = typer.Option(
        False, "--langid", help="Drop pairs whose sides are not identified as their languages (needs mtkit\\[langid])."
    ),
    copies: bool = typer.Option(
        False, "--copies", help="Drop pairs whose target is the source (up to case, spaces, punctuation, digits)."
    ),
    dedup: bool = typer.Option(False, "--dedup", help="Drop repeated pairs (the same bytes), keeping the first."),
    near_dedup: bool = typer.Option(
        False, "--near-dedup", help="Drop pairs repeated up to case, spaces, punctuation and digits."
    ),
    markup: bool = typer.Option(False, "--markup", help="Drop pairs holding an HTML/XML tag or entity."),
    control: bool = typer.Option(
        False, "--control", help="Drop pairs holding control, private-use or unassigned characters, or U+FFFD."
    ),
    dual_xent: Optional[tuple[Path, Path]] = typer.Option(
        None,
        "--dual-xent",
        show_default="none",
        help="Two models (mtkit files, run or OPUS-MT directories), SRC->TGT and TGT->SRC (trained on clean data, "
        "or on this corpus after the other rules): score each pair by its dual conditional cross-entropy "
        "(Junczys-Dowmunt 2018). "
        "Example: --dual-xent fwd.pt bwd.pt --dual-xent-drop 0.04",
    ),
    dual_xent_max: float = typer.Option(
        0.0, "--dual-xent-max", min=0, help="With --dual-xent: drop pairs scoring above this (nats a token)."
    ),
    dual_xent_drop: float = typer.Option(
        0.0,
        "--dual-xent-drop",
        min=0,
        max=0.99,
        help="With --dual-xent, instead of --dual-xent-max: drop this share of the pairs the other rules keep, the "
        "worst scored (the threshold is estimated on a sample of 20,000 pairs before cleaning). Example: 0.05",
    ),
    device: str = typer.Option("cpu", "--device", help="Device of the --dual-xent models."),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        min=1,
        help="Processes for the rules (the models score in the main one).",
        show_default="all cores",
    ),
    max_chars: int = typer.Option(
        0, "--max-chars", min=0, help="Drop pairs with a side longer than this many characters; 0: no limit."
    ),
    max_char_ratio: float = typer.Option(
        0.0,
        "--max-char-ratio",
        min=0,
        help="Drop pairs whose character counts differ by more than this factor (choose it for the pair: an "
        "English line has several times the characters of its Chinese translation); 0: no limit.",
    ),
) -> None:
    """Drop the noise of web-crawled parallel text: wrong languages, copies, duplicates, markup, bad lengths.

    Example: mtkit clean crawl.en crawl.de --out clean/train --all --max-char-ratio 3

    Every rule is off unless asked for, and counted; it streams, and a rerun resumes an interrupted run.

    Then: mtkit prepare custom --train-src clean/train.en --train-tgt clean/train.de ...
    """
    from mtkit.data.webclean import CleanJob, WebCleanConfig
    from mtkit.data.webclean import clean as run_clean
    from mtkit.files import progress_bar

    job = CleanJob(
        src,
        tgt,
        out,
        WebCleanConfig(
            control=control or all_rules,
            markup=markup or all_rules,
            copies=copies or all_rules,
            max_chars=max_chars,
            max_char_ratio=max_char_ratio,
            dedup=dedup or all_rules,
            near_dedup=near_dedup or all_rules,
            langid=langid or all_rules,
            dual_xent_max=dual_xent_max,
            dual_xent_drop=dual_xent_drop,
        ),
        src_lang,
        tgt_lang,
        dual_xent=dual_xent if dual_xent and dual_xent[0] is not None else None,
        device=device,
        workers=workers,
    )
    open_scorer = None
    if job.dual_xent is not None:
        from mtkit.decode.loading import prepare
        from mtkit.decode.pairs import dual_cross_entropy

        def open_scorer(forward: Path, backward: Path, device: str) -> Any:
            """Two Translators, whatever the names are (mtkit files, OPUS-MT directories): two score() calls."""
            return dual_cross_entropy(prepare(forward, device), prepare(backward, device))

    with progress_bar(sys.stderr.isatty(), None, "cleaning", "pairs") as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        record = run_clean(job, open_scorer, progress)
    langs = record["langs"]
    dropped = ", ".join(f"{rule} {n}" for rule, n in record["dropped"].items())
    if dual_xent_drop:
        threshold = record["settings"]["dual_xent_max"]
        err.print(f"--dual-xent-drop {dual_xent_drop:g}: dropped pairs scoring above {threshold:.3f} (from a sample)")
    err.print(
        f"[green]cleaned[/] {escape(str(out))}.{{{langs[0]},{langs[1]}}}: kept {record['kept']} of "
        f"{record['pairs_in']} pairs (dropped: {escape(dropped)}); counts in {escape(str(out))}.clean.json"
    )
