"""nmt: end-to-end neural machine translation (English→French) with seq2seq, Bahdanau, Luong and Transformer."""

__version__ = "0.1.0"
