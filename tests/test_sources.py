"""What a model name is, asked once (mtkit/sources/): every kind claimed by its class, described by it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from mtkit import sources
from mtkit.errors import MtkitError
from mtkit.info import describe, render

ROOT = Path(__file__).resolve().parents[1]


def fake_ct2_export(path: Path) -> Path:
    """The files of `mtkit export --format ctranslate2` that say what it is (CTranslate2 itself is not needed)."""
    path.mkdir()
    (path / "model.bin").write_bytes(b"\0" * 64)
    (path / "config.json").write_text("{}")
    (path / "spm.model").write_bytes(b"x")
    model_config = {"vocab_size": 300, "d_model": 64, "d_ff": 128, "heads": 4, "encoder_layers": 2}
    record = {"format": "ctranslate2", "quantization": "int8", "source": "runs/small/model.pt", "step": 1200}
    (path / "mtkit-export.json").write_text(json.dumps({**record, "model_config": model_config, "mtkit": "0.3.0"}))
    return path


def test_a_ctranslate2_export_is_described_as_one(tmp_path):
    export = fake_ct2_export(tmp_path / "ct2")
    assert isinstance(sources.find(export), sources.CT2Export)
    info = describe(export)
    assert (info["export"], info["quantization"], info["step"]) == ("ctranslate2", "int8", 1200)
    text = render(info)
    assert "CTranslate2 export" in text and "int8" in text and "1,200" in text and "runs/small/model.pt" in text
    assert "run directory" not in text
    with pytest.raises(MtkitError, match="whose weights only CTranslate2 reads"):
        sources.find(export).checkpoint()


def test_the_cli_describes_a_ctranslate2_export(cli, tmp_path):
    done = cli("info", fake_ct2_export(tmp_path / "ct2"))
    assert done.returncode == 0, done.stderr
    assert "CTranslate2 export" in done.stdout and "checkpoints" not in done.stdout


def test_a_run_directory_opens_its_newest_checkpoint(cli_model):
    source = sources.find(cli_model.parent)
    assert isinstance(source, sources.RunDirectory)
    assert source.checkpoint()["step"] == 10  # the newest of the run's checkpoints


def test_each_kind_is_asked_in_order_and_the_rest_is_one_sentence(tmp_path, cli_model):
    assert isinstance(sources.find(cli_model), sources.ModelFile)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MtkitError, match="neither a run directory"):
        sources.find(tmp_path / "empty")
    with pytest.raises(MtkitError, match="does not exist"):
        sources.find(tmp_path / "missing.pt")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_the_checkpoint_format_knows_nothing_of_marian():
    assert not any("marian" in name for name in imports_of(ROOT / "mtkit" / "checkpoint.py"))


def test_marian_vocab_is_a_peer_of_vocab_not_a_subclass():
    from mtkit.data.marian_vocab import MarianVocab
    from mtkit.data.vocab import Vocab

    assert not issubclass(MarianVocab, Vocab) and not hasattr(MarianVocab, "sp")


def test_only_the_marian_package_asks_whether_a_tokenizer_is_marian_s():
    outside = [
        p
        for p in (ROOT / "mtkit").rglob("*.py")
        if "marian" not in p.relative_to(ROOT / "mtkit").parts
        and "isinstance(" in p.read_text(encoding="utf-8")
        and "MarianVocab)" in p.read_text(encoding="utf-8")
    ]
    assert outside == []


def test_hub_names_are_resolved_in_one_place():
    calls = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "mtkit").rglob("*.py")
        if "hub.resolve(" in p.read_text(encoding="utf-8")
    ]
    assert calls == ["mtkit/sources/__init__.py"]
