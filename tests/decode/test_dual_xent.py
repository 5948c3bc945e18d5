"""Dual conditional cross-entropy (Junczys-Dowmunt 2018): two toy models, one each way, score aligned pairs
below misaligned ones through two `Translator.score` calls (mtkit/decode/pairs.py), and `mtkit clean --dual-xent`
drops the misaligned pairs that no rule sees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mtkit import checkpoint
from mtkit.data.webclean import WebCleanConfig, clean_files
from mtkit.decode.loading import prepare
from mtkit.decode.pairs import dual_cross_entropy
from tests.support.corpora import short_pairs
from tests.support.models import TOY_STEPS, train_toy
from tests.support.spm import BYTE_PIECES, train_spm


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    """A toy model each way: the forward task reverses the words and adds a suffix, the backward one undoes it."""
    pairs = short_pairs(600, seed=7)
    vocab = train_spm([s for s, _ in pairs] + [t for _, t in pairs], vocab_size=120 + BYTE_PIECES)
    folder = tmp_path_factory.mktemp("dual-xent")
    paths = []
    for name, task in (("fwd", pairs), ("bwd", [(t, s) for s, t in pairs])):
        model = train_toy(vocab, task)
        paths.append(folder / f"{name}.pt")
        checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab, step=TOY_STEPS), paths[-1])
    return paths[0], paths[1]


def dual_xent_filter(forward: Path, backward: Path):
    return dual_cross_entropy(prepare(forward, "cpu"), prepare(backward, "cpu"))


def _held_out() -> tuple[list[str], list[str], list[str]]:
    pairs = short_pairs(80, seed=11)
    src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
    return src, tgt, tgt[1:] + tgt[:1]  # aligned targets, and the same targets one pair off


def test_aligned_pairs_score_below_misaligned_ones(models):
    scorer = dual_xent_filter(*models)
    src, tgt, shifted = _held_out()
    aligned, misaligned = np.array(scorer(src, tgt)), np.array(scorer(src, shifted))
    assert np.all(np.isfinite(aligned)) and np.all(aligned >= 0)
    assert np.median(aligned) * 2 < np.median(misaligned)
    assert (aligned < misaligned).mean() > 0.9
    # Batching and order change nothing: one pair alone scores as it does among the others.
    alone = scorer(src[3:4], tgt[3:4])
    assert alone[0] == pytest.approx(aligned[3], rel=1e-4, abs=1e-5)
    # A side longer than the model's positions is cut to them, as a source is, not refused.
    long = " ".join([tgt[0]] * 400)
    assert np.isfinite(scorer([long, src[0]], [long, tgt[0]])).all()


def test_any_model_a_translator_runs_scores_pairs(opus_dir):
    """An OPUS-MT directory (a Hub name reads as one) scores as an mtkit file does: the score is the translator's."""
    scorer = dual_cross_entropy(prepare(opus_dir, "cpu"), prepare(opus_dir, "cpu"))
    src, tgt = ["a small test", "the house"], ["ein kleiner Test", "das Haus"]
    forward = [-s.average for s in prepare(opus_dir, "cpu").score(zip(src, tgt))]
    backward = [-s.average for s in prepare(opus_dir, "cpu").score(zip(tgt, src))]
    expect = [abs(f - b) + (f + b) / 2 for f, b in zip(forward, backward)]
    assert scorer(src, tgt) == pytest.approx(expect)


def test_clean_drops_the_misaligned_pairs_by_dual_cross_entropy(models, tmp_path):
    src, tgt, shifted = _held_out()
    half = len(src) // 2
    targets = tgt[:half] + shifted[half:]  # the second half misaligned
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in src), encoding="utf-8")
    (tmp_path / "in.de").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    scorer = dual_xent_filter(*models)
    scores = np.array(scorer(src, targets))
    threshold = float((np.median(scores[:half]) + np.median(scores[half:])) / 2)
    record = clean_files(
        tmp_path / "in.en",
        tmp_path / "in.de",
        "en",
        "de",
        tmp_path / "c",
        WebCleanConfig(dual_xent_max=threshold),
        scorer=scorer,
        scorer_about="fwd bwd",
    )
    kept = (tmp_path / "c.de").read_text(encoding="utf-8").splitlines()
    assert record["dropped"]["dual_xent"] == len(src) - len(kept)
    assert sum(t in tgt[:half] for t in kept) >= 0.8 * half  # most aligned pairs stay
    assert sum(t in shifted[half:] and t not in tgt[:half] for t in kept) <= 0.2 * half  # most misaligned go


def test_the_command_drops_the_misaligned_pairs_with_two_models(models, cli, tmp_path):
    src, aligned, misaligned = _half_misaligned(tmp_path)
    scores = np.array(dual_xent_filter(*models)(src, aligned + misaligned))
    half = len(aligned)
    threshold = float((np.median(scores[:half]) + np.median(scores[half:])) / 2)
    r = cli(
        "clean",
        tmp_path / "in.en",
        tmp_path / "in.de",
        "--out",
        tmp_path / "c",
        "--dual-xent",
        *models,
        "--dual-xent-max",
        f"{threshold}",
    )
    assert r.returncode == 0, r.stderr
    assert "dual_xent" in r.stderr
    kept = (tmp_path / "c.de").read_text(encoding="utf-8").splitlines()
    assert sum(t in aligned for t in kept) >= 0.8 * half  # most aligned pairs stay
    assert sum(t in misaligned and t not in aligned for t in kept) <= 0.2 * half  # most misaligned go


def _half_misaligned(tmp_path: Path) -> tuple[list[str], list[str], list[str]]:
    src, tgt, shifted = _held_out()
    half = len(src) // 2
    targets = tgt[:half] + shifted[half:]
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in src), encoding="utf-8")
    (tmp_path / "in.de").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    return src, tgt[:half], shifted[half:]


def test_a_share_to_drop_finds_its_threshold_and_scores_each_pair_once(models, tmp_path):
    src, aligned, misaligned = _half_misaligned(tmp_path)
    scorer, scored = dual_xent_filter(*models), []

    def counting(s: list[str], t: list[str]) -> list[float]:
        scored.extend(zip(s, t))
        return scorer(s, t)

    config = WebCleanConfig(dual_xent_drop=0.5)
    record = clean_files(
        tmp_path / "in.en", tmp_path / "in.de", "en", "de", tmp_path / "c", config, scorer=counting, scorer_about="fb"
    )
    kept = (tmp_path / "c.de").read_text(encoding="utf-8").splitlines()
    assert record["dropped"]["dual_xent"] == len(src) // 2  # the sample is the whole input: the share is exact
    assert record["settings"]["dual_xent_drop"] == 0.5 and record["settings"]["dual_xent_max"] > 0
    assert sum(t in aligned for t in kept) >= 0.8 * len(aligned)
    assert len(scored) == len(src)  # the sample's scores were reused, not computed again


def test_a_resumed_run_keeps_the_threshold_it_began_with(models, tmp_path):
    _half_misaligned(tmp_path)
    scorer = dual_xent_filter(*models)
    config = WebCleanConfig(dual_xent_drop=0.25)

    def stop(done: int, total: int) -> None:  # after the second chunk: the first one's state is on disk
        if done > 20:
            raise KeyboardInterrupt

    args = (tmp_path / "in.en", tmp_path / "in.de", "en", "de", tmp_path / "c", config)
    with pytest.raises(KeyboardInterrupt):
        clean_files(*args, chunk_pairs=20, checkpoint_s=0, progress=stop, scorer=scorer, scorer_about="fb")
    first = json.loads((tmp_path / "c.clean-state.json").read_text())["dual_xent_max"]
    # Scores shifted by one would move a new estimate by one; the resumed run keeps the first threshold.
    record = clean_files(*args, scorer=lambda s, t: [x + 1.0 for x in scorer(s, t)], scorer_about="fb")
    assert record["settings"]["dual_xent_max"] == first


def test_the_command_drops_a_share(models, cli, tmp_path):
    _half_misaligned(tmp_path)
    out = tmp_path / "c"
    r = cli(
        "clean", tmp_path / "in.en", tmp_path / "in.de", "--out", out, "--dual-xent", *models, "--dual-xent-drop", "0.5"
    )
    assert r.returncode == 0, r.stderr
    assert "--dual-xent-drop 0.5: dropped pairs scoring above" in r.stderr
    both = cli(
        "clean",
        tmp_path / "in.en",
        tmp_path / "in.de",
        "--out",
        out,
        "--dual-xent",
        *models,
        "--dual-xent-drop",
        "0.5",
        "--dual-xent-max",
        "2",
    )
    assert both.returncode != 0 and "not both" in both.stderr and "Traceback" not in both.stderr
