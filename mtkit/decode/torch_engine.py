"""mtkit's own engine: beam search, sampling and forced scoring over PyTorch models (one, or an ensemble).

One of the two peers behind the text pipeline (mtkit/decode/engine.py); the other is CTranslate2
(mtkit/decode/ct2.py). It runs every setting of DecodeConfig, so `check` refuses nothing and `defaults` adds none.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch

from mtkit.config import EOS, DecodeConfig, SamplingConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.decode.engine import Hypotheses
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mtkit.decode.beam import SearchResult
    from mtkit.decode.ensemble import Ensemble, StepFactory
    from mtkit.decode.glossary import Terms
    from mtkit.decode.shortlist import Shortlist


class TorchEngine:
    """A model (or an ensemble of models sharing one output vocabulary) on `device`, searched by mtkit.

    The models are used as they are, never changed: on `device`, in eval mode (dropout off), with whatever
    kernels were applied to them (the loader, mtkit/decode/loading.py, applies mtkit.runtime's decisions to
    the models it loads; a training model keeps training's). `about`: what /info says of the file (path,
    kind, step, languages), given by the loader that read it. `shortlist`:
    the lexical shortlist the file carries (mtkit/decode/shortlist.py), searched with `DecodeConfig.shortlist`.
    """

    parallel: Literal["processes", "threads"] = "processes"  # one Python thread a search: forked workers
    enforces_terms = True  # a glossary's terms, by constrained beam search (mtkit/decode/constraints.py)

    def __init__(
        self,
        model: Transformer | Sequence[Transformer],
        device: torch.device | str = "cpu",
        about: dict[str, Any] | None = None,
        shortlist: Shortlist | None = None,
    ):
        models = [model] if isinstance(model, Transformer) else list(model)
        if any(m.training for m in models):
            raise MtkitError("a Translator decodes with dropout off: put its models in eval mode (model.eval()).")
        if len({m.cfg.target_vocab_size for m in models}) > 1:
            raise MtkitError("the models have output layers of different sizes; an ensemble needs one vocabulary.")
        self.torch_device = torch.device(device)
        self.models = models
        self.model = models[0]
        self.about = dict(about or {})
        # How a beam search makes its Step (None: mtkit's ModelStep, or an ensemble's). Handed in by whoever
        # measures another step (a compiled one, say), so that decoding itself never asks.
        self.steps: StepFactory | None = None
        self.shortlist = shortlist  # an ensemble's: the union of its members' (Shortlist.union)

    def compile(self, choice: str, workers: int = 1) -> None:
        """Searches of one sentence run the compiled decoder step where `choice` (off, on, auto) says so
        (mtkit/decode/compiled.py); the reason goes to the log. With several workers (forked processes) the
        step stays eager: auto measured one process, and `plan` refuses on."""
        from mtkit.decode.compiled import choose_steps

        if workers > 1:
            steps, why = None, f"eager: --compile {choice} runs with one worker, and there are {workers}"
        else:
            steps, why = choose_steps(choice, self.models, self.torch_device)
        self.steps = steps
        logger.info("decoder step: %s", why)

    @property
    def device(self) -> str:
        return str(self.torch_device)

    @property
    def vocab_size(self) -> int:
        """The token ids every model embeds, on both sides."""
        return min(min(m.cfg.vocab_size, m.cfg.target_vocab_size) for m in self.models)

    @property
    def max_source_tokens(self) -> int:
        # the EOS appended to the source needs a position too
        return min(m.cfg.max_positions for m in self.models) - 1

    @property
    def decoder(self) -> Transformer | Ensemble:
        """What the searches run: the model, or the ensemble of all the models."""
        from mtkit.decode.ensemble import Ensemble

        return self.model if len(self.models) == 1 else Ensemble(self.models)

    def search(
        self,
        ids: list[list[int]],
        prefixes: list[list[int]],
        config: DecodeConfig,
        sampling: SamplingConfig | None,
        terms: Terms | None = None,
    ) -> Hypotheses:
        """Beam search by `config`, or with `sampling` that many samples of each sentence. `terms`: each
        sentence's target terms as token ids, which its output must contain (a glossary: mtkit/decode/glossary.py)."""
        from mtkit.decode.constraints import with_terms
        from mtkit.decode.sampling import sample

        if sampling is not None:
            if terms:
                raise MtkitError("a glossary is enforced by beam search; it cannot be used with --sampling.")
            src = self.padded(ids)
            from mtkit.decode.prefix import prefix_tensor

            result = sample(self.decoder, src, config, sampling, prefix_tensor(prefixes, self.torch_device))
        elif terms:
            result = with_terms(self.beam, ids, prefixes, terms, config)
        else:
            result = self.beam(ids, prefixes, config)
        return [[(h.tokens, h.score) for h in hypotheses] for hypotheses in result.hypotheses]

    def padded(self, ids: list[list[int]]) -> torch.Tensor:
        from mtkit.decode.scoring import padded

        return padded([[*sentence, EOS] for sentence in ids], self.torch_device)  # (B, S)

    def beam(
        self, ids: list[list[int]], prefixes: list[list[int]], config: DecodeConfig, terms: Terms | None = None
    ) -> SearchResult:
        """The beam search of a batch (shortlisted by `config`: the terms' tokens join its rows), under constraints
        where `terms` are given."""
        from mtkit.decode.beam import beam_search
        from mtkit.decode.constraints import Constraints, pack_terms
        from mtkit.decode.ensemble import make_step
        from mtkit.decode.prefix import prefix_tensor

        src, prefix = self.padded(ids), prefix_tensor(prefixes, self.torch_device)
        steps = self.steps or make_step
        held = None if terms is None else pack_terms(terms.sentences, self.torch_device)
        joining = None if terms is None else torch.tensor(terms.joining, dtype=torch.long, device=self.torch_device)
        if config.shortlist:
            from mtkit.decode.shortlist import Restriction

            if self.shortlist is None:
                raise MtkitError("this model carries no shortlist; add one with `mtkit shortlist`, or --no-shortlist.")
            forced = prefixes  # and the terms' tokens: they join the batch's rows
            if terms is not None:
                forced = [p + [i for term in t for i in term] for p, t in zip(prefixes, terms.sentences)]
            batch = Restriction(self.shortlist.rows(ids, forced, self.torch_device))
            constraints = None if held is None else Constraints(batch.columns(held), batch.columns(joining))
            found = beam_search(self.decoder, src, config, batch.columns(prefix), batch.steps(steps), constraints)
            return batch.tokens(found)
        constraints = None if held is None else Constraints(held, joining)
        return beam_search(self.decoder, src, config, prefix, steps, constraints)

    def score(self, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]:
        from mtkit.decode.scoring import score_batch

        return score_batch(self.decoder, src, tgt)

    def align(
        self, vocab: Tokenizer, pairs: Sequence[tuple[Sequence[str], Sequence[str]]], target_lang: str = ""
    ) -> list[list[int | None]]:
        """Each target word's source word, from the first model's cross-attention (mtkit/decode/alignment.py)."""
        from mtkit.decode.alignment import word_links

        return word_links(self.model, vocab, pairs, target_lang, self.max_source_tokens)

    @staticmethod
    def check(config: DecodeConfig, sampling: SamplingConfig | None = None) -> None:
        """Every setting of DecodeConfig runs here."""

    @staticmethod
    def defaults() -> dict[str, Any]:
        """mtkit's defaults are DecodeConfig's, the paper's: none of its own."""
        return {}

    @property
    def languages(self) -> tuple[str, str] | None:
        found = self.about.get("languages")
        return (str(found[0]), str(found[1])) if found else None

    def describe(self) -> dict[str, Any]:
        return {
            "path": self.about.get("path"),
            "kind": self.about.get("kind"),
            "step": self.about.get("step"),
            "languages": self.about.get("languages"),
            "architecture": dataclasses.asdict(self.model.cfg),
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "shortlist": self.shortlist is not None,
        }

    def close(self) -> None:
        """Nothing to free: the models are plain modules."""
