"""Learning curves of one or more runs from RUN/metrics.jsonl: several runs overlaid, on a wall-clock axis.

Peers plot by update; a time budget is how runs are compared, so minutes of training are
the default x axis (time between a stop and its resume left out: each session is stitched
to the end of the one before). Training series are solid lines, validation series dashed
with markers, one panel a series, one colour a run. matplotlib is an optional extra
(`pip install 'mtkit[plot]'`); the figure is drawn without pyplot, so no display is needed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit.atomic import atomic_file
from mtkit.errors import MtkitError

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

X_AXES = ("minutes", "steps", "tokens")
SERIES = ("bleu", "loss", "ppl", "lr", "tokens_per_s")
DEFAULT_SERIES = ("loss", "bleu")
FORMATS = ("png", "pdf", "svg")

# The metrics.jsonl events that carry each series: training log lines and validations.
EVENTS = {
    "bleu": ("valid",),
    "loss": ("train", "valid"),
    "ppl": ("train", "valid"),
    "lr": ("train",),
    "tokens_per_s": ("train",),
}
TITLES = {
    "bleu": "dev BLEU (greedy sacreBLEU, --valid-bleu sentences)",
    "loss": "loss (label-smoothed cross entropy)",
    "ppl": "perplexity (exp of the NLL per token)",
    "lr": "learning rate",
    "tokens_per_s": "training speed",
}
Y_LABELS = {
    "bleu": "BLEU",
    "loss": "nats / target token",
    "ppl": "perplexity (log scale)",
    "lr": "learning rate",
    "tokens_per_s": "source + target tokens / s",
}
X_LABELS = {
    "minutes": "training wall-clock (minutes)",
    "steps": "updates",
    "tokens": "source + target tokens trained on",
}
HINTS = {
    "bleu": "train with --valid-bleu N to score dev translations",
    "lr": "it comes with the training log lines",
    "tokens_per_s": "it comes with the training log lines",
}


@dataclass(frozen=True)
class Run:
    label: str  # the legend's name: the run directory's name, with parents where two would read the same
    path: Path
    records: list[dict[str, Any]]


@dataclass(frozen=True)
class Curve:
    """One line of the figure: a series of one run from one event kind, on the chosen x axis."""

    run: str
    series: str
    event: str  # "train" or "valid"
    x: np.ndarray
    y: np.ndarray
    pair: str = ""  # a multilingual run's language pair (`bleu.en-de`, ...); "" for the whole dev set


# ---- reading --------------------------------------------------------------------------------------------


def read_records(run: Path) -> list[dict[str, Any]]:
    """RUN/metrics.jsonl's records, oldest first; a missing or damaged file is one sentence.

    A run killed mid-line leaves a line cut short: at the end of the file, or, once a resumed run
    appended after it (mtkit/train/metrics.py ends it first), inside it. Such lines (a record's
    start, `{"event"`, that is not whole JSON) are left out with one warning saying how many; any
    other line that is not JSON means this is not a metrics file.
    """
    path = run / "metrics.jsonl" if run.is_dir() else run
    if not run.exists():
        raise MtkitError(f"{run} does not exist; give a run directory (the --out of `mtkit train`).")
    if not path.is_file():
        raise MtkitError(f"{path} holds no metrics.jsonl; give the run directory of `mtkit train`.")
    records, cut = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if line.startswith('{"event"') or not line.endswith("\n"):  # a record cut short by a kill
                    cut.append(number)
                    continue
                raise MtkitError(f"{path} line {number} is not JSON; is it an mtkit metrics file?") from None
            if not isinstance(record, dict) or "event" not in record or "time" not in record:
                raise MtkitError(f"{path} line {number} is not an mtkit metrics record (no event and time).")
            records.append(record)
    if cut:
        shown = ", ".join(map(str, cut[:5])) + (", ..." if len(cut) > 5 else "")
        logger.warning(
            "%s: skipped %d line(s) cut short by a kill (line %s); read %d records.",
            path,
            len(cut),
            shown,
            len(records),
        )
    return records


def read_metrics(run: Path) -> list[dict[str, Any]]:
    """RUN/metrics.jsonl as records to plot; a missing or damaged file, or one with nothing to plot, is one sentence."""
    records = read_records(run)
    if not any(r["event"] in ("train", "valid") for r in records):
        path = run / "metrics.jsonl" if run.is_dir() else run
        raise MtkitError(f"{path} has no training or validation records yet; plot it after the first log line.")
    return records


def labels_for(paths: Sequence[Path]) -> list[str]:
    """Directory names, with as many parent names as it takes for no two to read the same."""
    parts = [Path(os.path.abspath(p)).parts for p in paths]
    for depth in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(p) for p in paths]


def describe(run: Run) -> str:
    """The run's name with what it trained, from RUN/config.json ("run (3+3 layers, d_model 256, seed 1)"): a
    title that says which runs a figure shows, even when the directory is called `run`. Just the name without it."""
    try:
        config = json.loads((run.path / "config.json").read_text(encoding="utf-8"))
        model, train = config["model"], config["train"]
        return (
            f"{run.label} ({model['encoder_layers']}+{model['decoder_layers']} layers, "
            f"d_model {model['d_model']}, seed {train['seed']})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return run.label


def load_runs(paths: Sequence[Path]) -> list[Run]:
    return [Run(label, Path(p), read_metrics(Path(p))) for label, p in zip(labels_for(paths), paths)]


# ---- x axes -----------------------------------------------------------------------------------------------


def minutes_axis(records: list[dict[str, Any]]) -> list[float]:
    """Minutes of training at each record; each session (a `start` record) continues where the last one ended."""
    out: list[float] = []
    offset, session_start, last = 0.0, records[0]["time"], 0.0
    for r in records:
        if r["event"] == "start":
            offset, session_start = last, r["time"]
        last = offset + (r["time"] - session_start) / 60
        out.append(last)
    return out


def tokens_axis(records: list[dict[str, Any]]) -> list[float]:
    """Tokens trained on by each record's step.

    A training record covers the updates since the one before at its `tokens_per_s x s_per_update`
    tokens an update; a validation takes the count at its step. A resume that goes back to an
    earlier step drops the points past it, so counts never include work that was thrown away.
    """
    import numpy as np  # here, not at the top: the CLI imports this module's names for `mtkit --help`

    steps, counts = [0.0], [0.0]
    out: list[float] = []
    for r in records:
        step = float(r.get("step", 0))
        if r["event"] == "train" and "tokens" not in r:
            while len(steps) > 1 and steps[-1] >= step:
                steps.pop(), counts.pop()
            per_update = float(r.get("tokens_per_s", 0.0)) * float(r.get("s_per_update", 0.0))
            steps.append(step)
            counts.append(counts[-1] + (step - steps[-2]) * per_update)
        out.append(float(r["tokens"]) if "tokens" in r else float(np.interp(step, steps, counts)))
    return out


def x_values(records: list[dict[str, Any]], axis: str) -> list[float]:
    if axis == "minutes":
        return minutes_axis(records)
    if axis == "tokens":
        return tokens_axis(records)
    return [float(r.get("step", 0)) for r in records]


def curves(run: Run, axis: str, series: str) -> list[Curve]:
    """The lines of one series of one run: one for each event kind that has it."""
    import numpy as np

    xs = x_values(run.records, axis)
    out = []
    for event in EVENTS[series]:
        points = [
            (x, r[series])
            for x, r in zip(xs, run.records)
            if r["event"] == event and isinstance(r.get(series), (int, float))
        ]
        if points:
            x, y = zip(*points)
            out.append(Curve(run.label, series, event, np.asarray(x, dtype=float), np.asarray(y, dtype=float)))
    # A multilingual run's validations also hold each pair's value, `series.PAIR` (mtkit/train/pairs.py).
    valid = [(x, r) for x, r in zip(xs, run.records) if r["event"] == "valid" and "valid" in EVENTS[series]]
    for pair in dict.fromkeys(k[len(series) + 1 :] for _, r in valid for k in r if k.startswith(f"{series}.")):
        points = [(x, r[f"{series}.{pair}"]) for x, r in valid if isinstance(r.get(f"{series}.{pair}"), (int, float))]
        x, y = zip(*points)
        out.append(Curve(run.label, series, "valid", np.asarray(x, dtype=float), np.asarray(y, dtype=float), pair))
    return out


# ---- drawing ----------------------------------------------------------------------------------------------


NO_RECORD = "no validation or training record has it"


def _check_choices(axis: str, series: Sequence[str]) -> None:
    if axis not in X_AXES:
        raise MtkitError(f"unknown x axis {axis!r}; choose one of {', '.join(X_AXES)}.")
    unknown = [s for s in series if s not in SERIES]
    if unknown:
        raise MtkitError(f"unknown series {unknown[0]!r}; choose from {', '.join(SERIES)}.")


def panels(runs: Sequence[Run], axis: str, series: Sequence[str] | None) -> dict[str, list[Curve]]:
    """The curves of each panel. A series no run has is left out, with a warning when it was asked for by name (as
    the default leaves out BLEU for runs trained without --valid-bleu); nothing left to draw is an error."""
    asked = list(dict.fromkeys(series or DEFAULT_SERIES))
    _check_choices(axis, asked)
    out = {name: [c for run in runs for c in curves(run, axis, name)] for name in asked}
    missing = [name for name, found in out.items() if not found]
    out = {name: found for name, found in out.items() if found}
    if not out and len(asked) == 1:
        raise MtkitError(f"no run has {asked[0]} values to plot ({HINTS.get(asked[0], NO_RECORD)}).")
    if not out:
        raise MtkitError(f"the runs have none of {', '.join(asked)} to plot; name a series with --y.")
    for name in missing if series else []:
        logger.warning("no run has %s values to plot (%s); drawing the others", name, HINTS.get(name, NO_RECORD))
    return out


def _matplotlib() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MtkitError("mtkit plot needs matplotlib: pip install 'mtkit[plot]'.") from None
    return Figure


def _format_y(ax: Any, name: str) -> None:
    """Plain numbers on every y axis: perplexity on a log scale (it falls by orders of magnitude)."""
    from matplotlib.ticker import FuncFormatter, LogFormatter

    if name == "ppl":
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    elif name == "lr":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.3g}"))
    elif name == "tokens_per_s":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def draw(runs: Sequence[Run], axis: str = "minutes", series: Sequence[str] | None = None) -> Any:
    """The figure (a matplotlib Figure, not shown): one panel a series, sharing the x axis."""
    Figure = _matplotlib()
    chosen = panels(runs, axis, series)
    fig = Figure(figsize=(9, 0.6 + 2.9 * len(chosen)), layout="constrained", dpi=110)
    axes = fig.subplots(len(chosen), 1, sharex=True, squeeze=False)[:, 0]
    colours = {run.label: f"C{i % 10}" for i, run in enumerate(runs)}
    pairs = list(dict.fromkeys(c.pair for lines in chosen.values() for c in lines if c.pair))
    for ax, (name, lines) in zip(axes, chosen.items()):
        for c in lines:
            valid = c.event == "valid"
            ax.plot(
                c.x,
                c.y,
                color=colours[c.run],
                linestyle=(":" if c.pair else "--") if valid else "-",
                # a lone training point is a dot, not nothing; each language pair its own marker
                marker="sv^Dpx*h"[pairs.index(c.pair) % 8] if c.pair else "o" if valid or len(c.x) == 1 else None,
                markersize=3.5,
                linewidth=1.4 if valid else 1.1,
                label=f"{c.run} {c.pair} ({c.event})" if c.pair else f"{c.run} ({c.event})",
            )
        ax.set_title(TITLES[name], fontsize=10, loc="left")
        ax.set_ylabel(Y_LABELS[name])
        ax.grid(True, alpha=0.3)
        _format_y(ax, name)
        ax.legend(fontsize=8, loc="best")
    axes[-1].set_xlabel(X_LABELS[axis])
    if axis == "tokens":
        from matplotlib.ticker import EngFormatter

        axes[-1].xaxis.set_major_formatter(EngFormatter())  # 20 M, 1.5 G: short labels that never overlap
    fig.suptitle("Learning curves: " + "; ".join(describe(run) for run in runs), fontsize=11)
    return fig


def save(fig: Any, output: Path) -> Path:
    """Write the figure atomically; the format follows the file's suffix (png, pdf or svg)."""
    fmt = output.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise MtkitError(f"{output}: the figure's file must end in .png, .pdf or .svg.")
    with atomic_file(output) as f:
        fig.savefig(f, format=fmt)
    return output


def plot(
    paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    axis: str = "minutes",
    series: Sequence[str] | None = None,
) -> Path:
    """Read the runs, draw their curves, write the image; returns its path."""
    if not paths:
        raise MtkitError("give at least one run directory to plot.")
    runs = load_runs([Path(p) for p in paths])
    return save(draw(runs, axis, series), Path(output))
