"""Engines as peers behind one text pipeline, opened by one registry of loaders (mtkit/decode/engine.py, loading.py).

The pipeline runs any engine: a toy one in pure Python (it copies each source as its own translation) gets
input order, empty lines, prefixes, threads and the engine's own refusals from the pipeline alone. The
registry decides what a path is, once, and a new source is one `register`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from mtkit import sources
from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.decode import loading
from mtkit.decode.engine import Engine, Hypotheses
from mtkit.decode.translator import Translator
from mtkit.errors import MtkitError
from tests.support.cli import ROOT


class Words:
    """A tokenizer of whole words, ids from 4 (the special ids come first), learned as it meets them."""

    language_tokens: dict[str, int] = {}  # a tokenizer of one pair: no target-language tokens

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.words: list[str] = []

    def language_token(self, line: str) -> tuple[str, int] | None:
        return None

    def __len__(self) -> int:
        return 4 + 1000

    def encode_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        out = []
        for line in lines:
            for w in line.split():
                if w not in self.ids:
                    self.ids[w] = 4 + len(self.words)
                    self.words.append(w)
            out.append([self.ids[w] for w in line.split()])
        return out

    def encode_target_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        return self.encode_batch(lines, threads)  # one tokenizer for both sides, as mtkit's joint model

    def piece(self, i: int) -> str:
        return self.words[i - 4] if i >= 4 else f"<special {i}>"

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.words[i - 4] for i in ids)


class Echo:
    """An engine that translates each sentence into itself (after its prefix), scored -length; refuses beam 3."""

    device = "cpu"
    vocab_size = 4 + 1000
    max_source_tokens = 20
    languages = None

    def __init__(self, parallel: Literal["processes", "threads"] = "threads") -> None:
        self.parallel = parallel
        self.batches = 0
        self.closed = False

    def search(
        self, ids: list[list[int]], prefixes: list[list[int]], config: DecodeConfig, sampling: SamplingConfig | None
    ) -> Hypotheses:
        self.batches += 1
        return [[([*p, *s], -float(len(s)))] for s, p in zip(ids, prefixes)]

    def score(self, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]:
        return [(-float(len(t)), len(t) + 1) for t in tgt]

    @staticmethod
    def check(config: DecodeConfig, sampling: SamplingConfig | None = None) -> None:
        if config.beam == 3:
            raise MtkitError("Echo runs no beam of 3.")

    @staticmethod
    def defaults() -> dict[str, Any]:
        return {"beam": 1}  # its own default: a beam of 1

    def align(
        self, vocab: Tokenizer, pairs: Sequence[tuple[Sequence[str], Sequence[str]]], target_lang: str = ""
    ) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": "echo"}

    def close(self) -> None:
        self.closed = True


def test_the_pipeline_runs_any_engine_and_keeps_input_order():
    engine: Engine = Echo()
    vocab: Tokenizer = Words()
    translator = Translator(engine, vocab, workers=2)  # the engine's own threads
    lines = [f"w{i} " * (1 + i % 7) for i in range(40)] + [""]
    out = list(translator.translate_stream(lines, DecodeConfig(), batch_tokens=16, chunk_lines=9))
    assert [t.line for t in out] == list(range(1, 42))
    assert [t.text for t in out] == [" ".join(line.split()) for line in lines]
    assert translator.translate([("a b", "c")]) == ["c a b"]
    assert [s.length for s in translator.score([("a", "b c")])] == [3]
    assert translator.describe() == {"kind": "echo", "vocab_size": 1004, "decode_defaults": {}}
    assert translator.device == "cpu"
    translator.close()
    assert engine.closed


def test_the_engine_refuses_what_it_cannot_run_before_any_batch():
    engine = Echo()
    translator = Translator(engine, Words())
    with pytest.raises(MtkitError, match="no beam of 3"):
        translator.translate_stream(["a b"], DecodeConfig(beam=3)).__next__()
    assert engine.batches == 0


def test_a_tokenizer_larger_than_the_engine_is_refused():
    class Big(Words):
        def __len__(self) -> int:
            return 5000

    with pytest.raises(MtkitError, match="more than the model's 1004 embeddings"):
        Translator(Echo(), Big())


def test_forked_workers_are_asked_of_an_engine_on_the_cpu_only():
    engine = Echo("processes")
    engine.device = "cuda"
    with pytest.raises(MtkitError, match="on the CPU only"):
        Translator(engine, Words(), workers=2)
    threaded = Echo("threads")
    threaded.device = "cuda"
    Translator(threaded, Words(), workers=2).close()  # an engine's own threads run anywhere


def test_the_registry_says_what_a_path_is_once(tmp_path, cli_model):
    assert loading.find(cli_model).runner.name == "mtkit"
    assert isinstance(loading.find(cli_model).sources[0], sources.ModelFile)
    ct2 = tmp_path / "ct2"
    ct2.mkdir()
    (ct2 / "model.bin").write_bytes(b"")
    (ct2 / "config.json").write_text("{}")
    assert loading.find(ct2).runner.name == "ctranslate2"
    assert sources.CT2Export.claims(ct2) and not sources.CT2Export.claims(Path(cli_model))
    with pytest.raises(MtkitError, match="not an ensemble"):
        loading.find([ct2, cli_model])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MtkitError, match="neither a run directory, a CTranslate2 export"):
        loading.find(empty)
    with pytest.raises(MtkitError, match="does not exist"):
        loading.find(tmp_path / "missing.pt")
    with pytest.raises(MtkitError, match="--lenpen fairseq"):
        loading.find(ct2).engine().check(DecodeConfig(beam=4, lenpen="gnmt"))
    assert loading.find(ct2).engine().defaults() == {"lenpen": "fairseq"}
    assert loading.find(cli_model).engine().defaults() == {}


class EchoSource:
    """A source of another kind: a path that starts with "echo", run by an engine of its own."""

    kind = "echo model"
    engine = "echo"

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def claims(path: Path) -> bool:
        return path.name.startswith("echo")

    def checkpoint(self) -> dict[str, Any]:
        raise AssertionError("the echo engine reads no mtkit weights")

    def decode_defaults(self) -> dict[str, Any]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind}


def test_a_new_source_is_one_kind_and_a_new_engine_one_runner(monkeypatch):
    opened: list[Any] = []

    def open_echo(found: tuple[Any, ...], device: str, precision: str, workers: int, threads: int) -> Translator:
        opened.append(([s.path for s in found], device, precision, workers, threads))
        return Translator(Echo(), Words(), workers)

    class EchoRunner:
        name = "echo"
        engine = staticmethod(lambda: Echo)
        check_runtime = staticmethod(lambda device, precision: device)
        open = staticmethod(open_echo)

    monkeypatch.setattr(sources, "KINDS", (EchoSource, *sources.KINDS))
    monkeypatch.setitem(loading.RUNNERS, "echo", EchoRunner)
    translator = loading.prepare("echo-model", device="cpu", threads=2)
    assert translator.translate(["x y"]) == ["x y"]
    assert opened == [([Path("echo-model")], "cpu", "fp32", 1, 2)]
    assert translator.defaults.beam == 1  # the engine's own default, laid over DecodeConfig's
    assert loading.prepare("echo-model", beam=2).defaults.beam == 2  # the caller's over it
    from mtkit.info import describe

    assert describe("echo-model") == {"path": "echo-model", "kind": "echo model"}


def test_the_pipeline_and_the_registry_import_no_torch():
    """A CTranslate2 model is translated and served without torch (its import costs ~200 MiB)."""
    code = (
        "import sys\n"
        "import mtkit.decode.translator, mtkit.decode.loading, mtkit.decode.ct2, mtkit.decode.engine\n"
        "import mtkit.precision, mtkit.device\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
