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
The trainer owns what a checkpoint holds (`state_dict`, `load_state_dict`, restored once it is
built); which checkpoint to resume, and whether it is this run's, is mtkit/train/resume.py; the
data's checks are `open_training_data` (mtkit/train/plan.py); the run's lock mtkit/train/rundir.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtkit import checkpoint
from mtkit.config import ModelConfig, TrainConfig
from mtkit.model import Transformer
from mtkit.sources import defaults
from mtkit.train import compile as compile_step
from mtkit.train import distributed as dist
from mtkit.train import finetune, report, resume, rundir
from mtkit.train.forward import accumulate, out_of_memory_hint
from mtkit.train.metrics import MetricsLog, Window
from mtkit.train.plan import Epoch, TrainingData, bucket_data, epoch_of, open_training_data, plan_data
from mtkit.train.precision import Precision
from mtkit.train.progress import Progress
from mtkit.train.schedule import learning_rate
from mtkit.train.settings import RunSettings, settle
from mtkit.train.signals import StopRequests, agreed_signal
from mtkit.train.stopping import LoopState, TrainResult, UpdateResult, check_nonfinite, out_of_time, stop_reason
from mtkit.train.validation import is_better, score_of, validate

logger = logging.getLogger(__name__)


def train(
    data_dir: str | os.PathLike,
    run_dir: str | os.PathLike,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    device: str = "auto",
    threads: int = 0,
    restart: bool = False,
    init: finetune.Start | None = None,
) -> TrainResult:
    """Train (or resume RUN's checkpoint) and return the final model; see the module docstring.

    The composition root, with its three starts side by side (nanoGPT's scratch, resume, pretrained): RUN's
    checkpoint (resume), `init` (fine-tuning: a new run's first weights, mtkit/train/finetune.py), or the seeded
    initialisation. The run's settings are finished first (every "auto" resolved, with its reason, and the
    starting weights put into the model before its runtime is applied: mtkit/train/settings.py), then the data
    plans and the `Trainer` are built from them. `model_cfg` and `train_cfg` are the user's words as configs
    (mtkit/train/start.py makes them, fine-tuning's rules included). `restart`: move what RUN holds to
    RUN/previous-<time>/ and start afresh.
    """
    if threads > 0:
        torch.set_num_threads(threads)
    world = dist.init_world(device)
    run = Path(run_dir)
    try:
        with rundir.owned(run, world, restart):
            if init is not None:
                finetune.check_new_run(run)  # --init on a run that exists: refused, never silently resumed
            data = open_training_data(Path(data_dir), model_cfg, train_cfg.valid_bleu)
            ckpt = resume.checkpoint_to_resume(run, world, model_cfg, train_cfg, data)
            settings, model = settle(train_cfg, model_cfg, data, world, ckpt, init)
            trainer = Trainer(settings, model, data, run, model_cfg, world)
            if ckpt is not None:
                trainer.load_state_dict(ckpt)
            elif init is not None:  # run.json names the starting model
                trainer.started_from = init.record
            del ckpt  # its optimizer state can be twice the model's size
            return trainer.run()
    finally:
        dist.shutdown(world)


class Trainer:
    """Holds one run's model, optimizer, batch plan and progress; `run` is the loop.

    Built from finished settings (`settings.settle`), which it never rewrites. It owns what a checkpoint
    holds: `state_dict()` writes it, `load_state_dict()` continues from it.
    """

    def __init__(
        self,
        settings: RunSettings,
        model: Transformer,
        data: TrainingData,
        run_dir: Path,
        model_cfg: ModelConfig,
        world: dist.World,
    ):
        self.settings, self.model, self.world, self.run_dir, self.model_cfg = settings, model, world, run_dir, model_cfg
        self.cfg = cfg = settings.cfg
        self.precision = Precision(settings.runtime, world.device)
        # fused: one kernel for all parameters instead of a Python loop over them (faster on a CPU too)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=0.0,
            betas=cfg.adam_betas,
            eps=cfg.adam_eps,
            fused=world.device.type in ("cuda", "cpu") or None,
        )
        self.progress = Progress()
        self.resumed_from: int | None = None  # the step `load_state_dict` continued from
        self.lr = 0.0  # the rate of the last update applied
        # The pairs mixed in one plan, each pair's dev batches (a bilingual directory: one pair; mtkit/train/plan.py).
        self.batch_plan, self.valid_batches = plan_data(data, cfg, world, model_cfg.max_positions)
        self.data = data = bucket_data(data, cfg, model_cfg.max_positions)  # batches padded to bucket shapes
        torch.manual_seed(cfg.seed + world.rank)  # each rank its own dropout masks
        self.wrapped = dist.wrap(self.model, world)  # the model as the loop runs it eagerly (DDP under torchrun)
        # The step the loop calls, and its loss: compiled where settings.compiling says so, compiled now on the
        # longest batch; eager when that failed under auto, or once a compiled step fails (`_forward_backward`).
        args = (self.wrapped, settings.compiling, self.batch_plan, data.train, self.precision, cfg.label_smoothing)
        self.train_step = compile_step.apply(*args)
        self.stop_requests = StopRequests()
        self.provenance: dict = {}  # RUN/run.json, written by rank 0 when training starts (only rank 0 saves)
        self.started_from: dict | None = None  # --init's model, for run.json (mtkit/train/finetune.py)

    # ---- what a checkpoint holds ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The whole training state, in the format of mtkit/checkpoint.py (collective: every rank adds its RNG)."""
        return checkpoint.model_payload(
            self.model,
            self.model_cfg,
            self.data.vocab,
            kind="checkpoint",
            # the step as it runs now: a compiled step that failed went on eagerly (`_forward_backward`)
            train_config=dataclasses.asdict(self.cfg) | {"compile": "on" if self.train_step.choice.on else "off"},
            optimizer=self.optimizer.state_dict(),
            scaler=self.precision.state_dict(),
            runtime=resume.runtime_record(self.settings.runtime, self.world.device),  # reused on resume
            rng=dist.all_gather_objects(checkpoint.rng_state(), self.world),
            **self.progress.state_dict(self.world.size, self.cfg),  # step, data (the position), progress
            corpus=self.data.corpus,
            provenance=self.provenance,
            decode_defaults=defaults.for_data(self.provenance),  # a student's beam 1 (mtkit/sources/defaults.py)
        )

    def load_state_dict(self, ckpt: dict[str, Any]) -> None:
        """Continue exactly where `ckpt` stopped: Adam moments, fp16 scale, position, every RNG stream (its weights
        went into the model when it was built: `settings.settle`). `resume.check_same_run` has checked that it is
        this run's.
        """
        world = self.world  # the weights are in the model already (`settings.settle`)
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.precision.load_state_dict(ckpt.get("scaler"))
        self.progress = Progress.from_state_dict(ckpt, world.size, self.cfg)
        rng = ckpt["rng"]
        if len(rng) == world.size:
            checkpoint.set_rng_state(rng[world.rank])
        else:  # another world size: fresh dropout streams, still different on each rank and after each resume
            torch.manual_seed(self.cfg.seed + world.rank + 7919 * self.progress.step)
        self.resumed_from = self.progress.step

    def _save(self, best: bool = False, regular: bool = True) -> None:
        payload = self.state_dict()
        if self.world.is_main:
            path = checkpoint.save_checkpoint(payload, self.run_dir, self.cfg.keep_last, best=best, numbered=regular)
            self.log.event("checkpoint", step=self.progress.step, path=path.name, best=best)

    # ---- the loop ---------------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        """Say a finished run is finished (and touch nothing), or train until a stop rule or a signal."""
        from tqdm.contrib.logging import logging_redirect_tqdm

        p = self.progress
        finished = stop_reason(p, self.cfg, out_of_time(p, self.cfg))
        if finished and not p.valid_due:
            report.nothing_to_do(self.run_dir, p, finished)
            return TrainResult(self.model, p.step, p.epoch, p.best, finished)
        self._start_files()
        self.log = MetricsLog(
            self.run_dir, self.world.is_main, self.cfg.max_steps, p.step, tensorboard=self.cfg.tensorboard
        )
        with logging_redirect_tqdm() if self.log.bar is not None else contextlib.nullcontext(), self.stop_requests:
            try:
                report.start(self.log, self._setup(), self.progress if self.resumed_from is not None else None)
                stopped = self._loop()
            finally:
                self.log.close()
        return TrainResult(self.model, p.step, p.epoch, p.best, stopped)

    def _setup(self) -> report.Setup:
        settings = self.settings
        return report.Setup(
            params=sum(q.numel() for q in self.model.parameters()),
            world=self.world,
            cfg=self.cfg,
            precision=(settings.runtime.precision, settings.runtime.why),
            fp32_matmul=(settings.runtime.matmul, settings.runtime.matmul_why),
            cpu_heap=settings.cpu_heap,
            batch_plan=self.batch_plan,
            sentences=len(self.data.train),
            valid_sentences=len(self.data.valid),
            decided={**settings.reasons, **self.train_step.fields},
        )

    def _start_files(self) -> None:
        """Rank 0: remove a killed write's temporaries, record the resolved config and the run's provenance."""
        if self.world.is_main:
            checkpoint.remove_stale_temporaries(self.run_dir)
            step, precision = self.progress.step, self.precision.name
            started, runtime = self.started_from, self.settings.runtime
            files = (self.model_cfg, self.cfg, self.data.dir, self.world, precision, step, started, runtime)
            self.provenance = report.write_run_files(self.run_dir, *files)

    def _loop(self) -> str:
        p = self.progress
        state = LoopState(last_save=time.monotonic(), saved_step=p.step)
        stopped = ""
        if p.valid_due:  # a signal kept the validation due at this step from running: it runs first, then a save
            stopped = self._after_update(UpdateResult(False, 0.0, 0.0, 0.0, True, False, ""), state)
        while not stopped:
            epoch = epoch_of(self.batch_plan, p.epoch, self.world)
            if p.batch >= len(epoch.batches):  # a resumed position past this epoch's end: start the next one
                p.epoch, p.batch = p.epoch + 1, 0
                continue
            stopped = self._run_epoch(epoch, state)
        dist.barrier(self.world)  # rank 0's last save is complete before a rank exits (143 makes torchrun stop all)
        report.done(self.log, self.progress, stopped, by_bleu=bool(self.data.bleu_samples))
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
        real_and_padded, seconds = epoch.real_and_padded[lo:hi].sum(0), time.monotonic() - start
        state.window.add(result.loss, result.nll, tokens, real_and_padded, seconds, result.grad_norm)
        self.log.advance(int(result.applied))
        if result.applied and p.step % cfg.log_every == 0:
            report.train_line(self.log, state.window, p, cfg, self.lr)
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
        # Due: the schedule's, one a signal cut before the checkpoint resumed from, the last before any other stop.
        due = (r.applied and p.step % cfg.valid_every == 0) or p.valid_due
        due = due or (bool(stop_reason(p, cfg, r.time_up)) and state.last_valid != p.step)
        new_best = False
        if due and r.stop_signal:  # a signal stops at once (a preemption's grace is short); resuming validates
            p.valid_due = True
        elif due:
            new_best, cut_short = self._validate()
            state.last_valid = p.step
            # A signal during validation stops it between batches; else patience counts this validation.
            should_stop = cut_short or should_stop or stop_reason(p, cfg, r.time_up)
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
        signals = self.stop_requests.flags()
        clock = self.progress.elapsed if world.is_main else 0.0  # rank 0's: a cooldown's rate is the same everywhere
        flags = torch.tensor(
            [float(wants_save), float(wants_stop), *signals, clock], dtype=torch.float64, device=sums.device
        )
        values = torch.cat((sums.double(), norm.double().reshape(1) / world.size, flags))
        # The update's one host sync. DDP made the gradients equal on every rank, so the norms' mean is the norm.
        loss, nll, grad_norm, save, stop, *summed_signals, clock = dist.all_reduce_sum(values, world).tolist()
        stop_signal = agreed_signal(summed_signals)
        applied = self._apply(loss, grad_norm, norm, clock)
        return UpdateResult(applied, loss, nll, grad_norm, save > 0, stop > 0, stop_signal)

    def _forward_backward(self, group: list[np.ndarray], tokens: int) -> torch.Tensor:
        with out_of_memory_hint(self.progress.step + 1, int(self.cfg.max_tokens)):
            try:
                return self._accumulate(group, tokens)
            except Exception as exc:  # a compiled step that fails: auto goes on eagerly, on stops (one sentence)
                if not self.train_step.choice.on or not compile_step.is_compile_failure(exc):
                    raise
                self.optimizer.zero_grad(set_to_none=True)
                self.train_step = compile_step.eager_after(self.train_step, exc, f"at step {self.progress.step + 1}")
            return self._accumulate(group, tokens)  # the same update again, eagerly: nothing is lost

    def _accumulate(self, group: list[np.ndarray], tokens: int) -> torch.Tensor:
        scale = self.world.size / max(tokens, 1)
        precision, smoothing, device = self.precision, self.cfg.label_smoothing, self.world.device
        step, loss_sums = self.train_step.step, self.train_step.loss_sums
        return accumulate(step, self.data.train, group, scale, precision, smoothing, device, loss_sums)

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
        p = self.progress
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
        check_nonfinite(p, self.cfg)

    def _validate(self) -> tuple[bool, str]:
        """Validate, update best and patience: (a new best?, the stop signal that cut it short, or ""), the same
        on every rank. A validation cut short counts for nothing."""
        p, smoothing = self.progress, self.cfg.label_smoothing
        result = validate(
            self.model, self.data, self.valid_batches, self.world, self.precision, smoothing, self.stop_requests
        )
        p.valid_due = bool(result.stopped)  # cut short: it counts for nothing, and the resumed run redoes it
        if result.stopped:
            self.log.event("valid_stopped", level=logging.DEBUG, step=p.step, signal=result.stopped)
            return False, result.stopped
        better = is_better(result.metrics, p.best)
        if better:
            p.best, p.bad_valids = score_of(result.metrics), 0
        else:
            p.bad_valids += 1
        self.log.event("valid", step=p.step, epoch=p.epoch + 1, **result.metrics, best=better)
        return better, ""
