"""Write the Multi30k recipe's results.md and pick OUT/model.pt (called by run.sh).

usage: python results.py OUT RUN MINUTES [COMMAND...] -- [STAGE_ROW...]

OUT/model.pt becomes the better of the last and the averaged checkpoint by dev BLEU (never by
test BLEU); a run that translated only the test set with the last checkpoint (--quick) keeps that
one. Either way it is a model file (the last checkpoint's weights without its training state, or
the average). The training wall-clock comes from the run's own log, which sums every resume; the
other stages' rows are this invocation's, as run.sh measured them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from mtkit import checkpoint
from mtkit.average import model_file
from mtkit.device import cpu_name
from mtkit.plot import minutes_axis


def metric(scores: dict, prefix: str) -> dict:
    return next(m for m in scores["scores"] if m["name"].startswith(prefix))


def dev_bleu(scores: dict, which: str) -> float | None:
    """Dev BLEU of `which`, or None where the dev set was not translated with it."""
    return metric(scores[("valid", which)], "BLEU")["score"] if ("valid", which) in scores else None


def versions() -> str:
    import sacrebleu
    import torch

    import mtkit

    return f"mtkit {mtkit.__version__}, torch {torch.__version__}, sacrebleu {sacrebleu.__version__}"


def scored(out: Path) -> tuple[dict, list[str], str]:
    """The scores the recipe wrote into OUT by (split, model), the models that translated the test set, and the
    one that is model.pt: the better by dev BLEU (never test BLEU), the last checkpoint where only it ran."""
    scores = {
        (split, which): json.loads(path.read_text(encoding="utf-8"))
        for split in ("valid", "test")
        for which in ("last", "averaged")
        if (path := out / f"scores.{split}.{which}.json").is_file()
    }
    models = [which for which in ("last", "averaged") if ("test", which) in scores]
    return scores, models, max(models, key=lambda which: dev_bleu(scores, which) or 0.0)


def trained_on(start: dict) -> tuple[str, str]:
    """(where, what) the run trained: "this CPU", its name and cores, or "this GPU" and its name, and the training
    precision, from the log's start record (figures differ by CPU: AVX2 only, AVX-512, native bf16)."""
    cores = f"{os.cpu_count()} CPU cores ({cpu_name()})"
    precision = f"; training precision {start['precision']}" if start.get("precision") else ""
    if not str(start.get("device", "cpu")).startswith("cuda"):
        return "this CPU", cores + precision
    import torch

    return "this GPU", f"{torch.cuda.get_device_name(torch.device(start['device']))}, {cores}{precision}"


def decoding(commands: list[str]) -> str:
    """The search the recipe's translate steps ran, from their command lines (mtkit's defaults where not given)."""
    command = next((c for c in commands if "mtkit translate" in c), "")

    def flag(name: str, default: str) -> str:
        found = re.search(rf"--{name}[ =](\S+)", command)
        return found.group(1) if found else default

    return (
        f"Beam {flag('beam', '4')}, GNMT length penalty alpha {flag('alpha', '0.6')}, "
        f"{flag('early-stop', 'patience')} stop"
    )


def main(argv: list[str]) -> str:
    out, run, budget = Path(argv[0]), Path(argv[1]), argv[2]
    rest = argv[3:]
    commands, stages = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
    scores, models, best = scored(out)
    if best == "last":  # its weights without the training state: a third of the checkpoint's size
        checkpoint.atomic_save(model_file(run / "checkpoint_last.pt"), out / "model.pt")
    else:
        shutil.copyfile(out / "averaged.pt", out / "model.pt.tmp")
        os.replace(out / "model.pt.tmp", out / "model.pt")

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    minutes = minutes_axis(records)  # training wall-clock, resumes stitched: the x axis of curves.png
    done = [r for r in records if r["event"] == "done"][-1]
    trains = [r for r in records if r["event"] == "train"]
    window = (
        f"last log window {trains[-1]['tokens_per_s']:,.0f} tokens/s (source + target), "
        f"{trains[-1]['s_per_update']:.3f} s/update"
        if trains
        else "no log window (fewer updates than --log-every)"
    )
    where, machine = trained_on([r for r in records if r["event"] == "start"][-1])  # the last resume's machine
    names = {"last": f"last checkpoint (update {done['step']})", "averaged": "average of the last checkpoints"}

    lines = [
        f"# Multi30k En-De, small Transformer, {budget} minutes of training on {where}",
        "",
        f"Made by `recipes/multi30k-en-de/run.sh` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: "
        f"{versions()}; Python {platform.python_version()}; {machine}.",
        "",
        "| model | test_2016_flickr sacreBLEU | test chrF2 | dev sacreBLEU |",
        "|---|---|---|---|",
    ]
    for which in models:
        mark = " **= model.pt**" if which == best else ""
        dev = dev_bleu(scores, which)
        lines.append(
            f"| {names[which]}{mark} | {metric(scores[('test', which)], 'BLEU')['score']:.2f} | "
            f"{metric(scores[('test', which)], 'chrF')['score']:.2f} | "
            f"{'not translated' if dev is None else f'{dev:.2f}'} |"
        )
    lines += [
        "",
        f"{decoding(commands)}, maximum length source + 50. "
        + ("model.pt is the better of the two on the dev set." if len(models) > 1 else "model.pt is this model."),
        "",
        f"- sacreBLEU signature: `{metric(scores[('test', best)], 'BLEU')['signature']}`",
        f"- chrF signature: `{metric(scores[('test', best)], 'chrF')['signature']}`",
        f"- training: {done['step']} updates, {done['epochs_done']} full epochs, stopped by "
        f"`{done['stopped']}` after {done['hours'] * 60:.1f} minutes of training wall-clock; {window}",
        "",
        "## BLEU by time",
        "",
        "Greedy translations of the first dev sentences, scored during training (`--valid-bleu`).",
        "",
        "| minutes | update | epoch | dev loss | dev perplexity | dev greedy sacreBLEU |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m:.1f} | {r['step']} | {r['epoch']} | {r['loss']:.3f} | {r['ppl']:.2f} | {r['bleu']:.2f} |"
        for m, r in zip(minutes, records)
        if r["event"] == "valid" and "bleu" in r
    ]
    if (out / "curves.png").is_file():
        lines += [
            "",
            "![Learning curves: dev BLEU, loss and perplexity by minutes of training](curves.png)",
            "",
            f"(`mtkit plot {run} --y bleu --y loss --y ppl -o {out / 'curves.png'}`: solid lines are the "
            "training log, dashed ones the validations.)",
        ]
    lines += [
        "",
        "## Wall-clock of each stage",
        "",
        "| stage | h:mm:ss |",
        "|---|---|",
        *stages,
        f"| (training loop, from the run's log, all resumes) | {done['hours'] * 60:.1f} min |",
        "",
        "## Commands",
        "",
        "```bash",
        *commands,
        "```",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1:]))
