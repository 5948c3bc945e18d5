"""`mtkit distill` and `mtkit shortlist`: a teacher's translations as a student's training data, and the student's
lexical shortlist (mtkit/distill.py, mtkit/data/shortlist.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import build, config_options, device_option, revision_option
from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig, EngineConfig


@app.command()
@config_options(DecodeConfig, EngineConfig)
def distill(
    data: Path = typer.Argument(
        ..., show_default=False, help="A data directory (`mtkit prepare` + `mtkit bpe`): its raw training sources."
    ),
    model: list[str] = typer.Option(
        ...,
        "--model",
        "-m",
        show_default=False,
        help="The teacher: an mtkit model file (repeat for an ensemble), a Marian or CTranslate2 directory, "
        "or a Hub name.",
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", show_default=False, help="The new data directory (rerun the same command to resume)."
    ),
    chunk_lines: int = typer.Option(
        10_000, "--chunk-lines", min=1, help="Lines translated and saved at a time: what a rerun resumes from."
    ),
    mix_references: bool = typer.Option(
        False, "--mix-references", help="Also train on DATA's own pairs, after the teacher's."
    ),
    restart: bool = typer.Option(
        False, "--restart", help="Discard a distillation --out holds by another teacher or other settings."
    ),
    batch_tokens: int = typer.Option(
        DEFAULT_BATCH_TOKENS, "--batch-tokens", min=1, help="Source tokens per batch, padding included."
    ),
    device: str = device_option("cpu, cuda, cuda:N, mps, or auto (CUDA when available)."),
    threads: int = typer.Option(0, min=0, help="CPU threads; 0 keeps PyTorch's default."),
    workers: int = typer.Option(1, min=1, help="Batches searched at once on the CPU (as in `mtkit translate`)."),
    revision: Optional[str] = revision_option(),
    *,
    given: dict[str, Any],
) -> None:
    """Translate a data directory's training sources with a teacher into a new data directory for a student.

    Example: mtkit distill data/multi30k-en-de -m runs/small/averaged.pt --out data/multi30k-distilled

    The new directory keeps DATA's vocabulary (spm.model, the same ids) and its valid/test splits, so
    `mtkit train data/multi30k-distilled --preset student-fast` trains the student. Rerun the same command to
    resume an interrupted one; --nbest 2 keeps the two best translations of each line.
    """
    import logging

    from mtkit.decode import loading
    from mtkit.distill import DistillOptions
    from mtkit.distill import distill as run_distill

    setup_logging(logging.INFO)
    precision = build(EngineConfig(), given).precision
    given = {k: v for k, v in given.items() if k != "precision"}
    build(DecodeConfig(), given)  # a bad value said under its flag
    # the teacher found once (a Hub name: its cached snapshot) and checked; it decodes by its own defaults under
    # the flags given
    teacher = loading.plan(
        model, revision, device=device, precision=precision, workers=workers, threads=threads, **given
    )  # fmt: skip
    options = DistillOptions(
        batch_tokens=batch_tokens,
        chunk_lines=chunk_lines,
        mix_references=mix_references,
        restart=restart,
        progress=err.is_terminal,
    )
    record = run_distill(data, teacher, out, options)
    pairs = record["pairs"]
    err.print(
        f"mtkit: {escape(str(out))}: {pairs['distilled']} distilled pairs"
        + (f" + {pairs['references']} original" if pairs["references"] else "")
        + ("; it was already done" if record.get("reused") else "")
        + f". Next: mtkit train {escape(str(out))} --preset student-fast"
    )


@app.command()
def shortlist(
    model: Path = typer.Argument(
        ...,
        show_default=False,
        help="The model (e.g. the student's averaged.pt): an mtkit model or checkpoint file, a run directory, a "
        "Marian or OPUS-MT directory, or a Hub name.",
    ),
    data: Path = typer.Argument(
        ..., show_default=False, help="The data directory it was trained on (for a student: the distilled one)."
    ),
    output: Path = typer.Option(
        ..., "--output", "-o", show_default=False, help="The model file to write, with its shortlist (may be MODEL)."
    ),
    k: int = typer.Option(50, "--k", min=1, help="Candidate target pieces kept for each source piece."),
    frequent: int = typer.Option(100, "--frequent", min=0, help="The most frequent target pieces, always kept."),
    sample: int = typer.Option(50_000, "--sample", min=1, help="Training pairs to learn from, at most (memory)."),
    iterations: int = typer.Option(5, "--iterations", min=1, help="EM rounds of IBM Model 1."),
    revision: Optional[str] = revision_option(),
) -> None:
    """Learn a lexical shortlist from a model's training data and write the model file with it.

    Example: mtkit shortlist runs/student/averaged.pt data/multi30k-distilled -o runs/student/model.pt

    `mtkit translate -m runs/student/model.pt` then searches each batch over its source pieces' K candidates and
    the most frequent pieces only (--no-shortlist: over all); `mtkit export --format ctranslate2` writes it as
    CTranslate2's vocabulary map.
    """
    import logging

    from mtkit.shortlist import make

    setup_logging(logging.INFO)
    made = make(model, data, output, k=k, frequent=frequent, sample=sample, iterations=iterations, revision=revision)
    learned = made["learned_from"]
    err.print(
        f"mtkit: wrote {escape(str(output))}: {k} candidates a source piece and the {len(made['frequent'])} most "
        f"frequent pieces, learnt from {learned['pairs']} of {learned['of']} pairs."
    )
