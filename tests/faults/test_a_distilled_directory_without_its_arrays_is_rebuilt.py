"""`bin/` of a distilled directory deleted (or any file `mtkit bpe` wrote there): a rerun of the same command encodes
it again from the pairs it holds (nothing is translated again), and `--restart` makes the whole directory again;
neither says "nothing to do" over a directory that cannot be trained on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mtkit import distill
from mtkit.data.dataset import open_data
from mtkit.decode import loading
from tests.support.distill import toy_task


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path, Path]:
    return toy_task(tmp_path_factory.mktemp("distill-bin"))


def run(data: Path, teacher: Path, out: Path, restart: bool = False) -> dict:
    plan = loading.plan([teacher], device="cpu", beam=1, max_len_b=8)
    return distill.distill(data, plan, out, distill.DistillOptions(chunk_lines=9, restart=restart))


def arrays(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "bin").rglob("*")) if p.is_file()}


@pytest.mark.parametrize("restart", [False, True], ids=["rerun", "restart"])
def test_a_rerun_or_a_restart_makes_the_deleted_arrays_again(toy, tmp_path, monkeypatch, caplog, restart):
    data, teacher, _ = toy
    out = tmp_path / "new"
    run(data, teacher, out)
    before = arrays(out)
    assert before
    shutil.rmtree(out / "bin")
    if not restart:  # the pairs are there: nothing to translate
        monkeypatch.setattr(distill, "_translate", lambda *a, **k: pytest.fail("translated again"))
    again = run(data, teacher, out, restart=restart)
    assert again["reused"] is False and again["state"] == "done"
    assert arrays(out) == before
    assert len(open_data(out).split("train")) == again["pairs"]["distilled"]
    assert run(data, teacher, out)["reused"] is True  # now whole: nothing to do
