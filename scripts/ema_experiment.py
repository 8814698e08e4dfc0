"""What train.ema_decay gives: runs trained alike but for the decay, each scored on a split (valid: defaults are
chosen there, never on test) by the weights it could translate with: its `averaged.pt` (`nmt average`, what the demo
ships), its `last.pt` (under train.ema_decay the moving average) and, for an averaged run, the optimizer's own last
weights (`trained_model`). BLEU and chrF with sacrebleu's paired bootstrap against the first run's first system.

    for d in 0 0.999; do nmt train --config configs/demo.yaml --run-dir runs/ema-$d --set train.ema_decay=$d \\
        --set train.time_budget_s=0 --set train.max_steps=1300; nmt average --run runs/ema-$d --last 3; done
    python scripts/ema_experiment.py --run runs/ema-0 --run runs/ema-0.999 [--split valid] [--beam 5] [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.data.dataset import load_references  # noqa: E402
from nmt.evaluate import compare  # noqa: E402
from nmt.models.builder import upgrade_state_dict  # noqa: E402
from nmt.run_dir import Run  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402


def translator_of(run_dir: Path, checkpoint: str, beam: int) -> Translator:
    return Translator.from_run(run_dir, Run(run_dir).checkpoint_path(checkpoint), device="cpu",
                               decode_overrides={"beam_size": beam}, warn=lambda _: None)


def systems_of(run_dir: Path, beam: int) -> dict[str, Translator]:
    """The run's translators by name: averaged, last, and (under train.ema_decay) trained."""
    run, out = Run(run_dir), {}
    if run.checkpoint_path("averaged").is_file():
        out["averaged"] = translator_of(run_dir, "averaged", beam)
    out["last"] = translator_of(run_dir, "last", beam)
    trained = run.load(run.checkpoint_path("last")).get("trained_model")
    if trained is not None:
        out["trained"] = translator_of(run_dir, "last", beam)
        out["trained"].model.load_state_dict(upgrade_state_dict(trained))
    return out


def training_of(run_dir: Path) -> dict:
    run = Run(run_dir)
    train_records, valid_records = run.metrics.split()
    return {"ema_decay": run.read_config().train.ema_decay, "steps": valid_records[-1]["step"],  # validated last
            "training_s": valid_records[-1]["time_s"], "last_train_loss": train_records[-1]["loss"],
            "dev_bleu_greedy_first_300": [(r["step"], r["dev_bleu"]) for r in valid_records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, action="append", required=True)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    outputs, sources, references, target_lang = {}, None, None, None
    for run_dir in args.run:
        for name, translator in systems_of(run_dir, args.beam).items():
            if sources is None:
                sources, references = load_references(translator.trained_on, args.split)
                target_lang = translator.target_lang
            key = f"{run_dir.name}:{name}"  # decoding costs the same: one model shape, the weights apart
            outputs[key] = [t.text for t in translator.translate(sources)]
            print(f"{key} decoded", file=sys.stderr)
    table = compare(list(outputs.items()), references, target_lang=target_lang)
    figures = {
        "split": args.split, "beam": args.beam, "sentences": len(sources), "threads": torch.get_num_threads(),
        "bleu_signature": table.signature,
        "runs": {str(run_dir): training_of(run_dir) for run_dir in args.run},
        "systems": table.rows,
    }
    print(json.dumps(figures, indent=1, ensure_ascii=False))
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
