"""Checkpoints: atomic writes, safe loads, models rebuilt from the config saved beside them."""

import pickle
import subprocess
import sys

import pytest
import torch

import mtkit
from mtkit import checkpoint
from mtkit.errors import MtkitError


def test_save_load_rebuild_gives_the_same_model(tmp_path):
    torch.manual_seed(0)
    model = mtkit.build_model("tiny", 50)
    path = tmp_path / "m.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, b"spm-bytes", step=7), path)
    ckpt = checkpoint.load(path)
    assert ckpt["step"] == 7 and ckpt["vocab"] == b"spm-bytes" and checkpoint.config_of(ckpt) == model.cfg
    rebuilt = checkpoint.build_from(ckpt)
    assert rebuilt.src_embed.table is rebuilt.tgt_embed.table  # the tie survives a round trip
    src, tgt = torch.tensor([[5, 6, 3]]), torch.tensor([[2, 7]])
    model.eval(), rebuilt.eval()
    assert torch.equal(model(src, tgt), rebuilt(src, tgt))
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]  # no temporary file left


def test_a_failed_save_keeps_the_previous_file(tmp_path):
    path = tmp_path / "c.pt"
    checkpoint.atomic_save({"format": "mtkit", "version": 1, "n": 1}, path)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        checkpoint.atomic_save({"n": Unpicklable()}, path)
    assert checkpoint.load(path)["n"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_untrusted_and_foreign_files_are_refused_with_one_sentence(tmp_path):
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"format": "mtkit", "x": Evil()}))
    with pytest.raises(MtkitError, match="not a readable mtkit"):
        checkpoint.load(tmp_path / "evil.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(MtkitError, match="not an mtkit model"):
        checkpoint.load(tmp_path / "other.pt")
    with pytest.raises(MtkitError, match="does not exist"):
        checkpoint.load(tmp_path / "missing.pt")


def test_weights_that_do_not_fit_the_config_are_all_named(tmp_path):
    model = mtkit.build_model("tiny", 50)
    payload = checkpoint.model_payload(model, model.cfg, None)
    del payload["model"]["encoder.0.ffn.w_1.weight"]
    payload["model"]["encoder.9.extra"] = torch.zeros(1)
    with pytest.raises(
        MtkitError, match="missing weights: encoder.0.ffn.w_1.weight; unexpected weights: encoder.9.extra"
    ):
        checkpoint.build_from(payload)


def test_rebuilding_a_model_leaves_torchs_compiler_unimported_and_init_as_it_was(tmp_path):
    """Built on the meta device with torch.nn.init's functions skipped (and its position table computed on the
    CPU): PyTorch's meta decompositions would import torch._dynamo and sympy, ~70 MiB for a process that only
    decodes. Run in a fresh process, whose modules are its own."""
    torch.manual_seed(0)
    model = mtkit.build_model("tiny", 50)
    path = tmp_path / "m.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, b"spm", step=1), path)
    code = (
        "import sys, torch\nfrom mtkit import checkpoint\n"
        f"ckpt = checkpoint.load({str(path)!r})\n"
        "assert 'torch._dynamo' not in sys.modules and 'sympy' not in sys.modules, 'imported before'\n"
        "model = checkpoint.build_from(ckpt)\n"
        "print(sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    normal = torch.nn.init.normal_
    rebuilt = checkpoint.build_from(checkpoint.load(path))
    assert torch.nn.init.normal_ is normal  # restored
    assert torch.equal(rebuilt.src_embed.positions.pe, model.src_embed.positions.pe)
