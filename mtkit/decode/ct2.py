"""CTranslate2 as the engine behind mtkit's text pipeline: `mtkit translate|serve -m DIR` on a `mtkit export` directory.

mtkit keeps everything around the search (SentencePiece, input order, chunks of `--buffer-size` lines,
batches of `--batch-tokens`, the server's batching and limits) and hands each batch of source ids to
`ctranslate2.Translator.translate_batch` (or `score_batch` for `--score-only`). What maps exactly, and how:

- beam, nbest: `beam_size`, `num_hypotheses`. `--lenpen fairseq` is CTranslate2's `length_penalty` (|Y|^alpha,
  |Y| counting EOS in both); `none` is `length_penalty=0`. GNMT's ((5+|Y|)/6)^alpha has no CTranslate2
  counterpart: it is refused with a beam, and with greedy search (where the penalty ranks nothing) the score
  is computed here from CTranslate2's raw log-probability, as for every greedy score.
- `--early-stop patience` is CTranslate2's `patience=1` (stop once `beam` hypotheses have ended); `none`
  lifts it (every sentence runs to its limit); `exact` has no CTranslate2 counterpart and is refused.
- The length limit: CTranslate2 takes one `max_decoding_length` a call and cuts an output there, where
  mtkit's limit is each sentence's own floor(max_len_a x |X| + max_len_b) and ends the output with EOS.
  A call gets the batch's longest limit; an output that passes its own limit, or was cut, is cut back to
  that limit and rescored with EOS (`score_batch`): for greedy search that is exactly mtkit's output.
- `min_decoding_length=0` (an empty output allowed, as in mtkit), `max_input_length=0` (the pipeline has
  already cut the source to the model's positions), `return_end_token=True` (to tell an ending from a cut).
- Target prefixes: `target_prefix`; CTranslate2 leaves the prefix's tokens out of the score, so beam
  rankings with a prefix follow CTranslate2's rule. Sampling: `sampling_topk/topp/temperature`, seeded with
  `ctranslate2.set_random_seed` once a batch: the same input and settings give the same samples, but not
  a sentence's own samples whatever its batch as in mtkit.
- `--workers N` is CTranslate2's `inter_threads=N`: N batches searched at once, by threads of this process.

`CT2Engine` is one of the two engines behind the pipeline (mtkit/decode/engine.py); mtkit/decode/loading.py
opens an export with `open_export` when mtkit/sources/ found a `CT2Export`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from mtkit.config import EOS, DecodeConfig, SamplingConfig
from mtkit.decode.engine import Hypotheses
from mtkit.decode.glossary import Terms
from mtkit.decode.lengths import length_penalty, max_output_length
from mtkit.decode.translator import Translator
from mtkit.device import default_threads
from mtkit.errors import MtkitError
from mtkit.files import TOKENIZER_FILES, VMAP, read_json
from mtkit.precision import DTYPES, check_precision
from mtkit.sources import CT2Export

# torch is imported only where asked for (/info's parameter count): CTranslate2 searches without it.
logger = logging.getLogger(__name__)

MISSING_EXTRA = "running a CTranslate2 model needs the ctranslate2 package; install it with: pip install 'mtkit[ct2]'."
COMPUTE_TYPES = {**DTYPES, "int8": "int8", "auto": "default"}  # mtkit's precisions by CTranslate2's (= torch's) names
DEFAULT_MAX_POSITIONS = 1024  # ModelConfig's default, for a directory whose record does not say


def import_ctranslate2() -> Any:
    try:
        import ctranslate2
    except ImportError:
        raise MtkitError(MISSING_EXTRA) from None
    return ctranslate2


def check_runtime(device: str, precision: str) -> str:
    """A --device or --precision CTranslate2 cannot run, said before anything is read (and a server starts); else
    the device it runs on ("cpu", "cuda:N")."""
    ctranslate2 = import_ctranslate2()
    kind, index = parse_device(ctranslate2, device)
    compute_type(ctranslate2, precision, kind)
    return kind if kind == "cpu" else f"cuda:{index}"


def parse_device(ctranslate2: Any, name: str) -> tuple[str, int]:
    """(CTranslate2 device, index) for mtkit's --device: auto, cpu, cuda or cuda:N."""
    cuda = ctranslate2.get_cuda_device_count()
    if name == "auto":
        return ("cuda", 0) if cuda else ("cpu", 0)
    kind, _, index = name.partition(":")
    if kind == "cpu" and not index:
        return "cpu", 0
    if kind == "cuda" and (not index or index.isdigit()):
        if int(index or 0) >= cuda:
            raise MtkitError(f"--device {name}: CTranslate2 sees {cuda} CUDA device(s) here; use --device cpu.")
        return "cuda", int(index or 0)
    raise MtkitError(f"--device {name} is not one CTranslate2 runs on; use auto, cpu, cuda or cuda:N.")


def compute_type(ctranslate2: Any, precision: str, device: str) -> str:
    """CTranslate2's compute_type for mtkit's --precision ("auto": the type the model was exported in)."""
    check_precision(precision)
    wanted = COMPUTE_TYPES[precision]
    supported = ctranslate2.get_supported_compute_types(device)
    if wanted != "default" and wanted not in supported:
        names = {v: k for k, v in COMPUTE_TYPES.items()}
        choices = sorted(names[t] for t in supported if t in names)
        raise MtkitError(
            f"CTranslate2 cannot compute in {wanted} on this {device}; use --precision {' or '.join(choices)}."
        )
    return wanted


def target_pieces(path: Path) -> list[str]:
    """The target vocabulary, in CTranslate2's index order (a shared one, or the target's own)."""
    for name in ("shared_vocabulary.json", "target_vocabulary.json"):
        if (path / name).is_file():
            return [str(p) for p in read_json(path / name, list, "export the model again with mtkit export")]
    raise MtkitError(
        f"{path} has no shared_vocabulary.json or target_vocabulary.json; it is not a whole CTranslate2 model."
    )


def vmap_refusal(path: Path, record: dict[str, Any]) -> str | None:
    """Why `path`'s vocabulary map may not be searched with, in one sentence (None: it may). The export record
    names the vmap.txt mtkit export wrote and its vocabulary's sha256: a vmap.txt copied from another export, or
    a record of another vocabulary, would restrict the search to another model's pieces."""
    vmap, made = path / VMAP, record.get("vmap")
    again = "export the model again with mtkit export, or decode with --no-shortlist."
    if not vmap.is_file():
        return f"{path} has no {VMAP}; export a model that carries a shortlist, or --no-shortlist."
    if not isinstance(made, dict):
        return f"{path}'s {VMAP} does not say which vocabulary it was made for (its export record names none); {again}"
    if hashlib.sha256(vmap.read_bytes()).hexdigest() != made.get("sha256"):
        return f"{path}'s {VMAP} is not the one mtkit export wrote there (another model's?); {again}"
    tokenizer = next((path / n for n in reversed(TOKENIZER_FILES) if (path / n).is_file()), None)
    if tokenizer is None or hashlib.sha256(tokenizer.read_bytes()).hexdigest() != made.get("spm_sha256"):
        return f"{path}'s {VMAP} was made for another vocabulary than its tokenizer's; {again}"
    return None


class CT2Engine:
    """A `ctranslate2.Translator` that searches batches of SentencePiece ids as mtkit's own search would."""

    parallel: Literal["processes", "threads"] = "threads"  # CTranslate2 lets go of Python's lock as it searches
    enforces_terms = False  # CTranslate2 has no constrained search

    def __init__(self, export: CT2Export, pieces: list[str], device: str, precision: str, workers: int, threads: int):
        """`pieces`: the tokenizer's, in id order; `workers`: CTranslate2's inter_threads, `threads` its
        intra_threads."""
        ctranslate2 = import_ctranslate2()
        self.ctranslate2 = ctranslate2
        self.path = path = export.path
        self.kind, index = parse_device(ctranslate2, device)
        self.device_index = index
        self.compute_type = compute_type(ctranslate2, precision, self.kind)
        self.record = export.record()
        self.vmap_refusal = vmap_refusal(path, self.record)  # checked once, raised when the shortlist is asked for
        self.pieces = pieces
        target = target_pieces(path)
        if target[: len(self.pieces)] != self.pieces:
            raise MtkitError(
                f"{path}'s tokenizer does not match the model's vocabulary (its pieces differ in order or content); "
                "export the model again with mtkit export."
            )
        self.ids = {piece: i for i, piece in enumerate(target)}
        self.eos = self.pieces[EOS]
        model_config = self.record.get("model_config") or {}
        self.max_source_tokens = int(model_config.get("max_positions", DEFAULT_MAX_POSITIONS)) - 1
        try:
            self.translator = ctranslate2.Translator(
                str(path),
                device=self.kind,
                device_index=index,
                compute_type=self.compute_type,
                inter_threads=workers,
                intra_threads=threads,
            )
        except (RuntimeError, ValueError) as exc:
            raise MtkitError(f"CTranslate2 could not load {path}: {' '.join(str(exc).split())}") from None

    @property
    def device(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.device_index}" if self.device_index else "cuda"

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    # --------------------------------------------------------------------------- searching
    def search(
        self,
        ids: list[list[int]],
        prefixes: list[list[int]],
        config: DecodeConfig,
        sampling: SamplingConfig | None,
        terms: Terms | None = None,
    ) -> Hypotheses:
        """Each sentence's hypotheses (ids without BOS/EOS, score), best first, by mtkit's settings (no `terms`:
        CTranslate2 has no constrained search, and the Translator refuses a glossary before any line)."""
        if terms:
            raise MtkitError("CTranslate2 cannot enforce a glossary; translate with the mtkit model file instead.")
        src = [[self.pieces[i] for i in s] for s in ids]
        # BOS + output fit the positions (the source's max_source_tokens + its EOS)
        limits = [max_output_length(len(s), config, self.max_source_tokens + 1) for s in ids]
        greedy = sampling is not None or config.beam == 1
        options: dict[str, Any] = dict(
            max_decoding_length=max(limits, default=0) + 1,  # + 1: room for EOS after the longest output
            min_decoding_length=0,
            max_input_length=0,
            return_scores=True,
            return_end_token=True,
            length_penalty=0.0 if greedy or config.lenpen != "fairseq" else config.alpha,
        )
        if any(prefixes):
            options["target_prefix"] = [[self.pieces[i] for i in p] or None for p in prefixes]
        if sampling is not None:
            self.ctranslate2.set_random_seed(sampling.seed)
            options.update(
                beam_size=1,
                num_hypotheses=sampling.samples,
                sampling_topk=sampling.topk,
                sampling_topp=sampling.topp,
                sampling_temperature=sampling.temperature,
            )
        else:
            patience = 1.0 if config.early_stop == "patience" else float(options["max_decoding_length"] + 1)
            options.update(beam_size=config.beam, num_hypotheses=config.nbest, patience=patience)
            if config.shortlist:  # the export's vocabulary map (vmap.txt), CTranslate2's shortlist
                if self.vmap_refusal:
                    raise MtkitError(self.vmap_refusal)
                options["use_vmap"] = True
        results = self.translator.translate_batch(src, **options)
        kind = "none" if sampling is not None else config.lenpen
        found: Hypotheses = []
        cut: list[tuple[int, int, list[int]]] = []  # (sentence, hypothesis, ids) to end at the limit and rescore
        for b, result in enumerate(results):
            hyps: list[tuple[list[int], float]] = []
            for j, (tokens, score) in enumerate(zip(result.hypotheses, result.scores)):
                ended = bool(tokens) and tokens[-1] == self.eos
                out = [self.ids.get(t, 1) for t in (tokens[:-1] if ended else tokens)]
                if not ended or len(out) > limits[b]:
                    out = out[: limits[b]]
                    cut.append((b, j, out))
                elif greedy:  # CTranslate2 gave the raw log-probability; mtkit's penalty applies
                    score = score / float(length_penalty(len(out) + 1.0, config.alpha, kind))
                hyps.append((out, score))
            found.append(hyps)
        if cut:
            raw = self.score(ids, [out for _, _, out in cut], rows=[b for b, _, _ in cut])
            for (b, j, out), (logprob, n) in zip(cut, raw):
                found[b][j] = (out, logprob / float(length_penalty(float(n), config.alpha, kind)))
            for hyps in found:
                hyps.sort(key=lambda h: -h[1])
        return found

    def score(
        self, src: list[list[int]], tgt: list[list[int]], rows: Sequence[int] | None = None
    ) -> list[tuple[float, int]]:
        """(log P(target + EOS | source), target length + 1) of each pair; `rows`: the source of each target."""
        rows = range(len(tgt)) if rows is None else rows
        results = self.translator.score_batch(
            [[self.pieces[i] for i in src[r]] for r in rows],
            [[self.pieces[i] for i in t] for t in tgt],
            max_input_length=0,
        )
        return [(float(sum(r.log_probs)), len(r.log_probs)) for r in results]

    @staticmethod
    def check(config: DecodeConfig, sampling: SamplingConfig | None = None) -> None:
        """Refuse, in one sentence, a setting CTranslate2 cannot run as mtkit would (before any work)."""
        if sampling is not None:
            return  # sampling ignores the search settings
        if config.early_stop == "exact":
            raise MtkitError(
                "CTranslate2 has no exact stop rule; use --early-stop patience (its own), or none "
                "(the same outputs as exact, each sentence run to its length limit)."
            )
        if config.lenpen == "gnmt" and config.beam > 1 and config.alpha > 0:
            raise MtkitError(
                "CTranslate2 ranks beam hypotheses by log P / |Y|^alpha only; "
                "use --lenpen fairseq (or none), or --beam 1."
            )

    @staticmethod
    def defaults() -> dict[str, Any]:
        """CTranslate2's own length penalty, |Y|^alpha (`--lenpen fairseq`): mtkit's default GNMT penalty has no
        CTranslate2 counterpart."""
        return {"lenpen": "fairseq"}

    def parameters(self) -> int:
        """The model's parameter count, as the export record says it; an export from before it said so: counted
        from its config (which imports torch, ~200 MiB, that CTranslate2 does not need)."""
        if isinstance(self.record.get("parameters"), int):
            return int(self.record["parameters"])
        if not isinstance(self.record.get("model_config"), dict):
            return 0
        from mtkit.checkpoint import parameter_count

        return parameter_count({"model_config": self.record["model_config"]})

    @property
    def languages(self) -> tuple[str, str] | None:
        """None: an export records no languages."""
        return None

    def describe(self) -> dict[str, Any]:
        """What /info says about the model: the export record's facts and how CTranslate2 runs it."""
        return {
            "path": str(self.path),
            "kind": "ctranslate2",
            "step": self.record.get("step"),
            "architecture": self.record.get("model_config"),
            "parameters": self.parameters(),
            "quantization": self.record.get("quantization"),
            "compute_type": self.translator.compute_type,
        }

    def align(self, vocab: Any, pairs: Sequence[tuple[Sequence[str], Sequence[str]]], target_lang: str = "") -> None:
        """None: CTranslate2 returns no cross-attention from a search here (`Engine.align`); markup then places
        tags by word position."""
        return None

    def close(self) -> None:
        """Nothing to stop: CTranslate2's threads end with its translator."""


def open_export(export: CT2Export, device: str, precision: str, workers: int, threads: int = 0) -> Translator:
    """mtkit's text pipeline over CTranslate2, for `mtkit translate|serve -m DIR` (mtkit/decode/loading.py): the
    export as mtkit/sources/ found it, its tokenizer, record and vocabulary map read there.

    `threads`: CTranslate2's intra_threads; 0 takes PyTorch's count (`mtkit.device.default_threads`), as mtkit's
    own engine would run. torch itself is not imported: CTranslate2 searches, and torch would cost hundreds of MiB."""
    import_ctranslate2()
    export.check()  # its files as `mtkit export` wrote them: a damaged model.bin is refused, not run
    vocab = export.tokenizer()
    pieces = [vocab.piece(i) for i in range(len(vocab))]
    engine = CT2Engine(export, pieces, device, precision, workers, threads or default_threads())
    logger.info("CTranslate2 model %s on %s (%s)", export.path, engine.device, engine.compute_type)
    # CTranslate2 converts the weights to the compute type at load: a quantized export run in another type (as
    # translate's default --precision fp32 does) is not what was exported, and that is worth a line on stderr.
    exported = engine.record.get("quantization") or "float32"
    if engine.compute_type not in ("default", exported):
        logger.warning(
            "%s was exported in %s and runs in %s here; --precision auto runs it as exported",
            export.path,
            exported,
            engine.compute_type,
        )
    return Translator(engine, vocab, workers)
