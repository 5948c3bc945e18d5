"""A `mtkit clean --dual-xent` run interrupted, its two models retrained in place (same paths, even the same size
and modification time), then rerun: the rerun must not resume with the new models' scores over the old ones'.

The resume compared the models' paths, so it went on, and its output matched neither model pair's (357 pairs
kept where an uninterrupted run with the new models keeps 424). It is keyed on the models' sha256 now, and starts
over with one warning. The scorer here reads a weight from each "model" file: no torch needed to see the fault.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from mtkit.data.webclean import CleanJob, WebCleanConfig, clean


def _open_scorer(forward: Path, backward: Path, device: str):
    weight = float(forward.read_text()) + float(backward.read_text())
    return lambda sources, targets: [weight * len(s) for s in sources]


def _files(tmp_path: Path) -> tuple[Path, Path]:
    sizes = [10 + (7 * i) % 60 for i in range(200)]
    src, tgt = tmp_path / "in.en", tmp_path / "in.de"
    src.write_text("".join("a" * n + f" {i}\n" for i, n in enumerate(sizes)), encoding="utf-8")
    tgt.write_text("".join("b" * n + f" {i}\n" for i, n in enumerate(sizes)), encoding="utf-8")
    return src, tgt


def _retrain_in_place(models: list[Path], weight: str) -> None:
    for path in models:
        st = path.stat()
        path.write_text(weight)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # what a copy with `cp -p` or a coarse clock shows


def test_a_resume_with_models_retrained_in_place_starts_over_and_equals_a_straight_run(tmp_path, caplog):
    """fault: `clean --dual-xent FWD BWD` interrupted, both models retrained in place, then rerun; expected: the
    rerun starts over with one warning naming the models, its output equal to an uninterrupted run's."""
    src, tgt = _files(tmp_path)
    models = [tmp_path / "fwd.pt", tmp_path / "bwd.pt"]
    for path in models:
        path.write_text("1")
    rules = WebCleanConfig(dual_xent_max=120.0)

    def job(prefix: str) -> CleanJob:
        return CleanJob(
            src,
            tgt,
            tmp_path / prefix,
            rules,
            dual_xent=(models[0], models[1]),
            workers=1,
            chunk_pairs=20,
            checkpoint_s=0,
        )

    def stop_halfway(done: int, total: int) -> None:
        if done >= total // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        clean(job("cut"), _open_scorer, stop_halfway)
    assert (tmp_path / "cut.clean-state.json").is_file()
    _retrain_in_place(models, "2")
    with caplog.at_level(logging.WARNING):
        resumed = clean(job("cut"), _open_scorer)
    straight = clean(job("straight"), _open_scorer)
    assert resumed["kept"] == straight["kept"] and resumed["dropped"] == straight["dropped"]
    for lang in ("en", "de"):
        assert (tmp_path / f"cut.{lang}").read_bytes() == (tmp_path / f"straight.{lang}").read_bytes()
    assert "dual cross-entropy models" in caplog.text and "starting over" in caplog.text


def test_a_resume_with_the_same_models_goes_on_from_its_checkpoint(tmp_path):
    """The sha256 key keeps a plain resume a resume: unchanged models go on where the state was."""
    src, tgt = _files(tmp_path)
    models = [tmp_path / "fwd.pt", tmp_path / "bwd.pt"]
    for path in models:
        path.write_text("1")
    job = CleanJob(
        src,
        tgt,
        tmp_path / "c",
        WebCleanConfig(dual_xent_max=120.0),
        dual_xent=(models[0], models[1]),
        workers=1,
        chunk_pairs=20,
        checkpoint_s=0,
    )
    seen: list[int] = []

    def stop_halfway(done: int, total: int) -> None:
        if done >= total // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        clean(job, _open_scorer, stop_halfway)
    clean(job, _open_scorer, lambda done, total: seen.append(done))
    assert seen[0] > 20  # went on from the checkpoint, not from the start
