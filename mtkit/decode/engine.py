"""What the text pipeline (mtkit/decode/translator.py) asks of the engine that searches, and of the tokenizer.

Two peers implement `Engine`: mtkit's own search over PyTorch models (mtkit/decode/torch_engine.py) and
CTranslate2 (mtkit/decode/ct2.py). The loader (mtkit/decode/loading.py) picks one, once, from what the files
are; from then on the pipeline, the CLI and the server ask the engine, never the path: which settings it runs
(`check`), its own defaults (`defaults`: the layer between DecodeConfig's and the model's, mtkit/sources/defaults.py),
what it is (`describe`), where it runs (`device`). Nothing here imports torch, so a CTranslate2 model is served
without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mtkit.config import DecodeConfig, SamplingConfig

if TYPE_CHECKING:
    from mtkit.data.tokenizer import Tokenizer
    from mtkit.decode.glossary import Terms

Hypotheses = list[list[tuple[list[int], float]]]  # per sentence, its (ids without BOS/EOS, score), best first


class Engine(Protocol):
    """Batches of source ids (no EOS) in, per sentence its hypotheses by mtkit's settings out; forced scoring.

    `parallel`: how `workers` > 1 batches run at once: "processes" forked from this one (each with one
    thread: mtkit's engine, whose Python work between steps holds the interpreter's lock), or "threads"
    (an engine that lets go of the lock while it searches: CTranslate2).
    """

    parallel: Literal["processes", "threads"]
    enforces_terms: bool  # searches with a glossary's terms (mtkit/decode/constraints.py): mtkit's engine, not CT2

    @property
    def device(self) -> str:
        """Where it runs: "cpu", "cuda", "cuda:1", "mps" (what /info and the log say)."""
        ...

    @property
    def vocab_size(self) -> int:
        """The token ids the model embeds: a tokenizer with more cannot feed it."""
        ...

    @property
    def max_source_tokens(self) -> int:
        """The longest source it takes, in tokens, before the EOS appended to it."""
        ...

    def search(
        self,
        ids: list[list[int]],
        prefixes: list[list[int]],
        config: DecodeConfig,
        sampling: SamplingConfig | None,
        terms: Terms | None = None,
    ) -> Hypotheses:
        """`terms`: each sentence's glossary terms as target ids, which its output must hold (given only to an
        engine that `enforces_terms`)."""
        ...

    def score(self, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]:
        """(log P(target + EOS | source), target length + 1) of each pair."""
        ...

    def align(
        self, vocab: Tokenizer, pairs: Sequence[tuple[Sequence[str], Sequence[str]]], target_lang: str = ""
    ) -> list[list[int | None]] | None:
        """For each (source words, translation words), the source word each translation word came from (None: none
        found); None when this engine cannot say (CTranslate2 keeps no cross-attention to read)."""
        ...

    def check(self, config: DecodeConfig, sampling: SamplingConfig | None = None) -> None:
        """Refuse, with one sentence (MtkitError), a setting this engine cannot run as mtkit would."""
        ...

    @staticmethod
    def defaults() -> dict[str, Any]:
        """This engine's own decoding defaults (DecodeConfig fields), laid over DecodeConfig's and under the
        model's (mtkit/sources/defaults.py): CTranslate2's length penalty."""
        ...

    def describe(self) -> dict[str, Any]:
        """What /info says about the model: path, kind, step, architecture, parameters, vocabulary size."""
        ...

    @property
    def languages(self) -> tuple[str, str] | None:
        """The (source, target) languages the model's record names, or None: sentence splitting's rules."""
        ...

    def close(self) -> None:
        """Free what the engine holds beyond its memory (nothing for both engines today)."""
        ...
