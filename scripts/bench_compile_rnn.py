"""What compiling an RNN's training update costs and gives, on one static batch shape.

    python scripts/bench_compile_rnn.py --arch bahdanau --width 16 [--hidden-size 512] [--device cuda]
        [--backends inductor cudagraphs] [--steps 10] [--record F]

One batch of `--tokens // width` sentences with `width` source and target positions (every other sentence padded at
the end), kept by flat index as static batches are: the fused forward and loss, then backward, under bf16 autocast
on a GPU (fp32 on a CPU), as `train.length_multiple` + `train.compile` run it. For eager (packed sequences, cuDNN) and
each compile backend (the masked encoder and the decoder's steps traced through): the first call's seconds (tracing,
code generation, CUDA-graph recording) and the median milliseconds of an update, compiled and eager alternating.
The compile cache starts empty (a fresh TORCHINDUCTOR_CACHE_DIR) unless --warm-cache: what a first run pays.
`cudagraphs` runs as `aot_eager` on a CPU, as training does there.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch._dynamo as dynamo

from nmt.config import ModelConfig
from nmt.models.builder import build_model
from nmt.models.rnn_encoder import trace_recurrences

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402

ARCHS = {"bahdanau": {"arch": "bahdanau"}, "luong+feed": {"arch": "luong", "input_feeding": True},
         "seq2seq": {"arch": "seq2seq"}}


def static_batch(width: int, tokens: int, vocab: int, device: torch.device):
    rows = max(1, tokens // width)
    src = torch.randint(3, vocab, (rows, width), device=device)
    src[::2, width // 2:] = 0  # half the sentences end halfway: the encoder's padding is exercised
    tgt_in = torch.randint(3, vocab, (rows, width), device=device)
    keep = torch.arange(rows * width, device=device)
    return src, tgt_in, keep, torch.randint(3, vocab, (rows * width,), device=device)


def make_update(model, batch, device: torch.device, graphs: bool):
    dtype = torch.bfloat16 if device.type == "cuda" else None

    def update() -> None:
        if graphs:  # CUDA graphs replay into the same buffers: each update starts a new step
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = model(*batch, 0.1)
        loss.backward()
        model.zero_grad(set_to_none=True)
    return update


def timed(update, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    update()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=list(ARCHS), default="bahdanau")
    parser.add_argument("--width", type=int, default=16, help="source and target positions (a batch width)")
    parser.add_argument("--tokens", type=int, default=4096, help="positions per side in the batch")
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--hidden-size", type=int, default=512)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--backends", nargs="+", choices=("inductor", "cudagraphs"), default=["cudagraphs"])
    parser.add_argument("--mode", default=None, help="inductor's mode, e.g. reduce-overhead")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warm-cache", action="store_true", help="keep torch's compile cache (default: empty)")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    if not args.warm_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
    device = torch.device(args.device)
    torch.manual_seed(0)
    cfg = dataclasses.replace(ModelConfig(), embed_dim=args.embed_dim, hidden_size=args.hidden_size,
                              num_layers=args.num_layers, dropout=0.0, **ARCHS[args.arch])
    model = build_model(cfg, args.vocab, args.vocab, joint_vocab=True).to(device).train()
    batch = static_batch(args.width, args.tokens, args.vocab, device)
    eager = make_update(model, batch, device, graphs=False)
    eager_first_s = timed(eager, device)
    dynamo.config.allow_rnn = True  # what train.compile on static shapes sets
    trace_recurrences(model)
    figures = []
    for backend in args.backends:
        run_as = "aot_eager" if backend == "cudagraphs" and device.type != "cuda" else backend
        dynamo.reset()
        compiled_model = torch.compile(model, backend=run_as, mode=args.mode if run_as == "inductor" else None)
        graphs = device.type == "cuda" and (backend == "cudagraphs" or args.mode in ("reduce-overhead",
                                                                                    "max-autotune"))
        compiled = make_update(compiled_model, batch, device, graphs)
        first_s = timed(compiled, device)
        timed(compiled, device)  # CUDA graph trees record on a later call than the first
        eager_ms, compiled_ms = [], []
        for _ in range(args.steps):
            eager_ms.append(timed(eager, device) * 1e3)
            compiled_ms.append(timed(compiled, device) * 1e3)
        row = {"backend": backend, "ran_as": run_as, "mode": args.mode if run_as == "inductor" else None,
               "first_call_s": round(first_s, 2), "eager_ms": round(statistics.median(eager_ms), 2),
               "compiled_ms": round(statistics.median(compiled_ms), 2)}
        row["speedup"] = round(row["eager_ms"] / row["compiled_ms"], 3)
        figures.append(row)
        print(f"{args.arch} width {args.width}, {batch[0].shape[0]} rows, {backend} (as {run_as}): first call "
              f"{first_s:.1f} s; eager {row['eager_ms']:.1f} ms, compiled {row['compiled_ms']:.1f} ms per update "
              f"({row['speedup']:.2f}x)", flush=True)
    if args.record:
        write_record(args.record, arch=args.arch, width=args.width, rows=batch[0].shape[0],
                     embed_dim=args.embed_dim, hidden_size=args.hidden_size, num_layers=args.num_layers,
                     vocab=args.vocab, steps=args.steps, warm_cache=args.warm_cache,
                     eager_first_call_s=round(eager_first_s, 2), threads=torch.get_num_threads(), figures=figures)


if __name__ == "__main__":
    main()
