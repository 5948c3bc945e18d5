"""`mtkit plot`: the figure's lines hold exactly what metrics.jsonl says; bad input is one sentence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mtkit import plot
from mtkit.errors import MtkitError

pytest.importorskip("matplotlib")

T0 = 1_700_000_000.0


def write_run(run: Path, bleu: bool = True, resumed: bool = False) -> list[dict]:
    """A metrics.jsonl like the trainer's: start, train lines every 10 updates, validations every 20."""
    records: list[dict] = [{"event": "start", "time": T0, "params": 100}, {"event": "data", "time": T0 + 1}]
    for step in range(10, 61, 10):
        t = T0 + 6 * step
        records.append(
            {
                "event": "train",
                "time": t,
                "step": step,
                "loss": 9.0 - step / 10,
                "ppl": 800.0 / step,
                "lr": step * 1e-5,
                "tokens_per_s": 1000.0 + step,
                "s_per_update": 0.5,
            }
        )
        if step % 20 == 0:
            valid = {"event": "valid", "time": t + 2, "step": step, "loss": 8.5 - step / 10, "ppl": 700.0 / step}
            records.append(valid | ({"bleu": step / 3} if bleu else {}))
    if resumed:  # a second session an hour later, going back to step 40
        records += [
            {"event": "start", "time": T0 + 4000},
            {"event": "resume", "time": T0 + 4001, "step": 40},
            {
                "event": "train",
                "time": T0 + 4060,
                "step": 50,
                "loss": 3.9,
                "ppl": 16.0,
                "lr": 5e-4,
                "tokens_per_s": 2000.0,
                "s_per_update": 0.5,
            },
        ]
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def lines_of(fig, panel: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    ax = fig.axes[panel]
    return {line.get_label(): (np.asarray(line.get_xdata()), np.asarray(line.get_ydata())) for line in ax.lines}


def test_the_plotted_arrays_are_the_metrics_values_on_each_x_axis(tmp_path: Path) -> None:
    records = write_run(tmp_path / "small")
    train = [r for r in records if r["event"] == "train"]
    valid = [r for r in records if r["event"] == "valid"]
    runs = plot.load_runs([tmp_path / "small"])

    fig = plot.draw(runs, "steps", ["loss", "bleu"])
    loss = lines_of(fig, 0)
    assert np.array_equal(loss["small (train)"][0], [r["step"] for r in train])
    assert np.array_equal(loss["small (train)"][1], [r["loss"] for r in train])
    assert np.array_equal(loss["small (valid)"][1], [r["loss"] for r in valid])
    assert np.array_equal(lines_of(fig, 1)["small (valid)"][1], [r["bleu"] for r in valid])

    minutes = lines_of(plot.draw(runs, "minutes", ["ppl"]), 0)
    assert np.allclose(minutes["small (train)"][0], [(r["time"] - T0) / 60 for r in train])
    assert np.allclose(minutes["small (valid)"][1], [r["ppl"] for r in valid])

    tokens = lines_of(plot.draw(runs, "tokens", ["tokens_per_s"]), 0)["small (train)"]
    per_update = np.array([r["tokens_per_s"] * r["s_per_update"] for r in train])
    assert np.allclose(tokens[0], np.cumsum(per_update * 10))  # 10 updates between log lines
    assert np.array_equal(tokens[1], [r["tokens_per_s"] for r in train])


def test_a_resumed_session_continues_the_clock_and_replaces_the_steps_it_redid(tmp_path: Path) -> None:
    records = write_run(tmp_path / "run", resumed=True)
    minutes = plot.minutes_axis(records)
    first_end = minutes[records.index(next(r for r in records[2:] if r["event"] == "start")) - 1]
    assert minutes[-1] == pytest.approx(first_end + 1.0)  # 60 s after the resume, not an hour later
    tokens = plot.tokens_axis(records)
    assert tokens[-1] == pytest.approx(tokens[7] + 10 * 2000.0 * 0.5)  # from step 40's count, not step 60's


def test_several_runs_are_overlaid_with_their_directory_names(tmp_path: Path) -> None:
    write_run(tmp_path / "a" / "run")
    write_run(tmp_path / "b" / "run", bleu=False)
    out = plot.plot([tmp_path / "a" / "run", tmp_path / "b" / "run"], tmp_path / "curves.png", "steps", ["loss"])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.labels_for([tmp_path / "a" / "run", tmp_path / "b" / "run"]) == ["a/run", "b/run"]
    fig = plot.draw(plot.load_runs([tmp_path / "a" / "run", tmp_path / "b" / "run"]))  # default: loss and bleu
    assert [ax.get_title(loc="left").split()[0] for ax in fig.axes] == ["loss", "dev"]
    assert set(lines_of(fig, 1)) == {"a/run (valid)"}  # b has no BLEU: left out of that panel only
    assert fig._suptitle.get_text() == "Learning curves: a/run; b/run"  # no config.json: the names alone


def test_the_title_names_each_run_with_what_it_trained(tmp_path: Path) -> None:
    write_run(tmp_path / "run")
    config = {"model": {"encoder_layers": 3, "decoder_layers": 3, "d_model": 256}, "train": {"seed": 2}}
    (tmp_path / "run" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    fig = plot.draw(plot.load_runs([tmp_path / "run"]))
    assert fig._suptitle.get_text() == "Learning curves: run (3+3 layers, d_model 256, seed 2)"


@pytest.mark.parametrize(
    "content, series, words",
    [
        (None, None, "holds no metrics.jsonl"),
        ("", None, "has no training or validation records"),
        ('{"event": "start", "time": 1}\n', None, "has no training or validation records"),
        ("not json\n{}\n", None, "line 1 is not JSON"),
        ("default", ["bleu"], "no run has bleu values to plot (train with --valid-bleu N"),
        ("default", ["speed"], "unknown series 'speed'"),
    ],
)
def test_bad_input_is_one_sentence(tmp_path: Path, content, series, words) -> None:
    run = tmp_path / "run"
    if content == "default":
        write_run(run, bleu=False)
    else:
        run.mkdir()
        if content is not None:
            (run / "metrics.jsonl").write_text(content)
    with pytest.raises(MtkitError, match=words.replace("(", r"\(")):
        plot.plot([run], tmp_path / "x.png", "steps", series)
    assert not (tmp_path / "x.png").exists()


def test_a_named_series_no_run_has_is_left_out_with_a_warning_as_the_default_does(tmp_path: Path, caplog) -> None:
    """`--y bleu --y loss` on a run trained without --valid-bleu draws the loss and says why BLEU is missing."""
    write_run(tmp_path / "run", bleu=False)
    with caplog.at_level("WARNING", logger="mtkit.plot"):
        fig = plot.draw(plot.load_runs([tmp_path / "run"]), "steps", ["bleu", "loss"])
    assert [ax.get_title(loc="left").split()[0] for ax in fig.axes] == ["loss"]
    assert "no run has bleu values to plot (train with --valid-bleu N" in caplog.text


def test_the_cli_writes_the_image_and_says_a_mistake_in_one_line(tmp_path: Path, cli) -> None:
    write_run(tmp_path / "run")
    done = cli("plot", tmp_path / "run", "--x", "steps", "--y", "bleu", "--y", "lr", "-o", tmp_path / "c.png")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c.png").stat().st_size > 10_000
    bad = cli("plot", tmp_path / "nowhere", "-o", tmp_path / "d.png")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr
    unknown = cli("plot", tmp_path / "run", "--y", "speed", "-o", tmp_path / "d.png")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr and "speed" in unknown.stderr
    wrong = cli("plot", tmp_path / "run", "-o", tmp_path / "d.jpg")
    assert wrong.returncode == 1 and ".png, .pdf or .svg" in wrong.stderr


def test_a_missing_plot_extra_is_one_sentence(tmp_path: Path, monkeypatch) -> None:
    write_run(tmp_path / "run")
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` of it now fails
    with pytest.raises(MtkitError, match=r"pip install 'mtkit\[plot\]'"):
        plot.plot([tmp_path / "run"], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
