"""Encoder–decoder models behind one training interface and one decoding interface (see base.py)."""

from nmt.models.builder import build_model

__all__ = ["build_model"]
