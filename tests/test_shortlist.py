"""The lexical shortlist: learnt by IBM Model 1, carried in the model file, searched, exported as a vmap; and a
student's defaults (greedy, its shortlist)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from mtkit import checkpoint, shortlist
from mtkit.config import DecodeConfig
from mtkit.data.binarize import BinaryWriter, IndexedDataset
from mtkit.data.shortlist import learn
from mtkit.decode.beam import beam_search
from mtkit.decode.ensemble import Ensemble, make_step
from mtkit.decode.loading import prepare as open_model
from mtkit.decode.shortlist import SPECIAL, Restriction
from mtkit.errors import MtkitError
from mtkit.info import describe, render
from tests.support.distill import toy_task


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path, Path]:
    return toy_task(tmp_path_factory.mktemp("shortlist"))


@pytest.fixture(scope="module")
def with_shortlist(toy, tmp_path_factory) -> Path:
    data, model, _ = toy
    out = tmp_path_factory.mktemp("sl") / "model.pt"
    shortlist.make(model, data, out, k=8, frequent=10)
    return out


def shortlisted(model, src, config, rows, prefix=None):
    """The beam search over the output rows `rows`, its outputs in token ids (as the engine runs it)."""
    batch = Restriction(rows)
    return batch.tokens(beam_search(model, src, config, batch.columns(prefix), batch.steps(make_step)))


def arrays(tmp_path: Path, name: str, sentences: list[list[int]]) -> IndexedDataset:
    with BinaryWriter(tmp_path / name, 100) as writer:
        writer.add_many(sentences)
    return IndexedDataset(tmp_path / name)


def test_ibm1_finds_the_translation_that_co_occurrence_alone_would_not(tmp_path):
    # 10 is always with 20, and 20 is in every target: counts alone would give 11 the candidate 20 first.
    src = arrays(tmp_path, "s", [[10], [10, 11], [10, 11], [10, 12], [12]])
    tgt = arrays(tmp_path, "t", [[20], [20, 21], [21, 20], [20, 22], [22]])
    learned = learn(src, tgt, 100, k=2, frequent=1, iterations=10)
    assert learned.candidates[10, 0] == 20 and learned.candidates[11, 0] == 21 and learned.candidates[12, 0] == 22
    assert learned.candidates[50].tolist() == [-1, -1]  # never seen: no candidates
    assert learned.frequent.tolist() == [20]
    assert (learned.candidates[learned.candidates >= 0] >= SPECIAL).all()


def test_a_shortlist_of_every_piece_searches_as_the_full_layer(with_shortlist):
    translator = open_model(with_shortlist, "cpu")
    model = translator.engine.model
    src = torch.tensor([[7, 9, 12, 3], [15, 3, 0, 0]])
    config = DecodeConfig(beam=3, max_len_b=6)
    full = beam_search(model, src, config)
    every = shortlisted(model, src, config, torch.arange(model.cfg.target_vocab_size))
    assert [[h.tokens for h in s] for s in every.hypotheses] == [[h.tokens for h in s] for s in full.hypotheses]
    for mine, theirs in zip(every.hypotheses, full.hypotheses):
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)


def test_an_int8_model_keeps_its_int8_rows_under_a_shortlist(with_shortlist):
    """Restricted, an int8 output layer is the same integers with the same scales (not a dequantized fp32 copy):
    its rows' logits are the full int8 layer's, and a shortlist of every row searches as the full layer does."""
    from mtkit.runtime.int8 import Int8Linear

    model = open_model(with_shortlist, "cpu", "int8").engine.model
    assert isinstance(model.output_proj, Int8Linear)
    torch.manual_seed(0)
    states = torch.randn(6, model.cfg.d_model)
    rows = torch.tensor([0, 1, 2, 3, 9, 17, 40, 41])
    assert torch.allclose(model.output_proj.rows(rows)(states), model.project(states)[:, rows], atol=1e-6, rtol=0)
    src, config = torch.tensor([[7, 9, 12, 3], [5, 3, 0, 0]]), DecodeConfig(beam=3, max_len_b=6)
    every = shortlisted(model, src, config, torch.arange(model.cfg.target_vocab_size))
    assert [[h.tokens for h in s] for s in every.hypotheses] == [
        [h.tokens for h in s] for s in beam_search(model, src, config).hypotheses
    ]


@pytest.mark.parametrize("per_row", [True, False])
def test_an_int8_layer_is_unpacked_once_and_its_rows_keep_their_integers(per_row, monkeypatch):
    """fbgemm keeps the weight packed; the rows of a shortlist come from one unpacked copy kept on the layer
    (unpacking cost milliseconds a batch), with the layer's own integers, scales and bias, for both quantization
    schemes; new weights drop the copy."""
    import warnings

    from torch import nn
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    from mtkit.runtime.int8 import Int8Linear

    torch.manual_seed(3)
    qconfig = (
        torch.ao.quantization.per_channel_dynamic_qconfig if per_row else torch.ao.quantization.default_dynamic_qconfig
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(16, 40)), {nn.Linear: qconfig})[0]
    layer.__class__ = Int8Linear  # as mtkit.runtime.int8.quantize_int8 makes them
    rows = torch.tensor([0, 2, 3, 17, 39])
    picked = layer.rows(rows)
    full, mine = layer.weight(), picked.weight()
    assert torch.equal(mine.int_repr(), full.int_repr()[rows])
    if per_row:
        assert torch.equal(mine.q_per_channel_scales(), full.q_per_channel_scales()[rows])
    else:
        assert mine.q_scale() == full.q_scale()
    assert torch.equal(picked.bias(), layer.bias()[rows])
    states = torch.randn(4, 16)
    assert torch.allclose(picked(states), layer(states)[:, rows], atol=1e-6, rtol=0)
    shift = torch.randn(40)
    assert torch.equal(layer.rows(rows, shift)(states), picked(states) + shift[rows])
    unpacked = []
    monkeypatch.setattr(DynamicLinear, "weight", lambda self: unpacked.append(self) or full)
    layer.rows(torch.tensor([1, 5]))
    assert unpacked == []  # the layer's copy was kept, not unpacked again
    layer.set_weight_bias(full, None)
    layer.rows(torch.tensor([1, 5]))
    assert unpacked == [layer]  # new weights: unpacked again


def test_an_fp32_layer_restricted_gives_its_rows_logits(with_shortlist):
    model = open_model(with_shortlist, "cpu").engine.model
    torch.manual_seed(0)
    states, rows = torch.randn(6, model.cfg.d_model), torch.tensor([0, 1, 2, 3, 9, 17, 40])
    full, shift = model.output_proj(states), torch.randn(model.cfg.target_vocab_size)
    assert torch.allclose(model.output_proj.rows(rows)(states), full[:, rows], atol=1e-5, rtol=0)
    assert torch.allclose(model.output_proj.rows(rows, shift)(states), (full + shift)[:, rows], atol=1e-5, rtol=0)


def test_an_ensemble_searches_through_the_same_shortlist_step(toy, with_shortlist):
    """The shortlist wraps whatever step the search was given: an ensemble restricted to every row searches as the
    full ensemble, restricted to a few rows emits only those; an ensemble whose members all carry a shortlist
    uses their union, by default, as one model does."""
    model = open_model(with_shortlist, "cpu").engine.model
    other = open_model(toy[2], "cpu").engine.model
    ensemble = Ensemble([model, other])
    src, config = torch.tensor([[7, 9, 12, 3], [15, 3, 0, 0]]), DecodeConfig(beam=3, max_len_b=6)
    every = shortlisted(ensemble, src, config, torch.arange(model.cfg.target_vocab_size))
    full = beam_search(ensemble, src, config)
    assert [[h.tokens for h in s] for s in every.hypotheses] == [[h.tokens for h in s] for s in full.hypotheses]
    few = shortlisted(ensemble, src, DecodeConfig(beam=3, nbest=3, max_len_b=6), torch.tensor([0, 1, 2, 3, 20, 21, 40]))
    emitted = [t for s in few.hypotheses for h in s for t in h.tokens]
    assert emitted and set(emitted) <= {1, 20, 21, 40}  # UNK is one of the four kept
    both = open_model([with_shortlist, with_shortlist], "cpu")
    assert both.defaults.shortlist
    one = open_model(with_shortlist, "cpu")
    lines = (toy[0] / "raw" / "valid.en").read_text().splitlines()
    config = DecodeConfig(beam=2, max_len_b=8, shortlist=True)
    assert both.translate(lines, config) == one.translate(lines, config)  # a model twice: itself
    assert open_model([with_shortlist, toy[2]], "cpu").defaults.shortlist is False


def test_the_search_emits_only_the_batch_s_rows(with_shortlist):
    translator = open_model(with_shortlist, "cpu")
    model = translator.engine.model
    rows = torch.tensor([0, 1, 2, 3, 20, 21, 40])
    result = shortlisted(model, torch.tensor([[7, 9, 12, 3]]), DecodeConfig(beam=2, max_len_b=5), rows)
    assert result.hypotheses[0] and set(result.hypotheses[0][0].tokens) <= {20, 21, 40}
    found = translator.engine.shortlist.rows([[7, 9]], [[55]], torch.device("cpu"))
    assert found[:SPECIAL].tolist() == [0, 1, 2, 3] and 55 in found.tolist()
    assert found[SPECIAL:].tolist() == sorted(set(found[SPECIAL:].tolist()))


def narrowed_to_one_piece(path: Path, out: Path) -> tuple[Path, str]:
    """`path`'s model with a shortlist of one piece (no candidates, one frequent piece: its first with a word's text)
    and that piece's text: every output it searches is that piece, repeated (or UNK, one of the four kept)."""
    ckpt = checkpoint.load(path)
    record, vocab = ckpt["shortlist"], open_model(path, "cpu").vocab
    piece = next(int(p) for p in record["frequent"] if len(vocab.decode([int(p)]).strip()) > 1)
    narrow = {"candidates": torch.full_like(record["candidates"], -1), "frequent": torch.tensor([piece])}
    checkpoint.atomic_save({**ckpt, "shortlist": {**record, **narrow}}, out)
    return out, vocab.decode([piece]).strip()


def only(word: str, line: str) -> bool:
    """`line` is `word` repeated (and SentencePiece's UNK, ⁇), nothing else."""
    return re.fullmatch(rf"(\s|{re.escape(word)}|⁇)*", line) is not None


def test_translate_uses_the_shortlist_by_default_and_says_what_it_changed(toy, with_shortlist, tmp_path):
    data, model, _ = toy
    lines = (data / "raw" / "valid.en").read_text().splitlines()
    carrying = open_model(with_shortlist, "cpu")
    plain = open_model(model, "cpu")
    config = carrying.settings(max_len_b=8)
    assert config.shortlist and config.beam == 4  # not a student: the paper's beam
    assert plain.defaults.shortlist is False
    restricted = carrying.translate(lines, config)
    full = carrying.translate(lines, config, shortlist=False)
    assert full == plain.translate(lines, config, shortlist=False)
    assert sum(a == b for a, b in zip(restricted, full)) >= len(lines) // 2
    with pytest.raises(MtkitError, match="carries no shortlist"):
        plain.translate(lines[:1], config)
    # A translate that ignored the shortlist would say what the full layer says: one piece allowed, one piece out.
    narrow, word = narrowed_to_one_piece(with_shortlist, tmp_path / "one.pt")
    narrowed = open_model(narrow, "cpu").translate(lines, config)
    assert all(only(word, line) for line in narrowed), (word, narrowed)
    assert not all(only(word, line) for line in full), (word, full)


def test_a_student_decodes_greedily_unless_told(toy, tmp_path):
    _, model, _ = toy
    ckpt = checkpoint.load(model)
    ckpt["provenance"] = {"data": {"distilled": {"teacher": [{"path": "t.pt", "sha256": "ab"}], "decode": {}}}}
    checkpoint.atomic_save(ckpt, tmp_path / "student.pt")
    student = open_model(tmp_path / "student.pt", "cpu")
    assert student.defaults.beam == 1
    assert student.settings(beam=5).beam == 5
    assert student.settings(nbest=3).beam == 3  # a beam wide enough for the nbest asked for
    assert student.describe()["decode_defaults"] == {"beam": 1}
    rendered = render(describe(tmp_path / "student.pt"))
    assert re.search(r"student of +t\.pt \(sha256 ab\), its beam None", rendered)
    assert re.search(r"decodes with +beam 1 unless told otherwise", rendered)


def test_serve_applies_the_models_own_defaults_as_translate_does(toy, with_shortlist, tmp_path):
    """`mtkit serve` of a student decodes greedily with its shortlist, unless the command line set the beam: the
    service's request defaults (and /info's) are the model's, filled in once it is loaded."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from mtkit.serve.app import create_app
    from mtkit.serve.service import ServeSettings, Service
    from tests.support.fake_service import BASE_URL
    from tests.support.serve import wait_until

    ckpt = checkpoint.load(with_shortlist)
    ckpt["decode_defaults"] = {"beam": 1, "shortlist": True}  # a student's (its trainer's), then `mtkit shortlist`'s
    checkpoint.atomic_save(ckpt, tmp_path / "student.pt")
    line = (toy[0] / "raw" / "valid.en").read_text().splitlines()[0]
    for given, beam in ((frozenset(), 1), (frozenset({"beam"}), 4)):
        settings = ServeSettings(
            models=(str(tmp_path / "student.pt"),), decode=DecodeConfig(max_len_b=8), decode_given=given, device="cpu"
        )
        service = Service(settings)
        with TestClient(create_app(service), base_url=BASE_URL) as client:
            wait_until(lambda: client.get("/health").status_code == 200, 60, "the model to load")
            decode = client.get("/info").json()["decode"]
            assert (decode["beam"], decode["shortlist"]) == (beam, True)
            answer = client.post("/translate", json={"text": [line]}).json()["translations"]
        assert service.translator is not None
        expect = service.translator.translate([line], dataclasses.replace(settings.decode, beam=beam, shortlist=True))
        assert answer == expect


def test_a_damaged_shortlist_is_one_sentence(with_shortlist, tmp_path):
    ckpt = checkpoint.load(with_shortlist)
    ckpt["shortlist"]["candidates"] = ckpt["shortlist"]["candidates"] + 10_000
    checkpoint.atomic_save(ckpt, tmp_path / "bad.pt")
    with pytest.raises(MtkitError, match="damaged shortlist"):
        open_model(tmp_path / "bad.pt", "cpu")


def test_another_vocabulary_is_refused(toy, tmp_path, cli_model):
    data, _, _ = toy
    with pytest.raises(MtkitError, match="was not trained with"):
        shortlist.make(cli_model, data, tmp_path / "x.pt")


def test_the_commands_and_the_ctranslate2_vocabulary_map(toy, with_shortlist, tmp_path, cli):
    pytest.importorskip("ctranslate2")
    data, model, _ = toy
    made = cli("shortlist", model, data, "-o", tmp_path / "m.pt", "--k", "8", "--frequent", "10")
    assert made.returncode == 0, made.stderr
    assert "8 candidates a source piece" in made.stderr
    out = tmp_path / "ct2"
    exported = cli("export", tmp_path / "m.pt", "--format", "ctranslate2", "-o", out)
    assert exported.returncode == 0, exported.stderr
    vmap = (out / "vmap.txt").read_text(encoding="utf-8").splitlines()
    carried = checkpoint.load(tmp_path / "m.pt")["shortlist"]
    assert vmap[0].startswith("\t") and len(vmap[0].split("\t")[1].split(" ")) == len(carried["frequent"])
    assert all(len(line.split("\t")[1].split(" ")) <= 8 for line in vmap[1:])
    lines = "\n".join((data / "raw" / "valid.en").read_text().splitlines()) + "\n"
    args = ("--beam", "1", "--max-len-b", "8")
    with_map = cli("translate", "-m", out, *args, input=lines)
    without = cli("translate", "-m", out, *args, "--no-shortlist", input=lines)
    mine = cli("translate", "-m", tmp_path / "m.pt", *args, input=lines)
    assert with_map.returncode == without.returncode == mine.returncode == 0, with_map.stderr
    same = np.mean([a == b for a, b in zip(with_map.stdout.splitlines(), mine.stdout.splitlines())])
    assert same >= 0.5, (with_map.stdout, mine.stdout)
    # CTranslate2 searches with the map (use_vmap), or a map of one piece would not give that piece alone.
    narrow, word = narrowed_to_one_piece(tmp_path / "m.pt", tmp_path / "one.pt")
    assert cli("export", narrow, "--format", "ctranslate2", "-o", tmp_path / "one").returncode == 0
    one = cli("translate", "-m", tmp_path / "one", *args, input=lines)
    assert one.returncode == 0, one.stderr
    assert all(only(word, line) for line in one.stdout.splitlines()), (word, one.stdout)
    assert not all(only(word, line) for line in without.stdout.splitlines()), (word, without.stdout)
    plain = tmp_path / "plain"
    assert cli("export", model, "--format", "ctranslate2", "-o", plain).returncode == 0
    refused = cli("translate", "-m", plain, "--shortlist", input=lines)
    assert refused.returncode == 1 and "has no vmap.txt" in refused.stderr
    assert json.loads((out / "mtkit-export.json").read_text())["format"] == "ctranslate2"
    described = cli("info", out)
    assert described.returncode == 0, described.stderr
    size = (out / "model.bin").stat().st_size / 1000
    assert f"CTranslate2 export (float32), model.bin {size:,.1f} KB" in described.stdout
    assert f"vmap.txt, {len(vmap) - 1} source pieces" in described.stdout
    file_info = cli("info", tmp_path / "m.pt")
    assert "8 candidates a source piece + the 10 most frequent pieces" in file_info.stdout
