"""`mtkit translate -i FILE -o OUT` of a document: the file read whole, translated by mtkit.documents with a
progress bar, written at once (the output appears only when complete: mtkit/textio.py's open_output); with
--confidence, the document's summary in one line on stderr and its segments in a JSON report (--confidence-report)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, BinaryIO

from rich.markup import escape

from mtkit.cli.app import err
from mtkit.errors import MtkitError

MAX_BYTES = 256 * 1024 * 1024  # a document is read whole: past this it is refused, not swapped in


def refuse_binary(source: BinaryIO, name: str) -> None:
    """Binary data given as lines of text (a .docx with --format text, an image on stdin) refused before the
    model is loaded, by the NUL bytes in its first 64 KiB that text never holds; a terminal is not read ahead."""
    peek = getattr(source, "peek", None)
    if peek is None or source.isatty():
        return
    if b"\x00" in peek(65536)[:65536]:
        raise MtkitError(
            f"{name} is binary (it holds NUL bytes), not lines of text; a document is translated with its own "
            "--format (docs/documents.md)."
        )


def check_report(path: str | None, confidence: bool, document: bool, output: str | None) -> None:
    """--confidence-report: with --confidence, for a document, never where the document itself goes."""
    if path is None:
        return
    if not confidence:
        raise MtkitError("--confidence-report applies only with --confidence.")
    if not document:
        raise MtkitError("--confidence-report is for a document; lines of text get their confidence after a TAB.")
    if str(path) == "-" and output in (None, "-"):
        raise MtkitError("--confidence-report - and the document would both go to stdout; name a file for one.")
    if output is not None and output != "-" and Path(path).resolve() == Path(output).resolve():
        raise MtkitError("--confidence-report names the output file; give the report a file of its own.")


def translate_file(
    source: BinaryIO,
    out: BinaryIO,
    format: str,
    translator: Any,
    config: Any,
    batch_tokens: int,
    target_lang: str,
    attributes: list[str],
    glossary: Any = None,
    confidence: Any = None,
    report: BinaryIO | None = None,
) -> None:
    """The document read from `source` translated into `out`; with a `confidence`, its summary said on stderr and
    the segments written as JSON to `report` (when given)."""
    from tqdm import tqdm

    from mtkit.documents import translate_document_with_report

    data = source.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise MtkitError(f"the input is over {MAX_BYTES >> 20} MiB; a document is read whole, so split it first.")
    bar = tqdm(unit=" units", disable=not sys.stderr.isatty(), file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        done = translate_document_with_report(
            data,
            format,
            translator,
            config,
            target_lang=target_lang,
            batch_tokens=batch_tokens,
            progress=progress,
            attributes=attributes,
            glossary=glossary,
            confidence=confidence,
        )
    finally:
        bar.close()
    out.write(done.data)
    if confidence is None:
        return
    if report is not None:
        report.write(json.dumps(done.record(), ensure_ascii=False, indent=2).encode("utf-8") + b"\n")
    err.print(f"mtkit: {escape(said(done.summary))}")


def said(summary: dict[str, Any] | None) -> str:
    """A document's confidence summary in one line."""
    from mtkit.decode.confidence import FLAG_BELOW

    if summary is None or not summary["segments"]:
        return "confidence: the document has no text to translate."
    checks = summary["to_check"]
    shown = ", ".join(map(str, checks[:10])) + (f" and {len(checks) - 10} more" if len(checks) > 10 else "")
    return (
        f"confidence: {summary['expected_acceptable']:.0%} of {summary['segments']} segments expected acceptable, "
        f"lowest {summary['lowest']:.2f}; "
        + (f"segments to check (below {FLAG_BELOW}): {shown}." if checks else f"none below {FLAG_BELOW}.")
    )
