"""Text in, text out: normalization, SentencePiece, length-sorted batches, search, detokenization."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import torch

from nmt.config import DecodeConfig
from nmt.data.batching import source_batch
from nmt.data.corpus import Normalizer
from nmt.data.tokenizer import Tokenizers
from nmt.errors import NMTError
from nmt.models.base import EncoderDecoder
from nmt.models.transformer import Transformer
from nmt.search import beam_search, greedy_search


@dataclass
class Translation:
    source: str
    text: str
    source_pieces: list[str]
    target_pieces: list[str]
    attention: torch.Tensor | None = None  # (target pieces + EOS, source pieces + EOS)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class Translator:
    def __init__(self, model: EncoderDecoder, tokenizers: Tokenizers, normalizer: Normalizer, decode: DecodeConfig,
                 device: torch.device, autocast_dtype: torch.dtype | None = None, warn: Callable[[str], None] = _warn):
        self.model, self.tokenizers, self.normalizer, self.decode = model, tokenizers, normalizer, decode
        self.device, self.autocast_dtype, self.warn = device, autocast_dtype, warn

    def select_attention(self, layer: int = -1, head: int | None = None) -> None:
        """Which cross-attention a Transformer reports (others have one attention and ignore this)."""
        if isinstance(self.model, Transformer):
            layers, heads = len(self.model.decoder_layers), self.model.decoder_layers[0].cross_attn.num_heads
            if not -layers <= layer < layers or (head is not None and not 0 <= head < heads):
                raise NMTError(f"this model has {layers} decoder layers and {heads} heads; "
                               f"got layer {layer}, head {head}")
            self.model.attention_layer, self.model.attention_head = layer, head

    def _encode(self, sentence: str) -> list[int]:
        ids = self.tokenizers.source.encode(self.normalizer.source(sentence))
        limit = self.decode.max_input_tokens - 1  # room for EOS
        if len(ids) > limit:
            self.warn(f"input of {len(ids)} pieces truncated to {limit}: {sentence[:40]!r}...")
            ids = ids[:limit]
        return ids

    def translate(self, sentences: list[str], beam_size: int | None = None,
                  need_attention: bool = False) -> list[Translation]:
        """Translate in length-sorted batches (less padding) and return results in input order."""
        beam = self.decode.beam_size if beam_size is None else beam_size
        need_attention = need_attention and self.model.has_attention
        encoded = [self._encode(s) for s in sentences]
        results: list[Translation | None] = [None] * len(sentences)
        for i, ids in enumerate(encoded):
            if not ids:  # empty or whitespace-only input keeps its line, untranslated
                results[i] = Translation(sentences[i], "", [], [])
        order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
        self.model.eval()
        for start in range(0, len(order), self.decode.batch_size):
            chunk = order[start:start + self.decode.batch_size]
            hyps = self._search(source_batch([encoded[i] for i in chunk]).to(self.device), beam, need_attention)
            for j, i in enumerate(chunk):
                tokens = hyps.tokens[j]
                # Byte fallback can emit line breaks or control bytes: one output line per input line, always.
                results[i] = Translation(sentences[i], self.normalizer.clean(self.tokenizers.target.decode(tokens)),
                                         [], [])
                if need_attention:  # pieces label the heatmap axes
                    results[i].source_pieces = [self.tokenizers.source.id_to_piece(t) for t in encoded[i]] + ["</s>"]
                    results[i].target_pieces = [self.tokenizers.target.id_to_piece(t) for t in tokens] + ["</s>"]
                    results[i].attention = hyps.attention[j][:, :len(encoded[i]) + 1]
        return results  # type: ignore[return-value]

    def translate_stream(self, lines: Iterable[str], beam_size: int | None = None,
                         chunk_size: int | None = None) -> Iterator[str]:
        """Translate an unbounded stream in chunks (default: 4 batches), one output line per input line."""
        chunk_size = chunk_size or self.decode.batch_size * 4
        chunk: list[str] = []
        for line in lines:
            chunk.append(line.rstrip("\n"))
            if len(chunk) >= chunk_size:
                yield from (t.text for t in self.translate(chunk, beam_size))
                chunk = []
        if chunk:
            yield from (t.text for t in self.translate(chunk, beam_size))

    def _search(self, src: torch.Tensor, beam: int, need_attention: bool):
        autocast = (torch.autocast(self.device.type, dtype=self.autocast_dtype) if self.autocast_dtype
                    else contextlib.nullcontext())
        with autocast:
            if beam == 1:
                return greedy_search(self.model, src, self.decode.max_len_a, self.decode.max_len_b, need_attention)
            return beam_search(self.model, src, beam, self.decode.length_penalty, self.decode.max_len_a,
                               self.decode.max_len_b, need_attention)

