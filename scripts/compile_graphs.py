"""How many graphs torch.compile makes of one training forward, per architecture, and why it breaks.

    python scripts/compile_graphs.py [--archs bahdanau luong+feed seq2seq transformer] [--allow-rnn | --traced]
        [--record F]

One static-shape batch (4 sentences, 7 source and 6 target positions, the flat-index `keep` that static batches
use) through the model's fused forward + loss, under `torch._dynamo.explain`. Every graph break is a seam where
CUDA graphs (`reduce-overhead`) stop: a model that is one graph can be replayed as one; the RNNs are not, because
dynamo does not trace `nn.GRU`/`nn.LSTM` (unless `--allow-rnn`) and skips `pack_padded_sequence`. `--traced` sets
up the model as `train.compile` on static shapes does: allow_rnn, and the RNN encoders' masked recurrence in place of
packing (nmt.models.masked_rnn).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch
import torch._dynamo as dynamo

from nmt.config import ModelConfig
from nmt.models.builder import build_model
from nmt.models.rnn_encoder import trace_recurrences

sys.path.insert(0, str(Path(__file__).parent))
from bench_train import ARCHS  # noqa: E402  (the same architecture names and settings as the throughput bench)
from results_record import write_record  # noqa: E402

VOCAB, BATCH, SRC_LEN, TGT_LEN = 100, 4, 7, 6


def explain(arch: str, traced: bool = False) -> dict:
    """Graph count, break count and the distinct break reasons (first line each) of one training forward."""
    torch.manual_seed(0)
    cfg = dataclasses.replace(ModelConfig(), embed_dim=32, hidden_size=64, num_layers=2, num_heads=4, ff_dim=64,
                              dropout=0.1, **ARCHS[arch])
    model = build_model(cfg, VOCAB, VOCAB, joint_vocab=True).train()
    if traced:
        trace_recurrences(model)
    src = torch.randint(3, VOCAB, (BATCH, SRC_LEN))
    src[0, SRC_LEN - 2:] = 0  # one padded sentence, so the encoder's length handling is traced too
    tgt_in = torch.randint(3, VOCAB, (BATCH, TGT_LEN))
    keep = torch.arange(BATCH * TGT_LEN)  # static batches keep every position by flat index (pads are ignored)
    targets = torch.randint(3, VOCAB, (BATCH * TGT_LEN,))
    dynamo.reset()
    found = dynamo.explain(lambda: model(src, tgt_in, keep, targets, 0.1))()
    reasons = sorted({str(b.reason).strip().splitlines()[0] + " — " + _where(b) for b in found.break_reasons})
    return {"architecture": arch, "graphs": found.graph_count, "graph_breaks": found.graph_break_count,
            "break_reasons": reasons}


def _where(graph_break) -> str:
    frame = graph_break.user_stack[-1] if graph_break.user_stack else None
    return f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", nargs="+", choices=list(ARCHS), default=["bahdanau", "luong+feed", "seq2seq",
                                                                           "transformer"])
    parser.add_argument("--allow-rnn", action="store_true", help="dynamo's experimental RNN tracing")
    parser.add_argument("--traced", action="store_true", help="as train.compile on static shapes: --allow-rnn and "
                        "the RNN encoders masked instead of packed")
    parser.add_argument("--record", type=Path, help="write a JSON record here")
    args = parser.parse_args()
    dynamo.config.allow_rnn = args.allow_rnn or args.traced
    figures = [explain(arch, args.traced) for arch in args.archs]
    for row in figures:
        print(f"{row['architecture']}: {row['graphs']} graphs, {row['graph_breaks']} breaks")
        for reason in row["break_reasons"]:
            print(f"  - {reason}")
    if args.record:
        write_record(args.record, torch=torch.__version__, allow_rnn=args.allow_rnn or args.traced,
                     traced=args.traced, figures=figures)


if __name__ == "__main__":
    main()
