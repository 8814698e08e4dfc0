"""`nmt train`: one loop that reads top to bottom; checkpointing, validation and logging are functions it calls."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import random
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from nmt import __version__
from nmt.checkpoint import capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint
from nmt.config import Config, to_dict
from nmt.data.batching import collate, token_batches
from nmt.data.corpus import Normalizer
from nmt.data.dataset import ParallelArrays, load_arrays, load_references
from nmt.data.prepare import ensure_prepared
from nmt.data.tokenizer import PAD_ID, Tokenizers
from nmt.device import autocast_dtype, pick_device
from nmt.distributed import DistContext, setup_distributed, teardown_distributed
from nmt.errors import NMTError
from nmt.metrics import corpus_scores
from nmt.models import build_model
from nmt.optim import make_optimizer, make_scheduler, steps_per_update
from nmt.run_dir import METRICS_FILE, check_compatible, checkpoint_path, initialize_run_dir
from nmt.translator import Translator


@dataclass
class Progress:
    """Where training stands; with the RNG states this is all exact resume needs besides tensors."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of this epoch consumed so far, by all ranks together
    best_bleu: float = -1.0
    evals_without_gain: int = 0
    finished: bool = False


@dataclass
class Session:
    """Everything the loop touches, built once by `setup`."""

    cfg: Config
    run_dir: Path
    ctx: DistContext
    device: torch.device
    model: torch.nn.Module  # the plain model: checkpoints and evaluation
    train_model: torch.nn.Module  # what the loop calls: possibly DDP-wrapped and compiled
    optimizer: torch.optim.Optimizer
    scheduler: object
    scaler: torch.amp.GradScaler
    autocast_dtype: torch.dtype | None
    train_data: ParallelArrays
    valid_data: ParallelArrays
    translator: Translator
    valid_sources: list[str]
    valid_references: list[list[str]]
    progress: Progress
    log: Callable[[str], None]


def autocast(s: Session):
    if s.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(s.device.type, dtype=s.autocast_dtype)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def setup(cfg: Config, run_dir: Path, data_dir: Path, url: str | None, log: Callable[[str], None]) -> Session:
    ctx = setup_distributed(cfg.train.device)
    device = pick_device(cfg.train.device, ctx.local_rank)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    if ctx.is_main:  # rank 0 downloads and prepares; the others wait, then find the result
        prepared = ensure_prepared(cfg.data, data_dir, url, log)
    ctx.barrier()
    if not ctx.is_main:
        prepared = ensure_prepared(cfg.data, data_dir, url, log)
    seed_everything(cfg.train.seed + ctx.rank)
    tokenizers = Tokenizers.from_dir(prepared)
    model = build_model(cfg.model, tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size(),
                        tokenizers.joint).to(device)
    optimizer = make_optimizer(model, cfg.train, device)
    scheduler = make_scheduler(optimizer, cfg.train)
    dtype = autocast_dtype(cfg.train.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    progress = Progress()
    if checkpoint_path(run_dir, "last").is_file():
        progress = resume(run_dir, cfg, model, optimizer, scheduler, scaler)
        log(f"resuming {run_dir} from step {progress.step}")
    if ctx.is_main:  # on resume too: config.yaml then shows the settings in force (e.g. a raised max_steps)
        initialize_run_dir(run_dir, cfg, prepared, device, ctx.world_size)
    train_model = model
    if ctx.enabled:
        train_model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.train.compile:
        # Token-bucketed batches change shape every step: compile for dynamic shapes instead of recompiling.
        train_model = torch.compile(train_model, dynamic=True)
    sources, references = load_references(prepared, "valid")
    if cfg.train.eval_max_sentences:
        sources, references = sources[:cfg.train.eval_max_sentences], references[:cfg.train.eval_max_sentences]
    translator = Translator(model, tokenizers, Normalizer(cfg.data.lowercase_source), cfg.decode, device, dtype)
    return Session(cfg, run_dir, ctx, device, model, train_model, optimizer, scheduler, scaler, dtype,
                   load_arrays(prepared, "train"), load_arrays(prepared, "valid"), translator, sources, references,
                   progress, log)


def resume(run_dir, cfg, model, optimizer, scheduler, scaler) -> Progress:
    # On the CPU: RNG states must stay CPU tensors; load_state_dict copies weights onto the model's device.
    state = load_checkpoint(checkpoint_path(run_dir, "last"), map_location="cpu")
    check_compatible(state["config"], cfg, run_dir)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    restore_rng_state(state["rng"])
    return Progress(**state["progress"])


def save_last(s: Session) -> None:
    if not s.ctx.is_main:
        return
    save_checkpoint({"model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(),
                     "scheduler": s.scheduler.state_dict(), "scaler": s.scaler.state_dict(),
                     "rng": capture_rng_state(), "progress": dataclasses.asdict(s.progress),
                     "config": to_dict(s.cfg), "nmt_version": __version__}, checkpoint_path(s.run_dir, "last"))


def save_best(s: Session, scores: dict) -> None:
    save_checkpoint({"model": s.model.state_dict(), "config": to_dict(s.cfg), "step": s.progress.step,
                     "dev_bleu": scores["bleu"], "nmt_version": __version__}, checkpoint_path(s.run_dir, "best"))


def log_metrics(s: Session, record: dict) -> None:
    if s.ctx.is_main:
        with open(s.run_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def token_loss(s: Session, model, batch, label_smoothing: float) -> torch.Tensor:
    """Summed cross-entropy over the non-pad target tokens of one batch."""
    with autocast(s):
        logits = model(batch.src, batch.tgt_in)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1),
                           ignore_index=PAD_ID, label_smoothing=label_smoothing, reduction="sum")


def train_step(s: Session, micro_batches: list[np.ndarray]) -> tuple[float, int, int, bool]:
    """Forward/backward over this rank's micro-batches, then one update; returns (loss sum, tokens, ok)."""
    s.train_model.train()
    loss_sum, src_tokens, tgt_tokens = 0.0, 0, 0
    for j, indices in enumerate(micro_batches):
        batch = collate(s.train_data, indices).to(s.device)
        last = j == len(micro_batches) - 1
        sync = contextlib.nullcontext() if last or not s.ctx.enabled else s.train_model.no_sync()
        with sync:
            loss = token_loss(s, s.train_model, batch, s.cfg.train.label_smoothing)
            s.scaler.scale(loss / batch.tgt_tokens / len(micro_batches)).backward()
        loss_sum += loss.item()
        src_tokens, tgt_tokens = src_tokens + batch.src_tokens, tgt_tokens + batch.tgt_tokens
    finite = not s.ctx.any_flag(not math.isfinite(loss_sum))
    if finite:
        s.scaler.unscale_(s.optimizer)
        if s.cfg.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), s.cfg.train.clip_norm)
        s.scaler.step(s.optimizer)
        s.scaler.update()
        if steps_per_update(s.scheduler):
            s.scheduler.step()
    s.optimizer.zero_grad(set_to_none=True)
    return loss_sum, src_tokens, tgt_tokens, finite


@torch.no_grad()
def validate(s: Session) -> dict:
    """Dev loss (token NLL, no smoothing) and dev BLEU/chrF with greedy decoding through the Translator."""
    s.model.eval()
    nll, tokens = 0.0, 0
    for indices in token_batches(s.valid_data.src_lengths, s.valid_data.tgt_lengths, s.cfg.train.max_tokens,
                                 seed=0, epoch=0, shuffle=False):
        batch = collate(s.valid_data, indices).to(s.device)
        nll += token_loss(s, s.model, batch, 0.0).item()
        tokens += batch.tgt_tokens
    hypotheses = [t.text for t in s.translator.translate(s.valid_sources, beam_size=1)]
    scores = corpus_scores(hypotheses, s.valid_references)
    return {"dev_loss": round(nll / tokens, 4), "dev_ppl": round(math.exp(min(nll / tokens, 50)), 2), **scores}


def evaluate_and_maybe_stop(s: Session) -> bool:
    """Validate on rank 0, keep the best checkpoint, update patience; every rank learns whether to stop."""
    stop = False
    if s.ctx.is_main:
        scores = validate(s)
        p = s.progress
        if scores["bleu"] > p.best_bleu:
            p.best_bleu, p.evals_without_gain = scores["bleu"], 0
            save_best(s, scores)
        else:
            p.evals_without_gain += 1
        stop = p.evals_without_gain >= s.cfg.train.patience
        if not steps_per_update(s.scheduler):
            s.scheduler.step(scores["bleu"])
        log_metrics(s, {"type": "valid", "step": p.step, "epoch": p.epoch, "dev_loss": scores["dev_loss"],
                        "dev_ppl": scores["dev_ppl"], "dev_bleu": scores["bleu"], "dev_chrf": scores["chrf"],
                        "best_bleu": p.best_bleu})
        s.log(f"step {p.step}: dev loss {scores['dev_loss']:.3f}, dev BLEU {scores['bleu']:.2f} "
              f"(best {p.best_bleu:.2f}), chrF {scores['chrf']:.2f}")
    return s.ctx.broadcast_flag(stop)


def run_loop(s: Session) -> None:
    cfg, p, ctx = s.cfg.train, s.progress, s.ctx
    group = ctx.world_size * cfg.accum_steps  # batches per update, over all ranks
    bar = tqdm(total=cfg.max_steps, initial=p.step, desc="train", disable=not ctx.is_main, dynamic_ncols=True)
    window = {"loss": 0.0, "tgt": 0, "src": 0, "time": time.perf_counter()}
    while p.step < cfg.max_steps and p.epoch < cfg.max_epochs and not p.finished:
        batches = token_batches(s.train_data.src_lengths, s.train_data.tgt_lengths, cfg.max_tokens, cfg.seed, p.epoch)
        usable = len(batches) // group * group
        if usable == 0:
            raise NMTError(f"train.max_tokens={cfg.max_tokens} gives fewer batches than one update needs")
        while p.batch_in_epoch < usable and p.step < cfg.max_steps and not p.finished:
            start = p.batch_in_epoch + ctx.rank * cfg.accum_steps
            loss_sum, src_tokens, tgt_tokens, finite = train_step(s, batches[start:start + cfg.accum_steps])
            if not finite and cfg.nonfinite_loss == "stop":
                raise NMTError(f"non-finite loss at step {p.step + 1}; weights left at step {p.step} "
                               "(lower train.lr, or set train.nonfinite_loss: skip)")
            p.step += 1
            p.batch_in_epoch += group
            if p.batch_in_epoch + group > usable:
                p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            window["loss"] += loss_sum if finite else 0.0
            window["tgt"], window["src"] = window["tgt"] + tgt_tokens, window["src"] + src_tokens
            bar.update(1)
            if p.step % cfg.log_every == 0 or p.step == cfg.max_steps:
                log_train_window(s, bar, window)
            if p.step % cfg.eval_every == 0 or p.step == cfg.max_steps:
                p.finished = evaluate_and_maybe_stop(s)
            if p.step % cfg.save_every == 0 or p.step == cfg.max_steps or p.finished:
                save_last(s)
    bar.close()


def log_train_window(s: Session, bar, window: dict) -> None:
    elapsed = time.perf_counter() - window["time"]
    # Every rank processed about as many tokens as this one.
    tokens_per_s = (window["src"] + window["tgt"]) * s.ctx.world_size / max(elapsed, 1e-9)
    loss = window["loss"] / max(window["tgt"], 1)
    lr = s.optimizer.param_groups[0]["lr"]
    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}")
    log_metrics(s, {"type": "train", "step": s.progress.step, "epoch": s.progress.epoch, "loss": round(loss, 4),
                    "lr": lr, "tokens_per_s": round(tokens_per_s, 1)})
    window.update(loss=0.0, tgt=0, src=0, time=time.perf_counter())


def train(cfg: Config, run_dir: Path, data_dir: Path, url: str | None = None,
          log: Callable[[str], None] = print) -> Progress:
    """Train (or resume) the model of `cfg` in `run_dir`; Ctrl-C or SIGTERM saves a checkpoint and returns."""
    s = setup(cfg, Path(run_dir), Path(data_dir), url, log)
    previous_sigterm = _interrupt_on_sigterm()
    try:
        if s.progress.finished or s.progress.step >= cfg.train.max_steps:
            log(f"{run_dir} already finished at step {s.progress.step}")
        else:
            run_loop(s)
    except KeyboardInterrupt:
        save_last(s)
        log(f"interrupted: checkpoint saved at step {s.progress.step}; run the same command to resume")
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
        teardown_distributed(s.ctx)
    return s.progress


def _interrupt_on_sigterm():
    """Schedulers stop jobs with SIGTERM: treat it like Ctrl-C (save a checkpoint, exit cleanly)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)
