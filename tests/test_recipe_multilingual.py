"""The multilingual recipe's dry run: every command parses with mtkit's own parsers, the multilingual model gets
the bilingual models' updates together, the runs alternate (A B B A), and nothing is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.recipes import ROOT, dry_run, parse_line, parse_mtkit


@pytest.mark.parametrize("args, updates", [([], 400), (["--updates", "60", "--warmup", "100"], 60)])
def test_dry_run_gives_equal_updates_in_alternating_rounds(args, updates, tmp_path: Path) -> None:
    folder = ROOT / "recipes" / "multi30k-multilingual"
    a, b = tmp_path / "en de", tmp_path / "fr cs"
    steps = []
    for line in dry_run("multi30k-multilingual", *args, "--mirror", str(a), "--mirror", str(b), cwd=tmp_path):
        argv, torchrun, _ = parse_line(line)
        assert torchrun is None
        steps.append(parse_mtkit(argv))
    data = folder / "out" / "data"
    prepares = [p for name, p in steps if name == "prepare"]
    assert [p["name"] for p in prepares] == ["multi30k-en-de", "multi30k-en-fr", "multi30k-en-cs"]
    assert all(p["mirror"] == [a, b] for p in prepares)
    bpe = [p for name, p in steps if name == "bpe"]
    assert bpe[-1]["data_dirs"] == [data / "en-de", data / "en-fr", data / "en-cs"] and bpe[-1]["out"] == data / "en-xx"
    trains = [(p["out"].name, p["max_steps"], p) for name, p in steps if name == "train"]
    half = updates // 2
    assert [(run, n) for run, n, _ in trains] == [
        ("run-en-de", half),
        ("run-en-fr", half),
        ("run-en-cs", half),
        ("run-en-xx", 3 * half),
        ("run-en-xx", 3 * updates),
        ("run-en-cs", updates),
        ("run-en-fr", updates),
        ("run-en-de", updates),
    ]
    settings = {k: v for k, v in trains[0][2].items() if k not in ("data", "out", "max_steps")}
    assert all({k: v for k, v in p.items() if k not in ("data", "out", "max_steps")} == settings for *_, p in trains)
    assert settings["lr_cooldown"] is None, "no cooldown: its schedule would depend on the round's --max-steps"
    translations = [p for name, p in steps if name == "translate"]
    assert len(translations) == 6
    for p in translations:
        multi = Path(p["model"][0]).parent.name == "run-en-xx"
        tgt = p["output"].rsplit(".", 1)[-1]
        assert (p.get("target_lang") or "") == (tgt if multi else "")  # the direction: not a search setting
        assert p["input"] == str(data / f"en-{tgt}" / "raw" / "test.en")
