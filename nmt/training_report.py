"""What training says as it goes: the summary line it starts with, where its start-up seconds went, a log window as
one line where stderr is no terminal, and the train and valid records of metrics.jsonl."""

from __future__ import annotations

import os
import time

import torch
from tqdm import tqdm

from nmt.background_validation import Validated
from nmt.config import Config
from nmt.data.sources import languages
from nmt.data.tokenizer import Tokenizers
from nmt.device import EMULATED_BF16_NOTE, emulated_bf16
from nmt.errors import counted
from nmt.progress import Progress


def training_summary(cfg: Config, parameters: int, tokenizers: Tokenizers, pairs: int, device: torch.device,
                     dtype: torch.dtype | None, world_size: int) -> str:
    """One line on what trains, on what, where: the first thing a run says (the model's size and the vocabulary
    SentencePiece made are not in the config)."""
    source, target = languages(cfg.data)
    sizes = tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size()
    vocabulary = f"{sizes[0]:,} joint" if tokenizers.joint else f"{sizes[0]:,} + {sizes[1]:,}"
    where = f"{device}, {counted(torch.get_num_threads(), 'thread')}" if device.type == "cpu" else str(device)
    processes = f" × {world_size} processes" if world_size > 1 else ""
    precision = {None: "fp32", torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}[dtype]
    if emulated_bf16(device, dtype):
        precision += f" ({EMULATED_BF16_NOTE})"
    return (f"{cfg.model.arch}: {parameters:,} parameters, vocabulary {vocabulary}; {source}→{target}, {pairs:,} "
            f"training pairs; {where}{processes}, {precision}")


class StartupParts:
    """Where a process's seconds before its first update go (the `start` record): each mark ends a part, the first
    (imports, from nmt's import to the trainer) when made, the last (`rest`) at the first update."""

    def __init__(self):
        self.marks = [("imports", time.perf_counter())]

    def mark(self, part: str) -> None:
        self.marks.append((part, time.perf_counter()))

    def parts(self, started: float, first_update: float) -> dict[str, float]:
        ends = [at for _, at in self.marks] + [first_update]
        names = [name for name, _ in self.marks] + ["rest"]
        return {name: round(end - begin, 3) for name, begin, end in zip(names, [started] + ends, ends)}


def terminal_columns(stream) -> int:
    """The width of the terminal `stream` writes to; 0 for a file or a pipe, and for a terminal that reports no size
    (a serial console, `docker exec -t` before its first resize), where tqdm drew a bar of no width: nothing."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (OSError, ValueError, AttributeError):  # no file descriptor (a stream of Python's own), or closed
        return 0


def progress_line(step: int, total: int, figures: dict, lr: float, elapsed_s: float) -> str:
    """What the bar shows, as one line for a log file: the step of the planned total, the window's loss, the learning
    rate, its speed and MFU, and the training time so far (all sessions)."""
    loss = "-" if figures["loss"] is None else f"{figures['loss']:.3f}"
    return (f"train: step {step:,}/{total:,}, loss {loss}, lr {lr:.2e}, {figures['tokens_per_s']:,.0f} tok/s, "
            f"MFU {figures['mfu']:.1%}, {tqdm.format_interval(elapsed_s)}")


def train_record(progress: Progress, figures: dict, lr: float, step_split: dict, peak_tflops: float) -> dict:
    """A log window's record: its loss, learning rate, updates made and skipped, tokens/s (non-pad and padded), the
    step split (`StepTimer.report`), MFU and the peak it is relative to (3 figures: an emulated bf16 one is ~0.001)."""
    p, loss = progress, figures["loss"]
    return {"type": "train", "step": p.step, "epoch": p.epoch, "time_s": round(p.elapsed_s, 3),
            "loss": None if loss is None else round(loss, 4), "lr": lr, "updates": figures["updates"],
            "skipped_updates": figures["skipped_updates"], "tokens_per_s": round(figures["tokens_per_s"], 1),
            "padded_tokens_per_s": round(figures["padded_tokens_per_s"], 1), **step_split,
            "mfu": round(figures["mfu"], 5), "peak_tflops": float(f"{peak_tflops:.3g}")}


def valid_record(outcome: Validated, progress: Progress, metric: str, started: float | None,
                 waited_s: float | None) -> dict:
    """A validation's record, once its outcome is taken: its scores and the best so far; its seconds (`started`: when
    an inline validation began, its best.pt snapshot counted too), or for a background one when it was taken and how
    long training waited for it (`waited_s`)."""
    scores, p = outcome.scores, progress
    timing = {"seconds": round(time.perf_counter() - started, 3)} if started is not None else \
        {"seconds": round(outcome.seconds, 3), "background": True, "taken_at_step": p.step,
         "taken_time_s": round(p.elapsed_s, 3), "waited_s": round(waited_s or 0.0, 3)}
    return {"type": "valid", "step": outcome.step, "epoch": outcome.epoch, "time_s": round(outcome.time_s, 3),
            "dev_loss": scores["dev_loss"], "dev_ppl": scores["dev_ppl"], "dev_bleu": scores["bleu"],
            "dev_chrf": scores["chrf"], "best_bleu": p.best_bleu, "best_metric": metric, "best_score": p.best_score,
            **timing, **{key: scores[key] for key in ("loss_s", "decode_s", "score_s")}}
