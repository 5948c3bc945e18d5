"""File translation against plain lines on the same text: test sentences as lines (`translate(lines)`), and the
same sentences as a document of each format (`mtkit.translate_document`), each format's pass right after a pass of
the lines, round after round; sentences per second, and the ratio to the lines of the pass beside it, median of the
rounds.

    python bench/documents_speed.py --model model.pt --data DIR --lines 200 --rounds 3
    python bench/documents_speed.py --model model.pt --data DIR --write   # docs/results/documents-speed.json

Over the public API only. The documents hold three sentences a paragraph (a cue, a catalogue entry, ...); a
caption without final punctuation gets a period, on both sides, so that the paragraph splits back into the same
sentences the lines hold. Each pass is timed by the wall clock and by this process's CPU time: on a machine
other processes share, the wall clock of two passes a minute apart can differ tenfold, the CPU time of one
thread (`--threads 1`, the default: no worker threads spinning) far less, so the ratio is taken on CPU time.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import command, commit, machine  # noqa: E402  # the benches' one harness
from paragraphs import punctuated, read  # noqa: E402  # the captions read and joined as the paragraphs bench does


def documents(sentences: list[str]) -> dict[str, bytes]:
    """The sentences as a document of each format, three a paragraph."""
    groups = [" ".join(sentences[i : i + 3]) for i in range(0, len(sentences), 3)]
    esc = [g.replace("&", "&amp;").replace("<", "&lt;") for g in groups]
    srt = "".join(f"{k + 1}\n00:00:{k % 60:02d},000 --> 00:00:{k % 60:02d},900\n{g}\n\n" for k, g in enumerate(groups))
    po = "".join(f'msgid "{g.replace(chr(34), "")}"\nmsgstr ""\n\n' for g in groups)
    found = {
        "paragraphs": "\n\n".join(groups).encode(),
        "html": ("<!DOCTYPE html><html><body>" + "".join(f"<p>{g}</p>" for g in esc) + "</body></html>").encode(),
        "markdown": "\n\n".join(groups).replace("*", "\\*").replace("_", "\\_").encode(),
        "srt": srt.encode(),
        "po": po.encode(),
    }
    try:
        import docx

        document = docx.Document()
        for g in groups:
            document.add_paragraph(g)
        buffer = io.BytesIO()
        document.save(buffer)
        found["docx"] = buffer.getvalue()
    except ImportError:
        pass
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--test", default="test_2016_flickr")
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: CPU time is the work done)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--out", type=Path)
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()

    import torch

    import mtkit

    torch.set_num_threads(args.threads)
    translator = mtkit.load_translator(args.model, device="cpu")
    sentences = [punctuated(s) for s in read(args.data / f"{args.test}.en")[: args.lines]]
    docs = documents(sentences)
    wall: dict[str, list[float]] = {"lines": [], **{k: [] for k in docs}}
    cpu: dict[str, list[float]] = {k: [] for k in wall}
    pairs: dict[str, list[float]] = {k: [] for k in wall}  # each format's CPU time over its lines pass's

    def timed(name: str, work: Any) -> float:
        started, began = time.perf_counter(), time.process_time()
        work()
        wall[name].append(time.perf_counter() - started)
        cpu[name].append(time.process_time() - began)
        return cpu[name][-1]

    translator.translate(sentences[:8])  # warm
    for r in range(args.rounds):
        for name, data in docs.items():
            lines = timed("lines", lambda: translator.translate(sentences))
            document = functools.partial(mtkit.translate_document, data, name, translator)
            pairs[name].append(lines / timed(name, document))
        pairs["lines"].append(1.0)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in cpu.items()), flush=True)
    rows = [
        {
            "name": k,
            "sentences_per_s": len(sentences) / statistics.median(wall[k]),
            "sentences_per_cpu_s": len(sentences) / statistics.median(cpu[k]),
            "x_lines": statistics.median(pairs[k]),
            "passes": {"wall_s": wall[k], "cpu_s": cpu[k], "x_lines": pairs[k]},
        }
        for k in wall
    ]
    for row in rows:
        print(f"{row['name']:12s} {row['sentences_per_cpu_s']:7.1f} sentences/CPU s  {row['x_lines']:.2f}x lines")
    record = {
        "renderer": "bench/documents_speed.py",
        "what": "file translation against plain lines, the same sentences, paired rounds",
        "command": command(sys.argv),
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "threads": torch.get_num_threads(),
        "sentences": len(sentences),
        "words": sum(len(s.split()) for s in sentences),
        "rows": rows,
    }
    if args.write or args.out:
        out = args.out or ROOT / "docs" / "results" / "documents-speed.json"
        out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}")


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The markdown table docs/documents.md shows."""
    lines = ["| input | sentences per CPU second | x plain lines | sentences/s (wall clock, shared machine) |"]
    lines += ["|---|---|---|---|"]
    lines += [
        f"| {r['name']} | {r['sentences_per_cpu_s']:.1f} | {r['x_lines']:.2f} | {r['sentences_per_s']:.1f} |"
        for r in rows
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
