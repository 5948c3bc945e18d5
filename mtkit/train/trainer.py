"""The training loop of section 5: token-bucketed batches, Adam with warmup, accumulation, DDP, exact resume.

One update = `update_freq` batches on each of the `world_size` ranks. Its loss is the sum
over all of them divided by the update's target tokens, known up front from the batch plan
(so every rank scales its loss before backward without any communication). DDP averages
gradients over ranks, so each rank also multiplies by world_size: the gradient is then
sum(loss) / tokens whatever the split. The only host synchronisation per update is one
all-reduce of (loss, nll, save flag) that also decides, identically on every rank, whether
the loss was finite and whether rank 0's wall clock asks for a checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mtkit import checkpoint
from mtkit.atomic import write_atomic
from mtkit.config import ModelConfig, TrainConfig, config_diff, config_from_dict
from mtkit.data.batching import epoch_order, padding_efficiency, plan_batches, shard_all
from mtkit.data.dataset import DataDir, ParallelSplit, open_data
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.model import Transformer
from mtkit.train import distributed as dist
from mtkit.train.loss import label_smoothed_sums
from mtkit.train.metrics import MetricsLog, Window
from mtkit.train.precision import Precision
from mtkit.train.schedule import inverse_sqrt_lr
from mtkit.train.validation import greedy_bleu, is_better, score_of, validate

logger = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so that a resumed run continues exactly."""

    step: int = 0  # updates applied
    epoch: int = 0  # epoch in progress, from 0
    batch: int = 0  # next batch of this rank's share of the epoch
    best: float = math.inf  # best validation score so far (lower is better)
    bad_valids: int = 0  # validations since the last new best
    nonfinite: int = 0  # non-finite losses in a row
    elapsed: float = 0.0  # wall-clock seconds of the training loop (validation and saving included)


@dataclass(frozen=True)
class TrainResult:
    model: torch.nn.Module
    step: int
    epoch: int
    best: float
    stopped: str  # max_steps, max_epochs, max_minutes or patience


def train(data_dir: str | os.PathLike, run_dir: str | os.PathLike, model_cfg: ModelConfig, train_cfg: TrainConfig,
          device: str = "auto", threads: int = 0) -> TrainResult:
    """Train (or resume, if RUN/checkpoint_last.pt exists) and return the final model; see the module docstring."""
    if threads > 0:
        torch.set_num_threads(threads)
    world = dist.init_world(device)
    try:
        return Trainer(Path(data_dir), Path(run_dir), model_cfg, train_cfg, world).run()
    finally:
        dist.shutdown(world)


def accumulate(model: torch.nn.Module, split: ParallelSplit, group: list[np.ndarray], scale: float,
               precision: Precision, smoothing: float, device: torch.device) -> torch.Tensor:
    """Forward and backward over the batches of one update; returns the summed (loss, nll) on the device.

    Each batch's loss sum is multiplied by `scale` (world_size / update tokens) before backward.
    With DDP, gradients are all-reduced only on the last batch (`no_sync` on the others).
    """
    sums = torch.zeros(2, device=device)
    for i, indices in enumerate(group):
        batch = split.collate(indices)
        src, tgt_in, tgt_out = (torch.from_numpy(a).to(device, non_blocking=True)
                                for a in (batch.src, batch.tgt_in, batch.tgt_out))
        sync = i == len(group) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if sync else model.no_sync():
            with precision.autocast():
                logits = model(src, tgt_in)
            loss, nll = label_smoothed_sums(logits, tgt_out, smoothing)
            precision.backward(loss * scale)
        sums += torch.stack((loss.detach(), nll))
    return sums


def _bleu_sample(data: DataDir, n: int) -> tuple[list[str], list[str]]:
    """The first n raw dev pairs: sacreBLEU scores detokenized text against the real references."""
    paths = [data.path / "raw" / f"valid.{lang}" for lang in (data.src_lang, data.tgt_lang)]
    for path in paths:
        if not path.is_file():
            raise MtkitError(f"--valid-bleu needs the raw dev text {path} that `mtkit prepare` writes.")

    def head(path: Path) -> list[str]:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in itertools.islice(f, n)]

    return head(paths[0]), head(paths[1])


class Trainer:
    """Holds one run's model, optimizer, data plan and progress; `run` is the loop."""

    def __init__(self, data_dir: Path, run_dir: Path, model_cfg: ModelConfig, train_cfg: TrainConfig,
                 world: dist.World):
        self.world, self.run_dir, self.model_cfg = world, run_dir, model_cfg
        self.cfg = cfg = train_cfg.for_world(world.size)
        data = open_data(data_dir)
        self.vocab = data.vocab_bytes()
        self.spm = Vocab.from_bytes(self.vocab)
        _check_vocab(data, self.spm, model_cfg)
        self.train_split, self.valid_split = data.split("train"), data.split("valid")
        self.bleu_sample = _bleu_sample(data, cfg.valid_bleu) if cfg.valid_bleu else None
        for split in (self.train_split, self.valid_split):
            if split.max_id() >= model_cfg.vocab_size:
                raise MtkitError(f"{data.path}/bin/{split.name} holds token id {split.max_id()}, but the vocabulary "
                                 f"has {model_cfg.vocab_size} entries; rebuild the data with `mtkit bpe`.")
        run_dir.mkdir(parents=True, exist_ok=True)
        resume = self._resume_source()
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)  # same initial weights on every rank (DDP broadcasts rank 0's anyway)
        self.model = Transformer(model_cfg).to(world.device)
        self.precision = Precision(cfg.precision, world.device, model_cfg.d_model)
        # fused: one kernel for all parameters instead of a Python loop over them (4x faster on CPU too)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.0, betas=cfg.adam_betas, eps=cfg.adam_eps,
                                          fused=world.device.type in ("cuda", "cpu") or None)
        self.progress = Progress()
        self.plan = plan_batches(self.train_split.src_sizes, self.train_split.tgt_sizes, cfg.max_tokens, cfg.seed,
                                 model_cfg.max_positions)
        valid_plan = plan_batches(self.valid_split.src_sizes, self.valid_split.tgt_sizes, cfg.max_tokens, cfg.seed,
                                  model_cfg.max_positions)
        self.valid_batches = shard_all(valid_plan, world.rank, world.size)
        if len(self.plan) < world.size:
            raise MtkitError(f"the training data makes {len(self.plan)} batch(es) of --max-tokens {cfg.max_tokens}, "
                             f"fewer than the {world.size} processes; lower --max-tokens or use fewer processes.")
        torch.manual_seed(cfg.seed + world.rank)  # each rank its own dropout masks
        self.resumed_from = self._restore(resume) if resume else None
        self.ddp = dist.wrap(self.model, world)
        self.log = MetricsLog(run_dir, world.is_main, cfg.max_steps, self.progress.step)
        if world.is_main:
            checkpoint.remove_stale_temporaries(run_dir)
            config = {"model": dataclasses.asdict(model_cfg), "train": dataclasses.asdict(cfg),
                      "data": str(data.path.resolve()), "world_size": world.size}
            write_atomic(run_dir / "config.json", json.dumps(config, indent=2) + "\n")

    # ---- resume -----------------------------------------------------------------------------------------

    def _resume_source(self) -> dict | None:
        """The checkpoint to continue from, after refusing a run directory made for another model."""
        saved = self.run_dir / "config.json"
        if saved.is_file():
            try:
                old = config_from_dict(ModelConfig, json.loads(saved.read_text(encoding="utf-8"))["model"])
            except (ValueError, KeyError, TypeError) as exc:
                raise MtkitError(f"{saved} is not a valid mtkit run config ({exc}); use another --out.") from None
            diff = config_diff(old, self.model_cfg)
            if diff:
                raise MtkitError(f"{self.run_dir} holds a run with a different model config ({'; '.join(diff)}); "
                                 "use the same options to resume, or another --out.")
        last = self.run_dir / "checkpoint_last.pt"
        return checkpoint.load_training_state(last) if last.is_file() else None

    def _restore(self, ckpt: dict) -> int:
        cfg, world, p = self.cfg, self.world, self.progress
        diff = config_diff(checkpoint.config_of(ckpt), self.model_cfg)
        if diff:
            raise MtkitError(f"checkpoint_last.pt in {self.run_dir} has a different model config "
                             f"({'; '.join(diff)}); use the same options to resume, or another --out.")
        if ckpt.get("vocab") != self.vocab:
            raise MtkitError(f"{self.run_dir} was trained with another SentencePiece model than the data's spm.model; "
                             "use the same data to resume, or another --out.")
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.precision.load_state_dict(ckpt.get("scaler"))
        p.__dict__.update(ckpt["progress"], step=ckpt["step"])
        old_train = config_from_dict(TrainConfig, ckpt["train_config"])
        changed = config_diff(old_train, cfg)
        if changed:
            logger.warning("resuming with changed training settings: %s", "; ".join(changed))
        data = ckpt["data"]
        same_batches = (data["world_size"], data["max_tokens"], data["seed"]) == (world.size, cfg.max_tokens, cfg.seed)
        p.epoch, p.batch = data["epoch"], data["batch"]
        if not same_batches:
            logger.warning("world size, --max-tokens or --seed changed, so the batches differ: "
                           "continuing at the start of epoch %d instead of where the run stopped", p.epoch + 2)
            p.epoch, p.batch = (p.epoch + 1 if p.batch else p.epoch), 0
        rng = ckpt["rng"]
        if len(rng) == world.size:
            checkpoint.set_rng_state(rng[world.rank])
        else:
            torch.manual_seed(cfg.seed + world.rank + 7919 * p.step)
        return p.step

    def _payload(self) -> dict:
        """The full training state (collective: every rank contributes its RNG state)."""
        p, cfg = self.progress, self.cfg
        rngs = dist.all_gather_objects(checkpoint.rng_state(), self.world)
        return checkpoint.model_payload(
            self.model, self.model_cfg, self.vocab, p.step, kind="checkpoint",
            train_config=dataclasses.asdict(cfg), optimizer=self.optimizer.state_dict(),
            scaler=self.precision.state_dict(), rng=rngs,
            data={"epoch": p.epoch, "batch": p.batch, "world_size": self.world.size, "max_tokens": cfg.max_tokens,
                  "seed": cfg.seed},
            progress={k: v for k, v in dataclasses.asdict(p).items() if k != "step"})

    def _save(self, best: bool = False, regular: bool = True) -> None:
        payload = self._payload()
        if not self.world.is_main:
            return
        best_path = self.run_dir / "checkpoint_best.pt"
        if regular:
            path = checkpoint.save_checkpoint(payload, self.run_dir, self.cfg.keep_last)
            if best:
                checkpoint.link_atomically(path, best_path, payload)
            self.log.event("checkpoint", step=self.progress.step, path=path.name, best=best)
        elif best:
            checkpoint.atomic_save(payload, best_path)
            self.log.event("checkpoint", step=self.progress.step, path=best_path.name, best=True)

    # ---- the loop ---------------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        from tqdm.contrib.logging import logging_redirect_tqdm

        with logging_redirect_tqdm() if self.log.bar is not None else contextlib.nullcontext():
            try:
                self._report_start()
                stopped = self._loop()
            finally:
                self.log.close()
        p = self.progress
        return TrainResult(self.model, p.step, p.epoch, p.best, stopped)

    def _epoch(self, epoch: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """This rank's batches, and every rank's summed (src, tgt, padded) tokens at each local batch index."""
        order = epoch_order(self.plan, epoch, self.world.size)  # (per_rank, W)
        plan = self.plan
        batches = [plan.batches[i] for i in order[:, self.world.rank]]
        tgt = plan.tgt_tokens[order].sum(1)
        real_and_padded = np.stack([(plan.src_tokens + plan.tgt_tokens)[order].sum(1),
                                    (plan.src_padded + plan.tgt_padded)[order].sum(1)], axis=1)
        return batches, tgt, real_and_padded

    def _loop(self) -> str:
        cfg, p = self.cfg, self.progress
        done = {"max_steps": p.step >= cfg.max_steps, "max_epochs": bool(cfg.max_epochs and p.epoch >= cfg.max_epochs),
                "max_minutes": bool(cfg.max_minutes and p.elapsed >= 60 * cfg.max_minutes)}
        if any(done.values()):
            logger.info("nothing to do: the run is at step %d, epoch %d, %.1f minutes", p.step, p.epoch, p.elapsed / 60)
            return next(reason for reason, hit in done.items() if hit)
        window = Window()
        last_save, last_valid, saved_step = time.monotonic(), -1, p.step
        stopped = ""
        while not stopped:
            batches, tgt_tokens, counts = self._epoch(p.epoch)
            if p.batch >= len(batches):  # a resumed position past this epoch's end: start the next one
                p.epoch, p.batch = p.epoch + 1, 0
                continue
            while True:
                start = time.monotonic()
                lo, hi = p.batch, min(p.batch + cfg.update_freq, len(batches))
                # Clock-based decisions are rank 0's alone; the update's all-reduce hands them to every rank.
                wants_save = self.world.is_main and cfg.save_every_minutes > 0 and \
                    start - last_save >= 60 * cfg.save_every_minutes
                wants_stop = self.world.is_main and cfg.max_minutes > 0 and p.elapsed >= 60 * cfg.max_minutes
                applied, save_flag, stop_flag, loss, nll = self._update(
                    batches[lo:hi], int(tgt_tokens[lo:hi].sum()), wants_save, wants_stop)
                p.batch = hi
                if p.batch >= len(batches):
                    p.epoch, p.batch = p.epoch + 1, 0
                window.add(loss, nll, int(tgt_tokens[lo:hi].sum()), counts[lo:hi].sum(0), time.monotonic() - start)
                self.log.advance(int(applied))
                if applied and p.step % cfg.log_every == 0:
                    self._report_train(window)
                    window = Window()
                new_best = False
                if applied and p.step % cfg.valid_every == 0:
                    new_best, last_valid = self._validate(), p.step
                if p.step >= cfg.max_steps:
                    stopped = "max_steps"
                elif stop_flag:
                    stopped = "max_minutes"
                elif cfg.max_epochs and p.epoch >= cfg.max_epochs:
                    stopped = "max_epochs"
                elif cfg.patience and p.bad_valids >= cfg.patience:
                    stopped = "patience"
                if stopped and last_valid != p.step:
                    new_best, last_valid = self._validate(), p.step
                regular = save_flag or (applied and cfg.save_every_steps and p.step % cfg.save_every_steps == 0) or \
                    (stopped and saved_step != p.step)
                if regular or new_best:
                    self._save(best=new_best, regular=bool(regular))
                    if regular:
                        last_save, saved_step = time.monotonic(), p.step
                p.elapsed += time.monotonic() - start  # the whole loop's wall-clock: validation and saving too
                if stopped or p.batch == 0:
                    break
        best = {"best_bleu": -p.best} if self.bleu_sample is not None else {"best_nll": p.best}
        self.log.event("done", step=p.step, epochs_done=p.epoch, stopped=stopped, **best,
                       hours=round(p.elapsed / 3600, 4))
        return stopped

    def _update(self, group: list[np.ndarray], tokens: int, wants_save: bool,
                wants_stop: bool) -> tuple[bool, bool, bool, float, float]:
        """One optimizer update over this rank's `group`; `tokens` = target tokens of the update on all ranks."""
        cfg, world, p = self.cfg, self.world, self.progress
        try:
            sums = accumulate(self.ddp, self.train_split, group, world.size / max(tokens, 1), self.precision,
                              cfg.label_smoothing, world.device)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not isinstance(exc, torch.OutOfMemoryError) and "can't allocate memory" not in str(exc):
                raise
            raise MtkitError(f"out of memory on a batch at step {p.step + 1}; lower --max-tokens (now {cfg.max_tokens},"
                             f" e.g. {cfg.max_tokens // 2}) and raise --update-freq to keep the effective batch."
                             ) from None
        flags = torch.tensor([float(wants_save), float(wants_stop)], dtype=torch.float64, device=sums.device)
        loss, nll, save_flag, stop_flag = dist.all_reduce_sum(torch.cat((sums.double(), flags)), world).tolist()
        save_flag, stop_flag = save_flag > 0, stop_flag > 0  # the line above is the update's one host sync
        if not math.isfinite(loss):
            self.optimizer.zero_grad(set_to_none=True)
            p.nonfinite += 1
            self.log.event("nonfinite", level=logging.WARNING, step=p.step + 1, in_a_row=p.nonfinite,
                           action="update skipped")
            if p.nonfinite >= cfg.max_nonfinite:
                raise MtkitError(f"the loss was NaN or infinite for {p.nonfinite} updates in a row at step {p.step}; "
                                 f"lower --lr-scale (now {cfg.lr_scale}), set --clip-norm (e.g. 1.0), raise --warmup, "
                                 "or use --precision fp32; the run resumes from checkpoint_last.pt.")
            return False, save_flag, stop_flag, loss, nll
        p.nonfinite = 0
        lr = inverse_sqrt_lr(p.step + 1, self.model_cfg.d_model, cfg.warmup, cfg.lr_scale)
        for group_ in self.optimizer.param_groups:
            group_["lr"] = lr
        if cfg.clip_norm > 0:
            self.precision.unscale(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        applied = self.precision.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        p.step += int(applied)
        return applied, save_flag, stop_flag, loss, nll

    def _validate(self) -> bool:
        """Validate, update best and patience; True when this is a new best (identical on every rank)."""
        p = self.progress
        metrics = validate(self.model, self.valid_split, self.valid_batches, self.world, self.precision,
                           self.cfg.label_smoothing)
        if self.bleu_sample is not None:  # rank 0 translates; the sum hands its score to every rank
            bleu = greedy_bleu(self.model, self.spm, *self.bleu_sample, self.world.device) if self.world.is_main else 0.0
            metrics["bleu"] = dist.all_reduce_sum(torch.tensor([bleu], dtype=torch.float64, device=self.world.device),
                                                  self.world).item()
        better = is_better(metrics, p.best)
        if better:
            p.best, p.bad_valids = score_of(metrics), 0
        else:
            p.bad_valids += 1
        self.log.event("valid", step=p.step, epoch=p.epoch + 1, **metrics, best=better)
        return better

    # ---- reporting --------------------------------------------------------------------------------------

    def _report_start(self) -> None:
        cfg, world, p = self.cfg, self.world, self.progress
        params = sum(t.numel() for t in self.model.parameters())
        per_update = cfg.update_freq * world.size
        real = (self.plan.src_tokens.mean() + self.plan.tgt_tokens.mean()) / 2 * per_update
        src_eff, tgt_eff, both = padding_efficiency(self.plan)
        self.log.event("start", params=params, device=str(world.device), precision=self.precision.name,
                       precision_why=self.precision.reason, world_size=world.size,
                       effective_batch=f"{cfg.update_freq} x {cfg.max_tokens:,} tokens x {world.size} rank(s) "
                                       f"= up to {cfg.max_tokens * per_update:,} tokens per side, "
                                       f"about {real:,.0f} real",
                       update_freq=cfg.update_freq, max_tokens=cfg.max_tokens, torch_threads=torch.get_num_threads())
        self.log.event("data", sentences=len(self.train_split), batches=len(self.plan),
                       batches_per_rank=len(self.plan) // world.size, skipped=self.plan.skipped,
                       pad_eff_src=round(src_eff, 4), pad_eff_tgt=round(tgt_eff, 4), pad_eff=round(both, 4),
                       valid_sentences=len(self.valid_split))
        if self.resumed_from is not None:
            self.log.event("resume", step=p.step, epoch=p.epoch + 1, batch=p.batch)

    def _report_train(self, w: Window) -> None:
        cfg, p = self.cfg, self.progress
        nll = w.nll / max(w.tgt, 1)
        s_per_update = w.seconds / max(w.updates, 1)
        eta_s = (cfg.max_steps - p.step) * s_per_update
        if cfg.max_minutes:  # a wall-clock budget may end the run long before max_steps
            eta_s = min(eta_s, max(0.0, 60 * cfg.max_minutes - p.elapsed))
        self.log.event("train", quiet_on_tty=True, step=p.step, epoch=p.epoch + 1, loss=w.loss / max(w.tgt, 1),
                       nll=nll, ppl=math.exp(min(nll, 100.0)),
                       lr=inverse_sqrt_lr(p.step, self.model_cfg.d_model, cfg.warmup, cfg.lr_scale),
                       tokens_per_s=w.real / max(w.seconds, 1e-9), pad_eff=w.real / max(w.padded, 1),
                       s_per_update=s_per_update, eta_h=round(eta_s / 3600, 3))


def _check_vocab(data, vocab: Vocab, model_cfg: ModelConfig) -> None:
    if len(vocab) != data.vocab_size:
        raise MtkitError(f"{data.spm_path} has {len(vocab)} pieces but {data.path}/bpe.json says vocab_size "
                         f"{data.vocab_size}; rebuild the data with `mtkit bpe`.")
    if model_cfg.vocab_size != data.vocab_size or model_cfg.target_vocab_size != data.vocab_size:
        raise MtkitError(f"the model's vocab_size {model_cfg.vocab_size} does not match the data's vocabulary of "
                         f"{data.vocab_size} pieces ({data.path}/bpe.json); drop the vocab_size override.")
