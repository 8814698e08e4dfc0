"""Data pipeline: download → normalize/read → leakage-free split → SentencePiece → encoded arrays → batches."""
