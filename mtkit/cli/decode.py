"""`mtkit average` and `mtkit translate`: from checkpoints to a model file, and from a model to text."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.calibrate import check_confidence
from mtkit.cli.options import build, compile_option, config_options, device_option, revision_option, target_lang_option
from mtkit.config import DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, DecodeConfig, EngineConfig, SamplingConfig
from mtkit.errors import MtkitError


@app.command()
def average(
    paths: list[Path] = typer.Argument(
        ...,
        help="A run directory, or the checkpoint files to average (one file: its weights without the training "
        "state, a third of the size with Adam).",
        show_default=False,
    ),
    last: Optional[int] = typer.Option(
        None,
        "--last",
        "-n",
        show_default="5",
        help="With a run directory: average its newest N checkpoint_<step>.pt (the paper: 5 for base, 20 for big).",
    ),
    output: Optional[str] = typer.Option(
        None,
        "--output",
        "-o",
        show_default="RUN/averaged.pt",
        help="The model file to write; required when averaging named files. Never one of the inputs "
        "nor a checkpoint_*.pt name (refused: it would replace training state with a model-only file).",
    ),
) -> None:
    """Average the parameters of the last N checkpoints of a run into one model file.

    Example: mtkit average runs/small --last 5
    """

    from mtkit import average as averaging
    from mtkit import checkpoint

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise MtkitError(f"{', '.join(missing)} does not exist (give a run directory or checkpoint files).")
    if len(paths) == 1 and paths[0].is_dir():
        run = paths[0]
        want = 5 if last is None else last
        files = averaging.run_checkpoints(run, want)
        if len(files) < want:
            err.print(f"mtkit: {escape(str(run))} has only {len(files)} numbered checkpoint(s); averaging all of them.")
        output = output or str(run / "averaged.pt")
    else:
        if any(p.is_dir() for p in paths):
            raise MtkitError("give either one run directory or checkpoint files, not a mix.")
        if last is not None:
            raise MtkitError("--last picks checkpoints from a run directory; with files, list the ones to average.")
        if output is None:
            raise MtkitError("averaging named files needs --output FILE.")
        files = paths
    averaging.check_output(output, files)  # before anything is read or written
    if len(files) == 1:
        err.print(f"mtkit: one checkpoint, {escape(str(files[0]))}: its weights without the training state")
    else:
        err.print(f"mtkit: averaging {len(files)} checkpoints: {escape(', '.join(str(f) for f in files))}")
    averaged = averaging.average(files)
    checkpoint.atomic_save(averaged, output)
    err.print(f"mtkit: wrote {escape(str(output))} (model only, step {averaged['step']}).")


DECODE_FIELDS = frozenset(f.name for f in dataclasses.fields(DecodeConfig))
# Flags that only mean something in one mode: said at once instead of silently ignored.
SAMPLING_ONLY = ("topk", "topp", "temperature", "seed")
SEARCH_ONLY = ("beam", "alpha", "lenpen")


def _refuse(flags: list[str], why: str) -> None:
    if flags:
        raise MtkitError(f"{flags[0]} {why}")


def _check_modes(
    given: dict[str, Any],
    sampling: bool,
    prefix: bool,
    prefix_file: Optional[str],
    score_only: bool,
    target_file: Optional[str],
) -> None:
    """One sentence for a combination of flags that cannot work together."""

    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    if score_only:
        decoding = {"sampling": sampling, "prefix": prefix, "prefix_file": prefix_file, **given}
        _refuse(
            [flag(n) for n, v in decoding.items() if v],
            "does not apply with --score-only (it scores the given targets; nothing is decoded).",
        )
    _refuse([flag(n) for n in SAMPLING_ONLY if n in given and not sampling], "applies only with --sampling.")
    _refuse(
        [flag(n) for n in SEARCH_ONLY if n in given and sampling],
        "does not apply with --sampling (samples are drawn, not searched for).",
    )
    _refuse(
        ["--prefix-file"] if prefix and prefix_file else [], "and --prefix are two ways to give prefixes; pick one."
    )
    _refuse(
        ["--target-file"] if target_file and not score_only else [],
        "gives the targets of --score-only; add --score-only.",
    )


def _second_file(stack: Any, path: Optional[str]) -> Optional[Iterator[str]]:
    from mtkit.textio import open_input, read_lines_lenient

    return None if path is None else read_lines_lenient(stack.enter_context(open_input(path)), name=path)


@app.command()
@config_options(DecodeConfig, SamplingConfig, EngineConfig)
def translate(
    model: list[str] = typer.Option(
        ...,
        "--model",
        "-m",
        show_default=False,
        help="An mtkit model or checkpoint file (e.g. averaged.pt), a Hugging Face Marian directory, or a "
        "Hugging Face Hub name (owner/name, e.g. Helsinki-NLP/opus-mt-en-de: downloaded once into its cache); repeat "
        "for an ensemble (log of the mean of the models' probabilities). A directory of `mtkit export --format "
        "ctranslate2` runs on CTranslate2.",
    ),
    input: Optional[str] = typer.Option(
        None,
        "--input",
        "-i",
        show_default="stdin",
        help="Raw text to translate, one sentence a line (a file, a pipe, or -).",
    ),
    output: Optional[str] = typer.Option(
        None, "--output", "-o", show_default="stdout", help="Where the translations go, one line for each input line."
    ),
    batch_tokens: int = typer.Option(
        DEFAULT_BATCH_TOKENS,
        "--batch-tokens",
        "--max-tokens",
        min=1,
        help="Source tokens per batch, padding included (--max-tokens: the same).",
    ),
    buffer_size: Optional[int] = typer.Option(
        None,
        "--buffer-size",
        min=1,
        show_default=f"{DEFAULT_CHUNK_LINES}; 1 on a terminal",
        help="Lines read before translating them; 1 answers each line at once (for a co-process).",
    ),
    scores: bool = typer.Option(
        False,
        "--scores",
        help="Append <TAB>SCORE (log-probability / length penalty; with --sampling, log-probability).",
    ),
    confidence: bool = typer.Option(
        False,
        "--confidence",
        help="Append <TAB>CONFIDENCE: the probability that the translation is acceptable, by the calibrator "
        "`mtkit calibrate` fitted for the model (docs/confidence.md). A document (-i FILE in a document format) is "
        "left as it is: its summary goes to stderr, each segment's confidence to --confidence-report.",
    ),
    confidence_report: Optional[str] = typer.Option(
        None,
        "--confidence-report",
        show_default="none",
        help="With --confidence and a document: a JSON file of each segment's source, translation and confidence, "
        "and the document's summary (docs/documents.md).",
    ),
    reverse_model: Optional[str] = typer.Option(
        None,
        "--reverse-model",
        show_default="none",
        help="With --confidence: a model of the other direction whose score of the source is a feature too.",
    ),
    calibrator: Optional[str] = typer.Option(
        None,
        "--calibrator",
        show_default="the one `mtkit calibrate` wrote beside the model",
        help="With --confidence: the calibrator file to use.",
    ),
    sampling: bool = typer.Option(
        False,
        "--sampling",
        help="Sample instead of beam search (back-translation); --nbest N draws N independent samples.",
    ),
    prefix: bool = typer.Option(
        False,
        "--prefix",
        help="Input lines are SOURCE<TAB>PREFIX: each output begins "
        "with its target prefix (a line without TAB has none).",
    ),
    prefix_file: Optional[str] = typer.Option(
        None, "--prefix-file", show_default="none", help="Target prefixes, one a line, aligned with the input."
    ),
    score_only: bool = typer.Option(
        False,
        "--score-only",
        help="Score given translations instead: input lines "
        "SOURCE<TAB>TARGET; writes log P(target|source), its per-token average and "
        "the length (EOS counted), tab-separated.",
    ),
    target_file: Optional[str] = typer.Option(
        None,
        "--target-file",
        show_default="none",
        help="With --score-only: the targets, one a line, aligned with the input (which then holds sources only).",
    ),
    format: str = typer.Option(
        "auto",
        "--format",
        help="auto: by -i's extension (.html .md .srt .vtt .po .xlf .docx: a document, written back whole with "
        "its structure; docs/documents.md), else text; text: one sentence a line; html-lines: each line an HTML "
        "fragment, tags kept; or a document format: paragraphs, html, markdown, srt, vtt, po, xliff, docx.",
    ),
    attributes: str = typer.Option(
        "",
        "--attributes",
        show_default="none",
        help="HTML attributes whose values are translated too, comma-separated (e.g. title,alt).",
    ),
    glossary: Optional[str] = typer.Option(
        None,
        "--glossary",
        show_default="none",
        help="Terms whose translation is enforced: a file of source<TAB>target lines (a .csv file: CSV). A term "
        "applies where its source side occurs (any case, whole words, longest first); see docs/glossary.md.",
    ),
    device: str = device_option("cpu, cuda, cuda:N, mps, or auto (CUDA when available)."),
    threads: int = typer.Option(0, min=0, help="CPU threads for PyTorch; 0 keeps PyTorch's default."),
    revision: Optional[str] = revision_option(),
    target_lang: str = target_lang_option(),
    workers: int = typer.Option(
        1,
        min=1,
        help="Batches searched at once on the CPU, each by a process of its own with one thread (Marian's "
        "--cpu-threads, CTranslate2's inter_threads): --workers 2 on 2 cores keeps both busy while Python "
        "works out each step.",
    ),
    compile: str = compile_option(),
    *,
    given: dict[str, Any],
) -> None:
    r"""Translate raw text, one sentence a line, with beam search (or sampling); or score given translations.

    Example: mtkit translate -m runs/small/averaged.pt < test.en > test.hyp.de

    Sampling, 3 samples a line: mtkit translate -m averaged.pt --sampling --topk 10 --nbest 3 --seed 7 < mono.de

    Ensemble: mtkit translate -m seed1/averaged.pt -m seed2/averaged.pt < test.en

    -m also takes a Hugging Face Marian directory (an OPUS-MT model too), a Hub name such as
    Helsinki-NLP/opus-mt-en-de, or a CTranslate2 directory (mtkit export --format ...).

    Target prefix: printf 'A man sleeps.\tEin Mann\n' | mtkit translate -m averaged.pt --prefix

    Scoring pairs: paste test.en test.de | mtkit translate -m averaged.pt --score-only

    A multilingual model, into French: mtkit translate -m averaged.pt --target-lang fr < test.en

    A document, its structure kept: mtkit translate -m averaged.pt -i page.html -o page.de.html

    HTML, one fragment a line, tags kept: mtkit translate -m averaged.pt --format html-lines < posts.html

    A glossary, its terms enforced: mtkit translate -m averaged.pt --glossary terms.tsv < test.en
    """
    import contextlib
    import logging

    from tqdm import tqdm

    from mtkit.decode import loading
    from mtkit.decode.confidence import Confidence
    from mtkit.decode.glossary import Glossary, checked
    from mtkit.decode.pairs import tab_pairs, zip_lines
    from mtkit.textio import open_input, open_output, read_lines_lenient

    setup_logging(logging.WARNING)
    precision = build(EngineConfig(), given).precision
    given = {k: v for k, v in given.items() if k != "precision"}  # the rest are decoding's settings
    _check_modes(given, sampling, prefix, prefix_file, score_only, target_file)
    from mtkit.documents import FORMATS, format_of

    format = (format_of(input) or "text") if format == "auto" else format
    check_confidence(confidence, reverse_model, calibrator, sampling, score_only, format, given.get("nbest", 1))
    if format not in ("text", "html-lines", *FORMATS):
        raise MtkitError(f"--format takes auto, text, html-lines or {', '.join(FORMATS)}, not {format!r}.")
    named = [a.strip().lower() for a in attributes.split(",") if a.strip()]
    if named and format not in ("html", "html-lines"):
        raise MtkitError(
            f"--attributes names HTML attributes; it applies to --format html and html-lines, not {format}."
        )
    if format != "text" and (sampling or prefix or prefix_file or score_only or scores or given.get("nbest", 1) > 1):
        raise MtkitError(f"--format {format} translates its text once: drop --sampling, --prefix, --score-only, "
                         "--scores and --nbest.")  # fmt: skip
    if glossary is not None and score_only:
        raise MtkitError("--glossary applies to translating; --score-only scores the given targets.")
    from mtkit.cli.documents import check_report

    check_report(confidence_report, confidence, format in FORMATS, output)
    terms = None if glossary is None else Glossary.read(glossary)  # a bad file is said before the model loads
    # the decoding flags given: laid over the model's defaults (`loading.prepare`), checked here under their flags
    changes = {k: v for k, v in given.items() if k in DECODE_FIELDS and not (sampling and k == "nbest")}
    build(DecodeConfig(), changes)
    sampler = build(SamplingConfig(samples=given.get("nbest", 1)), given) if sampling else None
    if workers > 1 and threads > 1:
        raise MtkitError("each of --workers runs one thread: give --workers N for N cores, without --threads.")
    threads = threads or (1 if workers > 1 else 0)  # with workers: the products are timed as a worker runs them
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(open_input(input))
        if format not in FORMATS:
            from mtkit.cli.documents import refuse_binary

            refuse_binary(source, str(input or "the input"))
        second = _second_file(stack, prefix_file or target_file)
        out = stack.enter_context(open_output(output))  # before the model: a bad path is said at once
        report = None if confidence_report is None else stack.enter_context(open_output(confidence_report))
        # find, check (before the weights are read), open, defaults: the model's own under the flags given
        translator = loading.prepare(
            model, device, precision, workers, threads, revision, sampling=sampler, compile=compile, **changes
        )
        stack.callback(translator.close)
        target_lang = translator.check_target_lang(target_lang)  # before any line is read
        terms = checked(terms, translator.engine, sampler)
        config = translator.defaults
        rate = Confidence.open(translator, reverse_model, calibrator, device, precision) if confidence else None
        interactive = source.isatty()  # translate each line as it is typed
        chunk_lines = buffer_size or (1 if interactive else DEFAULT_CHUNK_LINES)
        lines = read_lines_lenient(source, name=str(input or "input"))
        pairs = (
            zip_lines(lines, second, (str(input or "the input"), str(prefix_file or target_file)))
            if second is not None
            else tab_pairs(lines, "--score-only" if score_only else None)
        )
        if format in FORMATS:
            from mtkit.cli.documents import translate_file

            translate_file(source, out, format, translator, config, batch_tokens, target_lang, named, terms, rate,
                           report)  # fmt: skip
            return
        if format == "html-lines":
            from mtkit.decode.markup import translate_fragments
            from mtkit.textio import one_line

            fragments = translate_fragments(
                translator, lines, config, batch_tokens, chunk_lines, target_lang, named, glossary=terms
            )
            texts = (f"{one_line(text)}\n" for text in fragments)
        elif score_only:
            texts = (
                f"{s.logprob:.4f}\t{s.average:.4f}\t{s.length}\n"
                for s in translator.score_stream(pairs, batch_tokens, chunk_lines, target_lang)
            )
        else:
            items = pairs if (prefix or prefix_file) else lines
            stream = translator.translate_stream(
                items,
                config,
                batch_tokens,
                chunk_lines,
                sampling=sampler,
                target_lang=target_lang,
                confidence=rate,
                glossary=terms,
            )
            texts = (_format(tr, sampler.samples if sampler else config.nbest, scores) for tr in stream)
        for text in tqdm(texts, unit=" lines", disable=not sys.stderr.isatty() or interactive, file=sys.stderr):
            out.write(text.encode("utf-8"))
            out.flush()


def _format(tr: Any, nbest: int, scores: bool) -> str:
    """One translation's output: TEXT, TEXT<TAB>SCORE, or with nbest > 1 LINE<TAB>TEXT<TAB>SCORE lines; then
    <TAB>CONFIDENCE when it has one (--confidence)."""
    from mtkit.textio import one_line

    if nbest > 1:
        return "".join(f"{tr.line}\t{one_line(t)}\t{s:.4f}\n" for t, s in tr.hypotheses)
    score = f"\t{tr.score:.4f}" if scores else ""
    rated = "" if tr.confidence is None else f"\t{tr.confidence:.4f}"
    return f"{one_line(tr.text)}{score}{rated}\n"
