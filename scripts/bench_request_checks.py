"""What `nmt serve` spends on a request before queueing it, against decoding it: the checks encode the request's
prefixes and constraint phrases and count its source pieces, which the engine then encodes again. Is that worth
passing the encoded pieces through the queue? The median of rounds of each, one process, nothing else running.

    python scripts/bench_request_checks.py --run runs/demo [--out results/serve-request-checks-....json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.engine_inputs import checked_constraints, encode_prefixes  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402

# A request of the server's largest default size (8 sentences), each with a prefix and three phrases to hold.
SENTENCES = ["I have two cats and a dog that sleeps on the red sofa near the window."] * 8
PREFIXES = ["J'ai deux"] * 8
CONSTRAINTS = [["chats", "chien", "canapé rouge"]] * 8


def request_checks(translator: Translator) -> None:
    """What serve.py's /translate does with the request's text before the queue (a cost and the refusals)."""
    forced = encode_prefixes(translator.tokenizers, translator.normalizer, PREFIXES, len(SENTENCES))
    checked_constraints(translator, CONSTRAINTS, len(SENTENCES), forced, translator.decode)
    for sentence, prefix in zip(SENTENCES, PREFIXES):
        translator.count_pieces(sentence, prefix)


def median_seconds(work, rounds: int, repeats: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeats):
            work()
        times.append((time.perf_counter() - started) / repeats)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    translator = Translator.from_run(args.run, device="cpu")
    for _ in range(20):
        request_checks(translator)  # warm: SentencePiece's caches, the first allocations
    checks = median_seconds(lambda: request_checks(translator), args.rounds, 100)
    translate = median_seconds(lambda: translator.translate(SENTENCES, prefixes=PREFIXES, constraints=CONSTRAINTS),
                               args.rounds, 1)
    figures = {"request": "8 sentences of 14 words, each with a prefix and 3 constraint phrases",
               "beam": translator.decode.beam_size, "precision": translator.describe()["precision"],
               "checks_ms": round(checks * 1e3, 3), "translate_ms": round(translate * 1e3, 1),
               "checks_share_of_translate": round(checks / translate, 5)}
    print(figures)
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
