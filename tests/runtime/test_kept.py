"""Measured decisions kept per machine (mtkit/runtime/kept.py): read, not timed again; timed again for another key."""

from __future__ import annotations

import json

import pytest
import torch

from mtkit.runtime import kept, matmul, packing, precision

CPU = torch.device("cpu")


@pytest.fixture
def timings(monkeypatch):
    """oneDNN's measured speed-up, scripted: each call takes the next answer and is counted."""
    monkeypatch.setenv(matmul.BACKEND_ENV, "auto")
    monkeypatch.setattr(matmul, "onednn_works", lambda: True)
    answers, calls = [2.18, 0.88, 1.5], []

    def measure(d_model, training):
        calls.append((d_model, training))
        return answers[len(calls) - 1]

    monkeypatch.setattr(matmul, "onednn_speedup", measure)
    return calls


def test_a_decision_is_measured_once_then_read_from_the_machine_s_file(timings):
    first = matmul.resolve_backend(CPU, 256)
    second = matmul.resolve_backend(CPU, 256)  # the answer that would come now (0.88x) is never asked for
    assert len(timings) == 1 and first.name == second.name == "onednn"
    assert "2.18x" in second.why and "measured now" in first.why and "kept in" in second.why
    assert f"{kept.REMEASURE_ENV}=1 measures again" in second.why
    entries = json.loads(kept.cache_file().read_text())["entries"]
    (entry,) = entries.values()
    assert entry["value"] == 2.18 and entry["settings"] == {"d_model": 256, "training": True}
    assert entry["machine"]["torch"] == str(torch.__version__) and entry["machine"]["cpu"]


def test_another_key_measures_again(timings, monkeypatch):
    assert matmul.resolve_backend(CPU, 256).name == "onednn"
    assert matmul.resolve_backend(CPU, 512).name == "default" and len(timings) == 2  # another width
    monkeypatch.setattr(kept, "cpu_name", lambda: "another CPU")
    assert matmul.resolve_backend(CPU, 256).name == "onednn" and len(timings) == 3  # another machine
    monkeypatch.undo()


@pytest.mark.parametrize("change", ["torch", "threads", "flags", "isa", "mkl", "aten"])
def test_the_key_holds_the_cpu_flags_torch_threads_and_isa_cap(monkeypatch, change):
    before = kept.key("x", {}, CPU)[0]
    if change == "torch":
        monkeypatch.setattr(torch, "__version__", "0.0.1")
    elif change == "threads":
        monkeypatch.setattr(torch, "get_num_threads", lambda: 97)
    elif change == "flags":
        monkeypatch.setattr(kept, "cpu_flags", lambda: frozenset({"avx2"}))
    elif change == "isa":
        monkeypatch.setenv(kept.ISA_ENV, "AVX2")
    else:
        monkeypatch.setenv({"mkl": "MKL_ENABLE_INSTRUCTIONS", "aten": "ATEN_CPU_CAPABILITY"}[change], "AVX2")
    assert kept.key("x", {}, CPU)[0] != before


def test_remeasure_times_again_and_keeps_the_new_answer(timings, monkeypatch):
    matmul.resolve_backend(CPU, 256)
    monkeypatch.setenv(kept.REMEASURE_ENV, "1")
    assert matmul.resolve_backend(CPU, 256).name == "default" and len(timings) == 2
    monkeypatch.delenv(kept.REMEASURE_ENV)
    assert "0.88x" in matmul.resolve_backend(CPU, 256).why and len(timings) == 2


def test_a_damaged_file_is_measured_over_and_an_unwritable_one_only_warns(timings, tmp_path, monkeypatch, caplog):
    kept.cache_file().parent.mkdir(parents=True, exist_ok=True)
    kept.cache_file().write_text("{not json")
    assert matmul.resolve_backend(CPU, 256).name == "onednn" and len(timings) == 1
    assert json.loads(kept.cache_file().read_text())["format"] == kept.FORMAT
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MTKIT_CACHE", str(blocked / "sub"))  # its parent is a file: nothing can be written there
    assert matmul.resolve_backend(CPU, 256).name == "default" and "could not keep" in caplog.text


def test_precision_auto_keeps_its_choice(monkeypatch):
    monkeypatch.delenv(precision.AUTO_ENV, raising=False)
    monkeypatch.setattr(precision, "bf16_instructions", lambda: "AMX")
    ratios = [1.8, 0.9]
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda d_model, device, attempt: ratios.pop(0))
    first, second = precision.resolve_precision("auto", CPU), precision.resolve_precision("auto", CPU)
    assert first[0] == second[0] == "bf16" and ratios == [0.9] and "kept in" in second[1]


def test_packing_keeps_each_shape_s_answer(monkeypatch):
    calls = []
    monkeypatch.setattr(packing, "packed_speedup", lambda *shape, rows=packing.DECODE_ROWS: calls.append(rows) or 1.5)
    weight = torch.randn(24, 16)
    assert packing.pack(weight, "measured") is not None and packing.pack(weight, "measured") is not None
    assert calls == [packing.DECODE_ROWS, *[(r,) for r in packing.FEW_ROWS]]  # its rows, then each few, once
    assert packing.pack(torch.randn(8, 16), "measured") is not None and len(calls) == 2 * len(packing.FEW_ROWS) + 2
