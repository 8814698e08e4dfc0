"""nmt: end-to-end neural machine translation (any language pair; English→French built in) with seq2seq,
Bahdanau, Luong and Transformer."""

import time

__version__ = "0.1.0"
# When this process began, near enough (nmt is what `python -m nmt` imports first): `nmt train` says how long it took
# to start training (imports, data, model, device), a part of every time-to-BLEU.
PROCESS_STARTED = time.perf_counter()
