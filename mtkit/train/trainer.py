"""The training loop of section 5: token-bucketed batches, Adam with warmup, accumulation, DDP, exact resume.

One update = `update_freq` batches on each of the `world_size` ranks. Its loss is the sum
over all of them divided by the update's target tokens, known up front from the batch plan
(so every rank scales its loss before backward without any communication). DDP averages
gradients over ranks, so each rank also multiplies by world_size: the gradient is then
sum(loss) / tokens whatever the split. The only host synchronisation per update is one
all-reduce of (loss, nll, gradient norm, flags) that decides, identically on every rank,
whether the update is finite, whether rank 0's clock asks for a checkpoint or a stop, and
whether any rank received SIGTERM or Ctrl-C (mtkit/train/signals.py).

After each update `_after_update` decides once, with named booleans (fairseq's
validate_and_save): `stop_reason` is the one stop rule, used at start and after every update.
Resume lives in mtkit/train/resume.py, the run directory's lock in mtkit/train/rundir.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtkit import checkpoint, provenance
from mtkit.atomic import write_atomic
from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.buckets import bucketed
from mtkit.data.dataset import open_data
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.heap import keep_freed_memory
from mtkit.model import Transformer
from mtkit.train import compile as compile_step
from mtkit.train import distributed as dist
from mtkit.train import report, resume, rundir
from mtkit.train.forward import accumulate
from mtkit.train.metrics import MetricsLog, Window
from mtkit.train.plan import Epoch, check_token_ids, check_vocab, epoch_of, plan_data
from mtkit.train.precision import Precision, choose
from mtkit.train.resume import Progress
from mtkit.train.schedule import learning_rate
from mtkit.train.signals import SIGNAL_STOPS, StopRequests
from mtkit.train.stopping import LoopState, TrainResult, UpdateResult, out_of_time, stop_reason
from mtkit.train.validation import bleu_sample, greedy_bleu, is_better, score_of, validate

logger = logging.getLogger(__name__)


def train(
    data_dir: str | os.PathLike,
    run_dir: str | os.PathLike,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    device: str = "auto",
    threads: int = 0,
    restart: bool = False,
) -> TrainResult:
    """Train (or resume RUN's checkpoint) and return the final model; see the module docstring.

    `restart`: move what RUN holds to RUN/previous-<time>/ and start afresh.
    """
    if threads > 0:
        torch.set_num_threads(threads)
    world = dist.init_world(device)
    try:
        with rundir.owned(Path(run_dir), world, restart):
            return Trainer(Path(data_dir), Path(run_dir), model_cfg, train_cfg, world).run()
    finally:
        dist.shutdown(world)


class Trainer:
    """Holds one run's model, optimizer, data plan and progress; `run` is the loop."""

    def __init__(
        self, data_dir: Path, run_dir: Path, model_cfg: ModelConfig, train_cfg: TrainConfig, world: dist.World
    ):
        self.world, self.run_dir, self.model_cfg = world, run_dir, model_cfg
        self.cfg = cfg = train_cfg.for_world(world.size)
        self.data = data = open_data(data_dir)
        self.corpus = resume.corpus_of(data)
        self.vocab = data.vocab_bytes()
        self.spm = Vocab.from_bytes(self.vocab)
        check_vocab(data, self.spm, model_cfg)
        self.train_split, self.valid_split = data.split("train"), data.split("valid")
        self.bleu_sample = bleu_sample(data, cfg.valid_bleu) if cfg.valid_bleu else None
        check_token_ids(data, (self.train_split, self.valid_split), model_cfg)
        resume.check_run_config(run_dir, model_cfg)
        ckpt = resume.find_checkpoint(run_dir)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)  # same initial weights on every rank (DDP broadcasts rank 0's anyway)
        # CPU training reuses the memory it frees (mtkit/heap.py): before the first large tensor is made.
        self.heap = keep_freed_memory() if world.device.type == "cpu" else ("default", f"{world.device.type} training")
        self.model = Transformer(model_cfg).to(world.device)
        # Measured on rank 0 only and shared: ranks timing at once would skew it, and must not differ.
        choice = dist.decided_by_main(lambda: choose(cfg.precision, world.device, model=model_cfg), world)
        self.precision = Precision(cfg.precision, world.device, model=model_cfg, choice=choice)
        # --compile and the batch shapes it wants (mtkit/train/compile.py); applied once the plan exists.
        self.compiling = compile_step.decide(cfg.compile, world.device)
        self.cfg = cfg = compile_step.resolve_buckets(cfg, self.compiling)
        # fused: one kernel for all parameters instead of a Python loop over them (4x faster on CPU too)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=0.0,
            betas=cfg.adam_betas,
            eps=cfg.adam_eps,
            fused=world.device.type in ("cuda", "cpu") or None,
        )
        self.progress = Progress()
        self.lr = 0.0  # the rate of the last update applied
        self.plan, self.valid_batches = plan_data(
            self.train_split, self.valid_split, cfg, world, model_cfg.max_positions
        )
        if cfg.length_buckets != "none":  # batches padded to their bucket's shape (mtkit/data/buckets.py)
            self.train_split, self.valid_split = bucketed(
                (self.train_split, self.valid_split), cfg.length_buckets, cfg.max_tokens, model_cfg.max_positions
            )
        torch.manual_seed(cfg.seed + world.rank)  # each rank its own dropout masks
        self.resumed_from = resume.restore(ckpt, self) if ckpt else None
        self.ddp = dist.wrap(self.model, world)
        compile_step.apply(self)  # compiles self.ddp and the loss (self.loss_sums) where self.compiling says so
        self.stop_requests = StopRequests()
        self.provenance: dict = {}  # RUN/run.json, written by rank 0 when training starts (only rank 0 saves)

    def _save(self, best: bool = False, regular: bool = True) -> None:
        payload = resume.payload(self)
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
        """Say a finished run is finished (and touch nothing), or train until a stop rule or a signal."""
        from tqdm.contrib.logging import logging_redirect_tqdm

        p = self.progress
        finished = stop_reason(p, self.cfg, out_of_time(p, self.cfg))
        if finished:
            logger.info(
                "nothing to do: the run in %s finished at step %d, epoch %d, %.1f minutes (%s); raise that "
                "limit to train on",
                self.run_dir,
                p.step,
                p.epoch,
                p.elapsed / 60,
                finished,
            )
            return TrainResult(self.model, p.step, p.epoch, p.best, finished)
        self._start_files()
        self.log = MetricsLog(
            self.run_dir, self.world.is_main, self.cfg.max_steps, p.step, tensorboard=self.cfg.tensorboard
        )
        with logging_redirect_tqdm() if self.log.bar is not None else contextlib.nullcontext(), self.stop_requests:
            try:
                report.start(self)
                stopped = self._loop()
            finally:
                self.log.close()
        return TrainResult(self.model, p.step, p.epoch, p.best, stopped)

    def _start_files(self) -> None:
        """Rank 0: remove a killed write's temporaries, record the resolved config."""
        if not self.world.is_main:
            return
        checkpoint.remove_stale_temporaries(self.run_dir)
        config = {
            "model": dataclasses.asdict(self.model_cfg),
            "train": dataclasses.asdict(self.cfg),
            "data": str(self.data.path.resolve()),
            "world_size": self.world.size,
        }
        write_atomic(self.run_dir / "config.json", json.dumps(config, indent=2) + "\n")
        self.provenance = provenance.start_run(
            self.run_dir,
            self.data.path,
            self.data.src_lang,
            self.data.tgt_lang,
            device=self.world.device,
            threads=torch.get_num_threads(),
            precision=self.precision.name,
            world_size=self.world.size,
            start_step=self.progress.step,
        )

    def _loop(self) -> str:
        p = self.progress
        state = LoopState(last_save=time.monotonic(), saved_step=p.step)
        stopped = ""
        while not stopped:
            epoch = epoch_of(self.plan, p.epoch, self.world)
            if p.batch >= len(epoch.batches):  # a resumed position past this epoch's end: start the next one
                p.epoch, p.batch = p.epoch + 1, 0
                continue
            stopped = self._run_epoch(epoch, state)
        report.done(self, stopped)
        return stopped

    def _run_epoch(self, epoch: Epoch, state: LoopState) -> str:
        """Updates until the epoch ends ("") or a stop rule fires (its reason)."""
        number = self.progress.epoch
        while self.progress.epoch == number:
            stopped = self._step(epoch, state)
            if stopped:
                return stopped
        return ""

    def _step(self, epoch: Epoch, state: LoopState) -> str:
        """1. one update  2. its log line  3. validate, save, stop: returns the stop reason or ""."""
        cfg, p = self.cfg, self.progress
        start = time.monotonic()
        lo, hi = p.batch, min(p.batch + cfg.update_freq, len(epoch.batches))
        tokens = int(epoch.tgt_tokens[lo:hi].sum())
        result = self._update(epoch.batches[lo:hi], tokens, *self._clock(start, state))
        p.epoch, p.batch = (p.epoch + 1, 0) if hi >= len(epoch.batches) else (p.epoch, hi)
        state.window.add(
            result.loss,
            result.nll,
            tokens,
            epoch.real_and_padded[lo:hi].sum(0),
            time.monotonic() - start,
            result.grad_norm,
        )
        self.log.advance(int(result.applied))
        if result.applied and p.step % cfg.log_every == 0:
            report.train_line(self, state.window)
            state.window = Window()
        stopped = self._after_update(result, state)
        p.elapsed += time.monotonic() - start  # the whole loop's wall-clock: validation and saving too
        return stopped

    def _clock(self, now: float, state: LoopState) -> tuple[bool, bool]:
        """Rank 0's clock decisions (save now? out of time?); the update's all-reduce hands them to every rank."""
        cfg, main = self.cfg, self.world.is_main
        wants_save = main and cfg.save_every_minutes > 0 and now - state.last_save >= 60 * cfg.save_every_minutes
        return wants_save, main and out_of_time(self.progress, cfg)

    def _after_update(self, r: UpdateResult, state: LoopState) -> str:
        """Validate, stop and save, decided once with named booleans (fairseq's validate_and_save)."""
        cfg, p = self.cfg, self.progress
        should_stop = stop_reason(p, cfg, r.time_up, r.stop_signal)
        # A signal stops at once (a preemption's grace is short); any other stop validates one last time.
        do_validate = not r.stop_signal and (
            (r.applied and p.step % cfg.valid_every == 0) or (bool(should_stop) and state.last_valid != p.step)
        )
        new_best = False
        if do_validate:
            new_best, state.last_valid = self._validate(), p.step
            should_stop = should_stop or stop_reason(p, cfg, r.time_up)  # patience counts this validation
        do_save = (
            r.save_asked
            or bool(r.applied and cfg.save_every_steps and p.step % cfg.save_every_steps == 0)
            or bool(should_stop and state.saved_step != p.step)
        )
        if do_save or new_best:
            self._save(best=new_best, regular=do_save)
            if do_save:
                state.last_save, state.saved_step = time.monotonic(), p.step
        return should_stop

    def _update(self, group: list[np.ndarray], tokens: int, wants_save: bool, wants_stop: bool) -> UpdateResult:
        """One optimizer update over this rank's `group`; `tokens` = target tokens of the update on all ranks."""
        world = self.world
        sums = self._forward_backward(group, tokens)
        norm = self._grad_norm()
        signals = [float(self.stop_requests.received == name) for name in SIGNAL_STOPS]
        clock = self.progress.elapsed if world.is_main else 0.0  # rank 0's: a cooldown's rate is the same everywhere
        flags = torch.tensor(
            [float(wants_save), float(wants_stop), *signals, clock], dtype=torch.float64, device=sums.device
        )
        values = torch.cat((sums.double(), norm.double().reshape(1) / world.size, flags))
        # The update's one host sync. DDP made the gradients equal on every rank, so the norms' mean is the norm.
        loss, nll, grad_norm, save, stop, sigterm, sigint, clock = dist.all_reduce_sum(values, world).tolist()
        stop_signal = "SIGINT" if sigint > 0 else "SIGTERM" if sigterm > 0 else ""
        applied = self._apply(loss, grad_norm, norm, clock)
        return UpdateResult(applied, loss, nll, grad_norm, save > 0, stop > 0, stop_signal)

    def _forward_backward(self, group: list[np.ndarray], tokens: int) -> torch.Tensor:
        cfg, world, p = self.cfg, self.world, self.progress
        try:
            return accumulate(
                self.ddp,
                self.train_split,
                group,
                world.size / max(tokens, 1),
                self.precision,
                cfg.label_smoothing,
                world.device,
                self.loss_sums,
            )
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not isinstance(exc, torch.OutOfMemoryError) and "can't allocate memory" not in str(exc):
                raise
            raise MtkitError(
                f"out of memory on a batch at step {p.step + 1}; lower --max-tokens (now {cfg.max_tokens},"
                f" e.g. {cfg.max_tokens // 2}) and raise --update-freq to keep the effective batch."
            ) from None

    def _grad_norm(self) -> torch.Tensor:
        """The whole gradient's L2 norm in true units (fp16: unscaled first), left on the device."""
        self.precision.unscale(self.optimizer)
        grads = [q.grad for q in self.model.parameters() if q.grad is not None]
        return torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=self.world.device)

    def _apply(self, loss: float, grad_norm: float, norm: torch.Tensor, clock: float) -> bool:
        """Clip and step at the rate for rank 0's `clock` (seconds of training); a non-finite loss or gradient
        norm skips the update instead (as fairseq does)."""
        cfg, p = self.cfg, self.progress
        # fp16's scaler handles overflowing gradients itself: it lowers the scale and skips the step.
        if not math.isfinite(loss) or (not math.isfinite(grad_norm) and self.precision.scaler is None):
            self._skip(loss, grad_norm)
            return False
        p.nonfinite = 0
        lr = self.lr = learning_rate(
            p.step + 1,
            clock,
            d_model=self.model_cfg.d_model,
            warmup=cfg.warmup,
            scale=cfg.lr_scale,
            max_steps=cfg.max_steps,
            max_minutes=cfg.max_minutes,
            cooldown=cfg.lr_cooldown,
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if cfg.clip_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(self.model.parameters(), cfg.clip_norm, norm)
        applied = self.precision.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        p.step += int(applied)
        return applied

    def _skip(self, loss: float, grad_norm: float) -> None:
        cfg, p = self.cfg, self.progress
        self.precision.skip()
        self.optimizer.zero_grad(set_to_none=True)
        p.nonfinite += 1
        self.log.event(
            "nonfinite",
            level=logging.WARNING,
            step=p.step + 1,
            in_a_row=p.nonfinite,
            action="update skipped",
            loss=loss,
            grad_norm=grad_norm,
        )
        if p.nonfinite >= cfg.max_nonfinite:
            raise MtkitError(
                f"the loss or gradient norm was NaN or infinite for {p.nonfinite} updates in a row at "
                f"step {p.step}; lower --lr-scale (now {cfg.lr_scale}), set --clip-norm (e.g. 1.0), "
                "raise --warmup, or use --precision fp32; the run resumes from checkpoint_last.pt."
            )

    def _validate(self) -> bool:
        """Validate, update best and patience; True when this is a new best (identical on every rank)."""
        p = self.progress
        metrics: dict[str, Any] = validate(
            self.model, self.valid_split, self.valid_batches, self.world, self.precision, self.cfg.label_smoothing
        )
        world = self.world
        if self.bleu_sample is not None:  # rank 0 translates; the sum hands its score to every rank
            bleu = greedy_bleu(self.model, self.spm, *self.bleu_sample, world.device) if world.is_main else 0.0
            metrics["bleu"] = dist.all_reduce_sum(
                torch.tensor([bleu], dtype=torch.float64, device=world.device), world
            ).item()
        better = is_better(metrics, p.best)
        if better:
            p.best, p.bad_valids = score_of(metrics), 0
        else:
            p.bad_valids += 1
        self.log.event("valid", step=p.step, epoch=p.epoch + 1, **metrics, best=better)
        return better
