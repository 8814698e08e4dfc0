"""nmt: end-to-end neural machine translation (any language pair; English→French built in) with seq2seq,
Bahdanau, Luong and Transformer."""

__version__ = "0.1.0"
