"""Training throughput (source + target tokens/s) of each architecture on the prepared data.

    python scripts/bench_train.py --data-dir data --steps 30 [--device cuda] [--embed-dim 256 --hidden-size 256]

Measures full training steps (forward, backward, AdamW update) on real token-bucketed batches, after warm-up steps.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from nmt.config import DataConfig, ModelConfig
from nmt.data.batching import collate, token_batches
from nmt.data.dataset import load_arrays
from nmt.data.prepare import find_prepared
from nmt.data.tokenizer import PAD_ID, Tokenizers
from nmt.models import build_model

ARCHS = {"seq2seq": {}, "bahdanau": {}, "luong": {"input_feeding": False}, "luong+feed": {"input_feeding": True},
         "transformer": {}}


def bench(name: str, args, data, tokenizers, device) -> float:
    torch.manual_seed(0)
    arch = name.split("+")[0]
    cfg = ModelConfig(arch=arch, embed_dim=args.embed_dim, hidden_size=args.hidden_size, num_layers=args.num_layers,
                      num_heads=4, ff_dim=4 * args.embed_dim, dropout=0.1, **ARCHS[name])
    model = build_model(cfg, tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size(), True).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    dtype = torch.bfloat16 if device.type == "cuda" else None
    batches = token_batches(data.src_lengths, data.tgt_lengths, args.max_tokens, seed=0, epoch=0)
    tokens, started = 0, None
    for i, indices in enumerate(batches[:args.warmup + args.steps]):
        if i == args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            tokens, started = 0, time.perf_counter()
        batch = collate(data, indices).to(device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            logits = model(batch.src, batch.tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch.tgt_out.flatten(),
                                                 ignore_index=PAD_ID)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += batch.src_tokens + batch.tgt_tokens
    if device.type == "cuda":
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--archs", nargs="*", default=list(ARCHS))
    args = parser.parse_args()
    directory = find_prepared(DataConfig(), args.data_dir)
    data, tokenizers = load_arrays(directory, "train"), Tokenizers.from_dir(directory)
    device = torch.device(args.device)
    print(f"| architecture | tokens/s ({device}, {torch.get_num_threads()} threads, max_tokens {args.max_tokens}) |")
    print("|---|---|")
    for name in args.archs:
        print(f"| {name} | {bench(name, args, data, tokenizers, device):,.0f} |", flush=True)


if __name__ == "__main__":
    main()
