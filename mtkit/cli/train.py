"""`mtkit train`: options in, the trainer called; a thin command.

The training options are the option fields of TrainConfig and ModelConfig (mtkit/cli/options.py);
a new one is a field in mtkit/config.py, nothing here. What the options make of a run (the preset, fine-tuning's
architecture and schedule, the default preset's warning, a lost torchrun rank's sentence) is the library's
`mtkit.train.start.run`, so that Python callers get the same rules; here, only the exit codes and the last line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal, Optional

import typer

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import (
    config_file_option,
    config_options,
    device_option,
    named_by_flag,
    resolved_values,
    revision_option,
)
from mtkit.config import PRESETS, ModelConfig, TrainConfig

DEFAULT_PRESET = "base"  # mtkit/train/start.py's
PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


def preset_defaults(cls: type, name: str) -> str:
    """What --help shows as the default of a field: each preset's value, grouped where they agree."""
    by_value: dict[Any, list[str]] = {}
    for preset in PRESETS.values():
        config = preset.model if cls is ModelConfig else preset.train
        by_value.setdefault(getattr(config, name), []).append(preset.name)
    if len(by_value) == 1:
        return str(next(iter(by_value)))
    return ", ".join(f"{'/'.join(names)} {value}" for value, names in by_value.items())


def _preset_help() -> str:
    return "Architecture and training defaults: " + "; ".join(f"{p.name}: {p.about}" for p in PRESETS.values()) + "."


# The codes a scheduler reads (mtkit/train/signals.py): shown in --help above the exit codes of every command.
SIGNAL_EXIT_CODES = (
    "After SIGTERM (a preemption: SLURM, Kubernetes, torchrun) training saves checkpoint_last.pt and exits 143; "
    "after SIGHUP (the terminal or ssh session closed) it saves and exits 129; after Ctrl-C it saves and exits 130. "
    "Rerunning the same command resumes the run."
)


@app.command(epilog=SIGNAL_EXIT_CODES)
@config_options(TrainConfig, ModelConfig, show_default=preset_defaults)
def train(
    ctx: typer.Context,
    data: Path = typer.Argument(..., help="Data directory prepared by `mtkit bpe` (bpe.json, spm.model, bin/)."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory; rerunning on an existing one resumes it."),
    preset: Optional[PresetName] = typer.Option(  # type: ignore[valid-type]
        None, help=_preset_help(), show_default=DEFAULT_PRESET
    ),
    set_: Optional[list[str]] = typer.Option(
        None,
        "--set",
        help="Override a model field, e.g. --set encoder_layers=4 --set pre_norm=true (repeatable).",
        show_default="none",
    ),
    device: str = device_option("auto (CUDA if present), cpu, cuda, cuda:N or mps; torchrun: one GPU a rank."),
    threads: int = typer.Option(0, help="CPU threads for torch (0: torch's default)."),
    config: Optional[Path] = typer.Option(
        None,
        "--config",
        is_eager=True,
        callback=config_file_option,
        help="A YAML file of flag names and values (e.g. `max-tokens: 2048`); flags on the command line win over it.",
        show_default="none",
    ),
    restart: bool = typer.Option(
        False,
        "--restart",
        help="Start afresh in a run directory that holds a run: its files move to "
        "RUN/previous-<time>/ (nothing is deleted).",
    ),
    print_config: bool = typer.Option(
        False,
        "--print-config",
        help="Print every resolved value (preset defaults included) as a --config file and exit.",
    ),
    init: Optional[str] = typer.Option(
        None,
        "--init",
        help="Fine-tune: start from this model's weights (an mtkit model or checkpoint, a Marian directory or a "
        "Hugging Face Hub name) and architecture, with a fresh optimizer and, unless --warmup or --lr-scale is "
        "given, the fine-tuning schedule (a peak of 1e-4 after 1000 warmup updates). On a CPU, unless given: "
        "one batch an update (--update-freq 1) of 2048 tokens (--max-tokens), and a warmup of a tenth of the "
        "updates --max-steps or --max-minutes allow, at most 1000. OUT must not hold a run. Encode DATA with "
        "`mtkit bpe DATA --from MODEL` first.",
        show_default="none",
    ),
    revision: Optional[str] = revision_option(),
    *,
    given: dict[str, Any],
) -> None:
    """Train a Transformer on binarized data, the way section 5 of the paper does.

    Several GPUs: torchrun --nproc_per_node 8 -m mtkit train DATA --preset big --out RUN.

    Example: mtkit train data/multi30k-en-de --preset small --out runs/small

    Fine-tuning: mtkit train data/my-en-fr --init Helsinki-NLP/opus-mt-en-fr --out runs/ft --max-minutes 30
    """
    import os

    from mtkit.config import parse_overrides
    from mtkit.train import start as starting

    if print_config:
        import yaml

        with named_by_flag(given):
            resolved = starting.settings(preset, init=init, revision=revision, device=device, threads=threads, **given)
        typer.echo(yaml.safe_dump(resolved_values(ctx, resolved), sort_keys=False, allow_unicode=True), nl=False)
        return
    setup_logging(logging.INFO)
    from mtkit.train.signals import EXIT_CODES

    try:
        with named_by_flag(given):  # a value a config refuses said under the user's flag
            result = starting.run(
                data,
                out,
                preset,
                init=init,
                revision=revision,
                overrides=parse_overrides(set_ or [], ModelConfig),
                device=device,
                threads=threads,
                restart=restart,
                **given,
            )
    except KeyboardInterrupt as exc:  # a second Ctrl-C, or a signal before the loop: temporaries removed
        code, sentence = _stopped_at_once(exc, Path(out))
        err.print(sentence)
        raise typer.Exit(code) from None
    rank = int(os.environ.get("RANK", "0"))
    if result.stopped in EXIT_CODES:  # preempted or Ctrl-C: the update finished and was saved
        if rank == 0:
            err.print(
                f"mtkit: {result.stopped}: saved {out}/checkpoint_last.pt at step {result.step}; "
                "the same command resumes the run."
            )
        # 143 / 129 / 130, as a shell reports a process the signal ended: a Job or an elastic agent retries, not "done".
        raise typer.Exit(EXIT_CODES[result.stopped])
    if rank == 0:
        # no preset turns --valid-bleu on: what the user gave is what the run used
        best = f"best dev BLEU {-result.best:.2f}" if given.get("valid_bleu") else f"best valid NLL {result.best:.3f}"
        err.print(f"trained to step {result.step} ({result.stopped}); {best}; checkpoints in {out}")


def _stopped_at_once(exc: KeyboardInterrupt, out: Path) -> tuple[int, str]:
    """The exit code and the one true line for a stop that could not wait for an update to end.

    A second Ctrl-C, or SIGTERM / SIGHUP before the loop took over the signals (while the run's
    settings are measured, a minute or more on a loaded CPU): 128 + the signal's number as for any
    stop, and the last complete save named only where there is one.
    """
    import signal

    from mtkit.interrupts import Terminated

    signum, how = (exc.signum, f"stopped by {exc.signal_name}") if isinstance(exc, Terminated) else (0, "interrupted")
    code = 128 + (signum or signal.SIGINT)
    if (out / "checkpoint_last.pt").is_file():
        return (
            code,
            f"mtkit: {how} at once; {out}/checkpoint_last.pt is the last complete save; the same command resumes.",
        )
    return code, f"mtkit: {how} before the first save: nothing saved yet; the same command starts the run."
