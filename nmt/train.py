"""`nmt train`: a Trainer whose `train` loop reads top to bottom; setup, validation and checkpoints are methods.
What each update reads is `nmt.data.feed`, what a validation scores `nmt.validation`, where training stands
`nmt.progress`.

    trainer = Trainer(cfg, run, data_dir)   # setup: data, model, optimizer, resume
    progress = trainer.train()             # batch → forward under autocast → backward → clip → step → log
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from nmt import PROCESS_STARTED, __version__
from nmt.background_validation import BackgroundValidation, Validated
from nmt.checkpoint import BackgroundWriter, capture_rng_state, snapshot
from nmt.compile_model import compile_for_training, compiler_failures_explained
from nmt.config import Config, to_dict
from nmt.cpu_memory import heap_trimmer_for, limit_onednn_cache
from nmt.data.batching import Batch
from nmt.data.dataset import ParallelArrays, load_arrays, load_drawn_training_arrays
from nmt.data.feed import TrainingFeed, eager_layout, oversized_pairs_warning
from nmt.data.prefetch import Prefetcher
from nmt.data.prepare import ensure_prepared, run_data_for_resume
from nmt.data.sources import resolve_normalizer
from nmt.data.tokenizer import Tokenizers, same_vocabulary
from nmt.device import (autocast, autocast_dtype, context_in_background, pick_device, set_training_threads,
                        training_attention_kernels)
from nmt.distributed import setup_distributed, teardown_distributed, torchrun_layout
from nmt.errors import NMTError
from nmt.finetune import check_parent_shape, load_parent_weights, starting_from, with_borrowed_tokenizer
from nmt.graphed_update import WARMUP_UPDATES, GraphedUpdate
from nmt.memory import check_training_fits, count_parameters
from nmt.models import build_model
from nmt.models.base import set_loss_block_rows
from nmt.models.builder import checkpoint_model_args
from nmt.models.rnn_encoder import capture_recurrences
from nmt.optim import TrainingClock, make_optimizer, make_scheduler, scheduler_steps_per_update
from nmt.progress import Progress, finished_reason, improves, steps_within_budget
from nmt.resume import TrainingParts, restore_training
from nmt.run_dir import CheckpointKind, Run, TrainingState, Weights
from nmt.run_logs import TrainingLog
from nmt.stop_request import StopRequest
from nmt.tensorboard_log import (MIRRORED_TYPES, WALL_TIME_KEY, TensorBoardLog,
                                 check_available as check_tensorboard_available)
from nmt.throughput import StepTimer, ThroughputWindow, TrainingPeak, UpdateFlops
from nmt.training_report import (StartupParts, progress_line, terminal_columns, train_record, training_summary,
                                 valid_record)
from nmt.translator import Translator
from nmt.validation import dev_scores, load_dev_set, validation_decode
from nmt.weight_average import WeightAverage


@dataclass
class StepResult:
    loss_sum: torch.Tensor  # summed token cross-entropy of this rank's micro-batches (0 if skipped), on the device
    src_tokens: int
    tgt_tokens: int
    sentences: int
    padded_tokens: int  # positions computed (source and target), padding included
    applied: torch.Tensor  # the update was applied (not skipped as non-finite), on the device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, cfg: Config, run: Run, data_dir: Path, url: str | None = None,
                 log: Callable[[str], None] = print):
        self.cfg, self.run, self.log = cfg, run, log
        self.startup = StartupParts()  # imports end here
        self.resuming = run.checkpoint_path(CheckpointKind.LAST).is_file()  # as when this training was asked for
        self.ctx = setup_distributed(cfg.train.device)
        self.device = self._pick_device()
        self.prepared = self._prepare_data(data_dir, url)
        seed_everything(cfg.train.seed + self.ctx.rank)
        self.tokenizers = Tokenizers.from_dir(self.prepared)
        self.startup.mark("device_and_data")
        context = context_in_background(self.device)  # a GPU's; made while the parameter count runs
        if self.resuming:
            self._check_same_vocabulary()
        vocab = self.vocab = (self.tokenizers.source.get_piece_size(), self.tokenizers.target.get_piece_size(),
                              self.tokenizers.joint)
        self.model_args = checkpoint_model_args(cfg.model, *vocab)
        self.model = self._build_model(context)
        self.init_record = None  # fine-tuning: where the first weights came from (env.json)
        self.tensorboard: TensorBoardLog | None = None  # train.tensorboard, rank 0's, opened in setup
        if cfg.train.init_from and not self.resuming:
            self.init_record = load_parent_weights(self.model, cfg)
            if self.ctx.is_main:
                self.log(starting_from(self.init_record))
        # train.ema_decay: the average of the weights, which rank 0 validates and saves (the ranks train alike).
        self.average = WeightAverage(self.model, cfg.train.ema_decay) \
            if cfg.train.ema_decay and self.ctx.is_main else None
        self.optimizer = make_optimizer(self.model, cfg.train)
        self.clock = TrainingClock()  # what a time-budgeted schedule reads; agreed by every rank
        self.scheduler = make_scheduler(self.optimizer, cfg.train, self.clock)
        self.dtype = autocast_dtype(cfg.train.precision, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.dtype == torch.float16)
        self.train_data: ParallelArrays = load_arrays(self.prepared, "train", vocab[:2])
        self.progress = Progress(best_metric=cfg.train.best_metric)
        self.timer = StepTimer(self.device)
        self.graphed_update: GraphedUpdate | None = None  # train.cuda_graph on a GPU (made in setup)
        self.background: BackgroundValidation | None = None  # train.eval_in_background, on rank 0 (made in setup)
        self.captures_updates = self._captures_updates()  # may switch self.cfg to the eager batch layout
        self.writer = BackgroundWriter()  # checkpoints are written while training goes on
        self.first_nonfinite = torch.zeros((), dtype=torch.long, device=self.device)  # step; 0: none this session
        # On a CPU, memory held for earlier batch shapes goes back to the OS (nmt.cpu_memory).
        self.trim_heap = heap_trimmer_for(self.device)
        # With data.subword_alpha, epoch e reads the training pairs in their drawn segmentation e mod the draws.
        epoch_data = load_drawn_training_arrays(self.prepared, vocab[:2]) or [self.train_data]
        self.feed = TrainingFeed(epoch_data, self.cfg.train, self.ctx.rank, self.ctx.world_size,
                                 static_layout=self.cfg.train.compile or self.captures_updates,
                                 takes_source_lengths=self.model.takes_source_lengths,
                                 pin_memory=self.device.type == "cuda")
        if self.ctx.is_main and (oversized := oversized_pairs_warning(epoch_data[0], self.cfg.train)):
            self.log(f"warning: {oversized}")
        self.startup.mark("optimizer_and_arrays")

    def _pick_device(self) -> torch.device:
        """This rank's device, with its threads set (and on a CPU oneDNN's cache bounded) before the first matmul."""
        train = self.cfg.train
        device = pick_device(train.device, self.ctx.local_rank)
        if train.packed_attention == "flex" and device.type != "cuda":  # `device: auto` resolved, too
            raise NMTError(f"train.packed_attention flex trains on a GPU only (FlexAttention has no backward on a "
                           f"CPU); this run's device is {device.type}")
        if device.type == "cpu":
            limit_onednn_cache(train.onednn_cache)  # nmt.cpu_memory
        said = set_training_threads(train.threads, device)
        if said and self.ctx.is_main:
            self.log(said)
        return device

    def _build_model(self, context) -> nn.Module:
        """The model on the device, once it is known to fit. Four start-up parts of their own, so that a GPU's start
        says which seconds to shorten (the H200's lease: 4.7-7.0 s for the four together): the parameter count on the
        meta device (torch imports its compiler there, ~1 s on a 2-core CPU, at the first function that turns it off;
        the optimizer's first parameter group would otherwise), what is left of the wait for the GPU's `context`, the
        weights' initialization on the host, and their copy to the device."""
        cfg, vocab = self.cfg, self.vocab
        parameters = self.parameter_count = count_parameters(lambda: build_model(cfg.model, *vocab))
        self.startup.mark("parameter_count")
        if context is not None:
            context.join()
        check_training_fits(parameters, cfg.model, cfg.train, vocab[1], self.device)
        self.startup.mark("device_context")
        model = build_model(cfg.model, *vocab)
        self.startup.mark("model_init")
        model = model.to(self.device)
        set_loss_block_rows(model, cfg.train.loss_block_rows)
        if cfg.train.packed_attention == "flex":  # the config refused it off packed rows and with attention dropout
            model.packed_attention = "flex"
        self.startup.mark("model_to_device")
        return model

    def _captures_updates(self) -> bool:
        """Whether train.cuda_graph captures updates: on one GPU outside torchrun (its collectives are not
        captured). Elsewhere updates run eagerly, and uncompiled on token buckets: `self.cfg` then holds the eager
        batch layout, the settings in force that config.yaml and the checkpoints keep."""
        cfg = self.cfg
        captures = cfg.train.cuda_graph and self.device.type == "cuda" and not self.ctx.enabled
        if cfg.train.cuda_graph and not captures:
            where = "under torchrun (its collectives are not captured)" if self.ctx.enabled else "on the CPU"
            how = "eagerly"
            if not cfg.train.compile:  # a compiled update still wants its static shapes
                self.cfg = eager_layout(cfg)
                how += ", on token buckets (the static batch layout was for the captured update)"
            if self.ctx.is_main:
                self.log(f"train.cuda_graph: no CUDA graph {where}: updates run {how}")
        return captures

    def _prepare_data(self, data_dir: Path, url: str | None) -> Path:
        if self.ctx.is_main:  # rank 0 downloads and prepares; the others wait, then find the result
            prepared = self._find_or_prepare(data_dir, url)
        self.ctx.barrier()
        if not self.ctx.is_main:
            prepared = self._find_or_prepare(data_dir, url)
        return prepared

    def _find_or_prepare(self, data_dir: Path, url: str | None) -> Path:
        trained_on = self.run.prepared_data() if self.resuming else None
        own = run_data_for_resume(self.cfg.data, data_dir, trained_on) if trained_on else None
        if own is None:
            return ensure_prepared(self.cfg.data, data_dir, url, self.log)
        if self.ctx.is_main and own.resolve().parent != (Path(data_dir) / "prepared").resolve():
            self.log(f"no prepared data for these settings under {data_dir}: resuming on {own}, where the run was "
                     "trained (the same text and settings)")
        return own

    def _check_same_vocabulary(self) -> None:
        """A run resumes only on data of its own vocabulary. Data settings are checked before any work, but another
        corpus under the same settings gets a SentencePiece model of its own: resumed on it, the weights met other
        piece ids, and the run's spm.model was replaced, spoiling its earlier checkpoints too."""
        own = [self.run.directory / name for name in Tokenizers.files(self.tokenizers.joint)]
        if not all(path.is_file() for path in own):  # a run of a release that kept no copy: nothing to compare
            return
        if not same_vocabulary(self.run.tokenizers(), self.tokenizers):
            raise NMTError(f"{self.run.directory} was trained with another vocabulary than the data prepared for "
                           f"this config ({self.prepared}): another corpus? Resuming would feed its weights other "
                           "piece ids; use another --run-dir, or start a new run from it with --set "
                           f"train.init_from={self.run.directory}")

    # --- setup on the locked run directory ------------------------------------------------------------------------
    def setup(self) -> None:
        """Resume if the run has a last checkpoint, (re)write the run directory, wrap the model for training."""
        if self.ctx.is_main:
            self.run.clean_stale_temp_files()
        if self.run.checkpoint_path(CheckpointKind.LAST).is_file():
            self._resume()
        if self.ctx.is_main:
            self._write_run_directory()
        self.startup.mark("resume_and_run_directory")
        self._wrap_for_training()
        self.startup.mark("compile_and_graphs")  # wrapped only: compiling and capturing come with the first updates
        self.dev_set = load_dev_set(self.prepared, self.vocab[:2], self.cfg.train, self.device.type == "cpu",
                                    self.log)
        self.translator = self._validation_translator()
        self.peak = TrainingPeak.of(self.device, self.cfg.train.peak_tflops, self.dtype)
        self.update_flops = UpdateFlops(self.model)
        if self.ctx.is_main:
            # 3 figures: an emulated bf16 peak is ~0.001
            self._say_what_trains(f"MFU relative to {self.peak.tflops:.3g} TFLOP/s ({self.peak.source})")
        self.startup.mark("validation_and_flops")

    def _write_run_directory(self) -> None:
        """Rank 0's: config.yaml and env.json (on resume too: config.yaml then shows the settings in force, e.g. a
        raised max_steps), the metrics log trimmed to the resumed step, TensorBoard's event files."""
        run = self.run
        run.initialize(self.cfg, self.prepared, self.device, self.ctx.world_size, self.init_record)
        dropped = run.metrics.trim_after(self.progress.step)
        if dropped:
            self.log(f"dropped {dropped} metrics records written after the step-{self.progress.step} checkpoint")
        if self.cfg.train.tensorboard:  # rewritten from the trimmed log: what metrics.jsonl holds, once
            earlier = run.metrics.records() if run.metrics.path.is_file() else []
            self.tensorboard = TensorBoardLog(run.tensorboard_path, earlier)
            self.log(f"TensorBoard scalars in {run.tensorboard_path} (tensorboard --logdir {run.directory.parent})")

    def _wrap_for_training(self) -> None:
        """The model as updates call it: under DistributedDataParallel with several ranks, compiled under
        train.compile, and under train.cuda_graph one captured update per batch shape."""
        cfg = self.cfg.train
        self.train_model = self.model
        self.cuda_graphs = False
        self.gradients_in_place = False  # see keep_gradients_in_place
        self.compile_guard = contextlib.nullcontext  # compiled: torch's compiler failures as one actionable line
        if self.ctx.enabled:
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if cfg.compile:
            widths = self.feed.width_count() if self.feed.static_shapes else None
            compiled = compile_for_training(self.model, self.train_model, cfg, self.device, widths,
                                            self.log if self.ctx.is_main else None)
            self.train_model, self.cuda_graphs = compiled.model, compiled.cuda_graphs
            self.compile_guard = compiler_failures_explained
        if self.cuda_graphs and cfg.accum_steps > 1:
            self.keep_gradients_in_place()
        if self.captures_updates:
            self.keep_gradients_in_place()  # every graph adds into the same buffers
            capture_recurrences(self.model)
            self.graphed_update = GraphedUpdate(self.device_update, self.optimizer, self.device)
            # An update's shape is its micro-batches' widths together: up to widths ** accum_steps graphs.
            shapes = self.feed.width_count() ** cfg.accum_steps if self.feed.static_shapes else 1
            self.log(f"train.cuda_graph: the first {WARMUP_UPDATES} updates and each batch shape's first run "
                     f"eagerly, then that shape's update is one replayed CUDA graph ("
                     f"{f'up to {shapes} shapes' if shapes > 1 else '1 shape'})")

    def _validation_translator(self) -> Translator:
        """What validation decodes with: the model itself (its average under train.ema_decay), or under
        train.eval_in_background a copy that a thread validates while training goes on."""
        validated = kept = self.kept_model
        if self.cfg.train.eval_in_background and self.ctx.is_main:
            if self.device.type == "cpu" and self.dtype == torch.bfloat16:
                # Training switches SDPA's kernels at every update there (training_attention_kernels), a process-wide
                # setting that a validation thread would see half the time. Elsewhere it switches nothing.
                self.log("train.eval_in_background: not on a CPU under bf16 autocast (training switches attention "
                         "kernels process-wide at every update); validating inline")
            else:
                # Its weights are the training model's, copied before each validation: built drawing no random
                # numbers (a draw here, after a resume restored the generators, would shift the resumed run's
                # dropout masks from the uninterrupted run's) and on the device at once (not initialized on the
                # host first: ~1 s of start-up for transformer.yaml's 48M parameters).
                cuda = [self.device] if self.device.type == "cuda" else []
                with torch.random.fork_rng(devices=cuda), self.device:
                    validated = build_model(self.cfg.model, *self.vocab).eval()
                self.background = BackgroundValidation(kept, validated, self.validate, self.device)
                self.log("train.eval_in_background: each validation scores a copy of the weights while training "
                         "goes on; its outcome counts at the next validation or checkpoint")
        return Translator(validated, self.tokenizers, resolve_normalizer(self.cfg.data),  # its languages too
                          validation_decode(self.cfg, self.device), self.device, self.dtype, config=self.cfg)

    def _say_what_trains(self, peak_line: str) -> None:
        self.log(training_summary(self.cfg, self.parameter_count, self.tokenizers, len(self.train_data),
                                  self.device, self.dtype, self.ctx.world_size))
        draws = len(self.feed.epoch_data)
        if draws > 1:
            self.log(f"subword regularization: the training pairs in {draws} drawn segmentations "
                     f"(data.subword_alpha {self.cfg.data.subword_alpha:g}), epoch e on draw e mod {draws}")
        self.log(peak_line)
        if self.average is not None:
            self.log(f"train.ema_decay {self.average.decay:g}: validation, best.pt and the checkpoints hold an "
                     f"exponential moving average of the weights (last.pt the trained ones too)")

    def keep_gradients_in_place(self) -> None:
        """Gradients in buffers of their own, zeroed in place at each update instead of dropped. Under CUDA
        graphs a backward's gradients are outputs in the graphs' memory pool, and autograd makes a fresh gradient
        the parameter's `.grad` without a copy; the next micro-batch's replay then overwrites it before it is added
        to (pytorch#169545: an error, or on some versions silently only the last micro-batch's gradient). With a
        `.grad` already there, autograd adds into it instead; train.cuda_graph's graphs, one per batch shape, then
        share these buffers too."""
        self.gradients_in_place = True
        for parameter in self.model.parameters():
            if parameter.requires_grad and parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)

    def _resume(self) -> None:
        say = self.log if self.ctx.is_main else lambda _: None  # every rank resumes; rank 0 speaks for them
        path = self.run.checkpoint_path(CheckpointKind.LAST)
        state = self.run.load_training(path)
        for warning in self.run.check_resumable(state.config, self.cfg):
            say(f"warning: {warning}")
        parts = TrainingParts(self.model, self.average, self.optimizer, self.scheduler, self.scaler, self.device)
        self.progress = restore_training(state, path, self.run.directory, parts, self.cfg, self.ctx.rank,
                                         self.ctx.world_size, self.ctx.is_main, say)

    # --- the loop ---------------------------------------------------------------------------------------------------
    def train(self) -> Progress:
        cfg, p, ctx = self.cfg.train, self.progress, self.ctx
        p.finished = p.finished and p.evals_without_gain >= cfg.patience  # a raised train.patience trains on
        out_of_time = self._agreed_flags(stop_requested=False, agree_now=True)[1]
        reason = finished_reason(p, cfg, out_of_time)
        if reason:
            self.log(f"{self.run.directory} already finished at step {p.step}: {reason}; raise it to train on")
            return p
        self.planned_steps = self.feed.planned_steps()
        # A bar redraws itself with carriage returns: in a log file (nohup, a scheduler's output file) that was ten
        # frames a second on one endless line. There, as fairseq's `simple` log format does, each window is a line
        # (`_log_train`: rank 0's bar disabled means stderr is no terminal).
        bar = tqdm(total=self.planned_steps, initial=p.step, desc="train",
                   disable=not ctx.is_main or terminal_columns(sys.stderr) == 0, dynamic_ncols=True)
        window = ThroughputWindow(self.peak_flops)
        session_start, elapsed_before = time.perf_counter(), p.elapsed_s
        # Signals are caught before the start record is written: a Ctrl-C that follows it stops at an update's end
        # with a checkpoint (it once fell between the two and ended the process with Python's KeyboardInterrupt).
        with StopRequest() as stop, contextlib.closing(bar):  # the bar ends its line even when an error ends training
            if ctx.is_main:  # what a process pays before its first update, resumed or not
                setup_s = round(session_start - PROCESS_STARTED, 2)
                parts = self.startup.parts(PROCESS_STARTED, session_start)
                self.record({"type": "start", "step": p.step, "setup_s": setup_s,
                             "setup_parts_s": parts})
                largest = ", ".join(f"{name.replace('_', ' ')} {seconds:.1f}"
                                    for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1])[:3])
                self.log(f"training from step {p.step}, {setup_s:.1f} s after the process started ({largest} s)")
            try:
                self._loop(stop, bar, window, session_start, elapsed_before)
            finally:
                self.writer.wait()  # the last checkpoint is on disk (or its error raised) before train() returns
                if self.tensorboard:
                    self.tensorboard.close()
        return p

    def _loop(self, stop: StopRequest, bar, window: ThroughputWindow, session_start: float,
              elapsed_before: float) -> None:
        """Updates until a step, epoch, time, patience or stop limit; validation and checkpoints on their cadence.
        The next updates' batches are planned and collated by a background thread meanwhile (`Prefetcher`)."""
        cfg, p = self.cfg.train, self.progress
        if p.validation_pending and self.ctx.is_main:  # saved as its own step's validation began: validate again
            self._revalidate_checkpoint()
        plans = self.feed.update_plans(p.epoch, p.batch_in_epoch, cfg.max_steps - p.step)
        with Prefetcher(plans, lambda plan: self.feed.host_batches(plan.micro_batches, plan.planned_in)) as updates:
            self.timer.phase("data")  # waiting for the prefetcher counts as data time
            for plan, micro_batches in updates:
                log_line = (p.step + 1) % cfg.log_every == 0 or p.step + 1 == cfg.max_steps
                result = self.train_step(micro_batches)
                self.trim_heap()
                p.step, p.epoch, p.batch_in_epoch = p.step + 1, plan.epoch, plan.batch_in_epoch
                p.elapsed_s = elapsed_before + time.perf_counter() - session_start
                window.add(result.loss_sum, result.src_tokens, result.tgt_tokens,
                           self.update_flops(result.src_tokens, result.tgt_tokens, result.sentences),
                           result.padded_tokens, result.applied)
                bar.update(1)
                self.timer.phase("sync")
                interrupted, out_of_time = self._agreed_flags(stop.requested, agree_now=log_line)
                self.timer.phase(None)
                if log_line:
                    with self.timer.blocked():  # the window's first read of the device: waits for its work
                        self._check_nonfinite()
                    self._log_train(bar, window)
                pause = time.perf_counter()  # validation and checkpoints are records of their own, not training
                # The last update, by steps or by epochs, is validated and saved like a time budget's last: the
                # weights a run ends with have their dev BLEU, and best.pt has seen them.
                last_update = p.step >= cfg.max_steps or p.epoch >= cfg.max_epochs
                self._validate_and_save(last_update, interrupted, out_of_time)
                window.started += time.perf_counter() - pause
                if self._ends_here(last_update, interrupted, out_of_time):
                    break
                self.timer.phase("data")
        self.timer.phase(None)
        if p.epoch >= cfg.max_epochs:
            self.log(f"{finished_reason(p, cfg, False)} at step {p.step}")

    def _validate_and_save(self, last_update: bool, interrupted: bool, out_of_time: bool) -> None:
        """After an update: a finished background validation's outcome taken, then validation and a checkpoint on
        their cadence, and always at the end of training (`p.finished` set when patience runs out)."""
        cfg, p = self.cfg.train, self.progress
        if self.background is not None and self.background.ready():  # recorded at once, acted on below
            self.take_validation(self.background.take(), waited_s=0.0)
        evaluate = p.step % cfg.eval_every == 0 or last_update or out_of_time
        save = p.step % cfg.save_every == 0 or last_update or interrupted or out_of_time
        if evaluate or save:
            self._check_nonfinite()  # never validate or save weights past a non-finite update (policy stop)
            self.wait_for_validation()
        if evaluate:  # decoding starts from a trimmed heap and meets shapes of its own
            self.trim_heap(force=True)
            p.finished = self.evaluate_and_maybe_stop(final=last_update or out_of_time)
            self.trim_heap(force=True)
        if save or p.finished:
            saving, previous_write_s = time.perf_counter(), self.writer.last_seconds
            self.save_checkpoint()
            if self.ctx.is_main:  # training waits only for the snapshot; the write runs beside it
                self.record({"type": "checkpoint", "step": p.step, "seconds": round(time.perf_counter() - saving, 3),
                             "previous_write_s": previous_write_s and round(previous_write_s, 3)})

    def _ends_here(self, last_update: bool, interrupted: bool, out_of_time: bool) -> bool:
        """Whether training stops after this update, said with its reason (the step and epoch limits are the
        loop's own end)."""
        cfg, p = self.cfg.train, self.progress
        if interrupted:
            self.writer.wait()
            self.log(f"interrupted: checkpoint saved at step {p.step}; run the same command to resume")
        elif out_of_time:
            self.log(f"time budget of {cfg.time_budget_s:g} s spent at step {p.step}")
        elif p.finished and not last_update:  # patience running out on the last update stops nothing early
            self.log(f"stopped early at step {p.step}: {finished_reason(p, cfg, False)}")
        return interrupted or out_of_time or p.finished

    def _agreed_flags(self, stop_requested: bool, agree_now: bool) -> tuple[bool, bool]:
        """(a stop was requested, the time budget is spent), the same on every rank, and `self.clock` moved to the
        training seconds so far. Under torchrun all three are agreed by one collective every log_every updates
        (`agree_now`), not one per update: a stop request on any rank, or the clock of the rank that reads the most
        seconds, stops all of them at the same step, and that clock is the one every rank's schedule reads."""
        budget = self.cfg.train.time_budget_s
        if not self.ctx.enabled:
            self.clock.elapsed_s = self.progress.elapsed_s
        elif agree_now:
            stop, self.clock.elapsed_s = self.ctx.max_over_ranks(float(stop_requested), self.progress.elapsed_s)
            stop_requested = stop > 0
        else:
            return False, False
        return stop_requested, bool(budget) and self.clock.elapsed_s >= budget

    def token_loss(self, model, batch, label_smoothing: float) -> torch.Tensor:
        """Summed cross-entropy over the non-pad target tokens of one batch: the model projects to the vocabulary
        only there, a block of rows at a time, fused with the loss (nmt.models.loss)."""
        inputs = {} if batch.packing is None else {"packing": batch.packing}  # the Transformer's alone
        if batch.source_lengths is not None:  # the recurrent models' (see TrainingFeed.sources_longest_first)
            inputs["src_lengths"] = batch.source_lengths
        with autocast(self.device, self.dtype, cache=self.graphed_update is None), \
                training_attention_kernels(self.device, self.dtype):
            return model(batch.src, batch.tgt_in, batch.keep, batch.targets, label_smoothing, **inputs)

    def train_step(self, micro_batches: list[Batch]) -> StepResult:
        """Forward/backward over this rank's micro-batches (collated on the host: `TrainingFeed.host_batches`), then
        one update, without waiting for the device: the loss and the non-finite check stay there (read every log_every
        updates, see `_check_nonfinite`), and an update with non-finite gradients is skipped by the fused AdamW
        itself (its `found_inf`), as GradScaler does.
        With several ranks the gradients are all-reduced, so every rank finds the same non-finite norm.
        Under train.cuda_graph the update is one replayed graph, timed as the forward phase."""
        self.train_model.train()
        step_number = self.progress.step + 1
        if self.graphed_update is not None:
            self.timer.phase("forward")
            loss_sum, skip = self.graphed_update(micro_batches, step_number)
        else:
            loss_sum, skip = self.device_update(micro_batches, [b.tgt_tokens for b in micro_batches], step_number,
                                                self.timer.phase)
        if scheduler_steps_per_update(self.scheduler):
            self.scheduler.step()
        if self.graphed_update is None:  # a graphed update zeroes its gradient buffers itself, as it begins
            self.optimizer.zero_grad(set_to_none=not self.gradients_in_place)
        if self.average is not None:  # before the step counter moves: the updates it has taken in so far
            self.average.update(self.progress.step - self.progress.averaged_since)
        self.timer.phase(None)
        return StepResult(torch.where(skip, 0.0, loss_sum), sum(b.src_tokens for b in micro_batches),
                          sum(b.tgt_tokens for b in micro_batches), sum(b.sentences for b in micro_batches),
                          sum(b.src.numel() + b.tgt_in.numel() for b in micro_batches), ~skip)

    def device_update(self, micro_batches: list[Batch], token_counts: list[int] | list[torch.Tensor],
                      step_number: int | torch.Tensor, phase: Callable[[str], None] = lambda _: None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """The device's side of an update: (loss sum, skipped). Each micro-batch's loss is divided by its target
        tokens (`token_counts`: ints, or device tensors when captured in a CUDA graph, as is `step_number`, the step
        this update makes); `phase` marks the step split."""
        loss_sum = torch.zeros((), device=self.device)
        for j, host_batch in enumerate(micro_batches):
            phase("data")
            batch = host_batch.to(self.device)
            last = j == len(micro_batches) - 1
            sync = contextlib.nullcontext() if last or not self.ctx.enabled else self.train_model.no_sync()
            with sync, self.compile_guard():
                phase("forward")
                if self.cuda_graphs:  # the previous micro-batch's graph outputs are consumed: they may be overwritten
                    torch.compiler.cudagraph_mark_step_begin()
                loss = self.token_loss(self.train_model, batch, self.cfg.train.label_smoothing)
                phase("backward")
                self.scaler.scale(loss / token_counts[j] / len(micro_batches)).backward()
            loss_sum += loss.detach()
        phase("optimizer")
        self.scaler.unscale_(self.optimizer)
        # The norm is needed for the non-finite check even without clipping (an infinite max_norm scales by 1).
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm or math.inf)
        nonfinite = ~(torch.isfinite(norm) & torch.isfinite(loss_sum))
        # In place: a captured graph reads and writes this very tensor at every replay.
        self.first_nonfinite.copy_(torch.where(nonfinite & self.first_nonfinite.eq(0), step_number,
                                               self.first_nonfinite))
        # Policy stop: nothing after the first non-finite update is applied until training stops at the next read.
        skip = nonfinite if self.cfg.train.nonfinite_loss == "skip" else self.first_nonfinite.ne(0)
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)  # fp16: the scaler skips non-finite gradients on the device itself
            self.scaler.update()
        else:
            self.optimizer.grad_scale, self.optimizer.found_inf = None, skip.float()
            self.optimizer.step()
        return loss_sum, skip

    def _check_nonfinite(self) -> None:
        """Read the device's non-finite record (a host sync: at log lines, validation and checkpoints only);
        under the stop policy, stop with the first such update's step."""
        first = int(self.first_nonfinite)
        if first and self.cfg.train.nonfinite_loss == "stop":
            raise NMTError(f"non-finite loss at step {first}; weights left at step {first - 1} "
                           "(lower train.lr, or set train.nonfinite_loss: skip)")

    # --- validation, logging, checkpoints -------------------------------------------------------------------------
    def validate(self) -> dict:
        """Dev loss and dev BLEU/chrF (nmt.validation) of the translator's model: the model itself (or its average,
        under train.ema_decay), or the copy train.eval_in_background validates on its own thread."""
        # The training thread's trimmer is not to be shared: on a thread of its own, validation trims with the
        # translator's (nmt.cpu_memory).
        trim_heap = self.trim_heap if self.background is None else self.translator.trim_heap
        return dev_scores(self.translator, self.dev_set, self.cfg.train, self.token_loss, trim_heap)

    def evaluate_and_maybe_stop(self, final: bool = False) -> bool:
        """Validate on rank 0 (or, under train.eval_in_background and unless `final`, hand this step's weights to
        the validation thread), keep the best checkpoint, update patience; every rank learns whether to stop, by
        the validations whose outcomes have been taken."""
        stop = False
        if self.ctx.is_main:
            background = self.background is not None and not final
            if not background:
                self._validate_inline()
            stop = self.progress.evals_without_gain >= self.cfg.train.patience
            if background and not stop:
                self.background.submit(self.progress.step, self.progress.epoch, self.progress.elapsed_s)
                self.progress.validation_pending = True
        return self.ctx.broadcast_flag(stop)

    def _revalidate_checkpoint(self) -> None:
        """The resumed checkpoint's own step was being validated in the background when it was saved, and the
        outcome was lost with the process: validate these weights, which are that step's, again (in the background
        still, or inline when this run validates inline)."""
        p = self.progress
        if self.background is not None:
            self.background.submit(p.step, p.epoch, p.elapsed_s)
        else:
            self._validate_inline()

    def _validate_inline(self) -> None:
        """Validate the weights of this step now, and record the outcome."""
        p, started = self.progress, time.perf_counter()
        if self.background is not None:  # the translator's model is the copy: this step's weights first
            self.background.copy_weights()
        self.take_validation(Validated(p.step, p.epoch, p.elapsed_s, self.validate(), 0.0), started)

    def wait_for_validation(self) -> None:
        """Take the pending background validation's outcome, waiting for it if need be: what a checkpoint or the
        next validation point must know (and so where training stops) then never depends on timing."""
        if self.background is not None and self.background.pending:
            waiting = time.perf_counter()
            outcome = self.background.take()
            self.take_validation(outcome, waited_s=time.perf_counter() - waiting)

    def take_validation(self, outcome: Validated, started: float | None = None, waited_s: float | None = None
                        ) -> None:
        """Record a validation's outcome (rank 0): best dev BLEU, best.pt from the weights it scored (the
        translator's model), patience, a plateau schedule's step, the metrics record and the log line. `started`:
        when an inline validation began (its record's seconds count its best.pt snapshot too); `waited_s`: how
        long training waited for a background one."""
        scores, p, metric = outcome.scores, self.progress, self.cfg.train.best_metric
        value = scores["dev_loss" if metric == "loss" else metric]
        p.best_bleu = max(p.best_bleu, scores["bleu"])
        p.validation_pending = False
        if improves(value, p.best_score, metric):
            p.best_score, p.evals_without_gain = value, 0
            best = self._weights(self.translator.model, step=outcome.step, dev_bleu=scores["bleu"],
                                 dev_metric={metric: value})
            # Bound now: the writer thread runs later, when `best` may name something else.
            self.writer.submit(lambda weights=best: self.run.save(CheckpointKind.BEST, weights))
        else:
            p.evals_without_gain += 1
        if not scheduler_steps_per_update(self.scheduler):
            self.scheduler.step(value)
        self.record(valid_record(outcome, p, metric, started, waited_s))
        self.log(f"step {outcome.step}: dev loss {scores['dev_loss']:.3f}, dev BLEU {scores['bleu']:.2f} "
                 f"(best {p.best_bleu:.2f}), chrF {scores['chrf']:.2f}{p.chosen_best()}")

    def _log_train(self, bar, window: ThroughputWindow) -> None:
        with self.timer.blocked():  # reads the window's loss sum
            figures, p = window.report(self.ctx.world_size), self.progress
        lr = float(self.optimizer.param_groups[0]["lr"])  # a device tensor under train.cuda_graph
        loss = figures["loss"]
        bar.set_postfix(loss="-" if loss is None else f"{loss:.3f}", lr=f"{lr:.2e}",
                        tok_s=f"{figures['tokens_per_s']:,.0f}", mfu=f"{figures['mfu']:.1%}")
        if figures["skipped_updates"] and self.ctx.is_main:  # train.nonfinite_loss: skip (stop raised before this)
            self.log(f"warning: updates skipped: {figures['skipped_updates']} of the {figures['updates']} up to step "
                     f"{p.step} had a non-finite loss or gradient (train.nonfinite_loss: skip); if it goes on, lower "
                     "train.lr or set train.clip_norm")
        if self.cfg.train.time_budget_s:  # the bar ends where the budget will, not at a max_steps never reached
            bar.total = steps_within_budget(p.step, p.elapsed_s, self.cfg.train.time_budget_s, self.planned_steps)
            bar.refresh()
        if self.ctx.is_main and bar.disable:  # stderr is no terminal: a line instead of the bar
            print(progress_line(p.step, bar.total, figures, lr, p.elapsed_s), file=sys.stderr, flush=True)
        step_split = self.timer.report()  # on every rank: each window's phases are read and let go
        if self.ctx.is_main:
            self.record(train_record(p, figures, lr, step_split, self.peak.tflops))
            self._measure_peak_again(window)

    def _measure_peak_again(self, window: ThroughputWindow) -> None:
        """After one of the first log windows, where the peak was measured at start-up: measure it once more
        (`nmt.throughput.TrainingPeak`), for the windows that follow. After the window's figures were read: on a GPU
        the measurement waits for the device, and that wait belongs to no window."""
        started = time.perf_counter()
        replaced = self.peak.measure_again()
        window.peak_flops = self.peak_flops
        window.started += time.perf_counter() - started  # the next window times training alone
        if replaced is not None:
            self.log(f"MFU relative to {self.peak.tflops:.3g} TFLOP/s from step {self.progress.step}: the "
                     f"{self.peak.source} again (at start-up {replaced:.3g}: something else ran on the device then)")

    @property
    def peak_flops(self) -> float:
        """FLOP/s that MFU is relative to (the benchmarks in scripts/ read it too)."""
        return self.peak.tflops * 1e12

    def record(self, record: dict) -> None:
        """A metrics record: to metrics.jsonl, and as TensorBoard scalars under train.tensorboard. Train and valid
        records carry the Unix time they were made (TensorBoard's wall time, kept when a later session rewrites the
        event files from this log)."""
        if record["type"] in MIRRORED_TYPES:
            record = {**record, WALL_TIME_KEY: round(time.time(), 3)}
        self.run.metrics.append(record)
        if self.tensorboard:
            self.tensorboard.add(record)

    @property
    def kept_model(self) -> nn.Module:
        """The weights a run validates and saves for translation: the trained model's, or their average."""
        return self.average.model if self.average is not None else self.model

    def _weights(self, model: nn.Module | None = None, **extra) -> Weights:
        """The weights of `model` (`kept_model` by default) as they are now, copied (a background writer saves
        them while training changes them)."""
        return Weights(model=snapshot((model or self.kept_model).state_dict()), config=to_dict(self.cfg),
                       model_args=self.model_args, nmt_version=__version__, **extra)

    def save_checkpoint(self) -> None:
        """Every rank's RNG state goes to rank 0, which snapshots the training state at this update boundary and
        hands `last.pt` (and the step file) to the background writer (called by all ranks at the same step)."""
        rng = self.ctx.gather_to_main(capture_rng_state(self.device))
        if not self.ctx.is_main:
            return
        step, keep = self.progress.step, self.cfg.train.keep_last
        weights = self._weights()
        trained = snapshot(self.model.state_dict()) if self.average is not None else None
        state = TrainingState(**weights.__dict__, trained_model=trained,
                              optimizer=snapshot(self.optimizer.state_dict()),
                              scheduler=snapshot(self.scheduler.state_dict()),
                              scaler=snapshot(self.scaler.state_dict()), rng=rng,
                              progress=dataclasses.asdict(self.progress))

        def write() -> None:
            if keep:
                self.run.save_step(step, dataclasses.replace(weights, step=step), keep)
            self.run.save(CheckpointKind.LAST, state)
        self.writer.submit(write)


def train(cfg: Config, run_dir: Path | None, data_dir: Path, url: str | None = None,
          log: Callable[[str], None] = print) -> Progress:
    """Train (or resume) the model of `cfg` in `run_dir` (default runs/<name>); Ctrl-C, SIGTERM or SIGHUP saves a
    checkpoint at the next update boundary and returns. What rank 0 says is kept in RUN/train.log too."""
    run = Run.for_config(cfg, run_dir)
    run.check_usable()
    run.check_holds_no_foreign_config()
    run.check_apart_from(data_dir)
    main = torchrun_layout(os.environ).is_main  # before the process group exists; a broken layout stops here
    run_log = TrainingLog(run.log_path, log) if main else None
    try:
        progress = _train(cfg, run, Path(data_dir), url, run_log or log, run_log)
    except NMTError as err:
        if run_log:
            run_log.record(f"error: {err}")
        raise
    if run_log:  # rank 0's: the others never validate (their best dev BLEU would read -1)
        best = f"{progress.best_bleu:.2f}" if progress.validated else "none yet (no validation ran)"
        run_log(f"done at step {progress.step}, best dev BLEU {best}{progress.chosen_best()}")
    return progress


def _train(cfg: Config, run: Run, data_dir: Path, url: str | None, log: Callable[[str], None],
           run_log: TrainingLog | None) -> Progress:
    # A fine-tuned run prepares its data with its parent's tokenizer (rank 0 says so).
    cfg = with_borrowed_tokenizer(cfg, run, log if run_log else None)
    last = run.checkpoint_path(CheckpointKind.LAST)
    if cfg.train.tensorboard:  # a missing package is said before the corpus is prepared
        check_tensorboard_available()
    if last.is_file():  # a run that cannot resume with this config fails before any work
        run.check_resumable(run.peek(last).config, cfg)
    elif cfg.train.init_from:  # as weights of another shape do, before the corpus is prepared
        check_parent_shape(cfg)
    trainer = Trainer(cfg, run, data_dir, url, log)
    lock = run.lock() if trainer.ctx.is_main else contextlib.nullcontext()
    try:
        with lock:
            trainer.setup()
            if run_log:  # the run is set up: what was said so far, and all from now on, goes to its train.log
                run_log.start()
            progress = trainer.train()
        # Under torchrun: no rank closes its connections while another still works (rank 0 waits for its last
        # checkpoint write); a gloo peer that sees a connection closed under it may abort its process.
        trainer.ctx.barrier()
        return progress
    finally:
        teardown_distributed(trainer.ctx)
