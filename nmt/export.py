"""`nmt export`: a trained Transformer run → a CTranslate2 model directory (the CPU/GPU inference engine).

The weights map one to one onto `ctranslate2.specs.TransformerSpec`: pre- or post-LN layers, fused Q/K/V
projections, our own sinusoidal table (CTranslate2's default orders sin/cos differently), sqrt(d)-scaled and tied
embeddings. The SentencePiece model(s) and normalizer.json are copied beside it, so the export translates text on its
own (`nmt translate --engine ctranslate2 --model DIR`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import torch

from nmt.data.normalizer import Normalizer
from nmt.data.tokenizer import PAD_ID, Tokenizers
from nmt.errors import NMTError
from nmt.models.transformer import Transformer
from nmt.translator import Translation, Translator

QUANTIZATIONS = ("float32", "int8", "bf16", "int8_float32", "float16", "int8_bfloat16")
INSTALL_HINT = "pip install 'nmt[export]' (or pip install ctranslate2)"


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise NMTError(f"CTranslate2 is not installed: {INSTALL_HINT}") from None
    return ctranslate2


def _vocabulary(processor) -> list[str]:
    # CTranslate2 names padding "<blank>"; our other specials (<unk>, <s>, </s>) are its defaults already.
    return ["<blank>" if i == PAD_ID else processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def _numpy(tensor):
    # A copy: the converter quantizes its arrays in place, and .numpy() of a CPU float tensor shares its memory
    # (an int8 export would otherwise rewrite the live model's weights).
    return tensor.detach().float().cpu().numpy().copy()


def _set_linear(spec, weight, bias=None) -> None:
    spec.weight = _numpy(weight)
    if bias is not None:
        spec.bias = _numpy(bias)


def _set_norm(spec, norm) -> None:
    spec.gamma, spec.beta = _numpy(norm.weight), _numpy(norm.bias)


def _set_self_attention(spec, attention, residual) -> None:
    # Q and the fused K;V rows of kv_proj make CTranslate2's fused Q;K;V projection.
    _set_linear(spec.linear[0], torch.cat([attention.q_proj.weight, attention.kv_proj.weight]),
                torch.cat([attention.q_proj.bias, attention.kv_proj.bias]))
    _set_linear(spec.linear[1], attention.out_proj.weight, attention.out_proj.bias)
    _set_norm(spec.layer_norm, residual.norm)


def _set_cross_attention(spec, attention, residual) -> None:
    _set_linear(spec.linear[0], attention.q_proj.weight, attention.q_proj.bias)
    _set_linear(spec.linear[1], attention.kv_proj.weight, attention.kv_proj.bias)
    _set_linear(spec.linear[2], attention.out_proj.weight, attention.out_proj.bias)
    _set_norm(spec.layer_norm, residual.norm)


def _set_ffn(spec, ff, residual) -> None:
    _set_linear(spec.linear_0, ff[0].weight, ff[0].bias)  # ff: Linear, ReLU, Dropout, Linear
    _set_linear(spec.linear_1, ff[3].weight, ff[3].bias)
    _set_norm(spec.layer_norm, residual.norm)


def _set_inputs(spec, embedding, positions) -> None:
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _numpy(embedding.weight)
    spec.scale_embeddings = True  # × sqrt(d), as PositionalEncoding does
    spec.position_encodings.encodings = _numpy(positions.table)


def transformer_spec(model: Transformer, tokenizers: Tokenizers):
    """Our Transformer as a ctranslate2.specs.TransformerSpec with every weight set."""
    _ctranslate2()
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as specs

    pre_norm = isinstance(model.encoder_norm, torch.nn.LayerNorm)  # post-LN stacks end in Identity
    spec = specs.TransformerSpec.from_config((len(model.encoder_layers), len(model.decoder_layers)),
                                             model.encoder_layers[0].self_attn.num_heads, pre_norm=pre_norm,
                                             activation=common_spec.Activation.RELU)
    _set_inputs(spec.encoder, model.src_embed, model.positions)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers):
        _set_self_attention(layer_spec.self_attention, layer.self_attn, layer.res_attn)
        _set_ffn(layer_spec.ffn, layer.ff, layer.res_ff)
    _set_inputs(spec.decoder, model.tgt_embed, model.positions)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers):
        _set_self_attention(layer_spec.self_attention, layer.self_attn, layer.res_self)
        _set_cross_attention(layer_spec.attention, layer.cross_attn, layer.res_cross)
        _set_ffn(layer_spec.ffn, layer.ff, layer.res_ff)
    if pre_norm:
        _set_norm(spec.encoder.layer_norm, model.encoder_norm)
        _set_norm(spec.decoder.layer_norm, model.decoder_norm)
    _set_linear(spec.decoder.projection, model.head.weight)
    spec.register_source_vocabulary(_vocabulary(tokenizers.source))
    spec.register_target_vocabulary(_vocabulary(tokenizers.target))
    spec.config.add_source_eos = True  # our sources end with </s>
    spec.config.decoder_start_token = "<s>"
    spec.config.layer_norm_epsilon = model.encoder_layers[0].res_ff.norm.eps
    return spec


def _converter(model: Transformer, tokenizers: Tokenizers):
    """A ctranslate2 Converter (the documented route for custom models) that hands over our spec."""
    _ctranslate2()
    from ctranslate2.converters.converter import Converter

    class NMTConverter(Converter):
        def _load(self):
            return transformer_spec(model, tokenizers)

    return NMTConverter()


def export_ctranslate2(translator: Translator, output_dir: Path, quantization: str = "float32",
                       force: bool = False) -> Path:
    """Write the CTranslate2 model of `translator` (a Transformer run) with its tokenizer and normalizer."""
    model = translator.model
    if not isinstance(model, Transformer):
        raise NMTError(f"CTranslate2 export needs a Transformer; this run is a {type(model).__name__} "
                       "(CTranslate2 has no RNN decoder)")
    if quantization not in QUANTIZATIONS:
        raise NMTError(f"unknown quantization {quantization!r}: use one of {', '.join(QUANTIZATIONS)}")
    output_dir = Path(output_dir)
    if output_dir.exists() and not force:
        raise NMTError(f"{output_dir} exists; pass --force to replace it")
    converter = _converter(model.float().cpu().eval(), translator.tokenizers)
    staging = output_dir.with_name(f".{output_dir.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        converter.convert(str(staging), quantization=quantization, force=True)
        for name in Tokenizers.files(translator.tokenizers.joint):
            shutil.copyfile(translator.run.directory / name, staging / name)
        (staging / "normalizer.json").write_text(json.dumps(translator.normalizer.__dict__) + "\n")
        (staging / "nmt_export.json").write_text(json.dumps({
            "checkpoint": str(translator.checkpoint), "quantization": quantization,
            "decode": {"beam_size": translator.decode.beam_size, "max_len_a": translator.decode.max_len_a,
                       "max_len_b": translator.decode.max_len_b, "max_input_tokens": translator.decode.max_input_tokens,
                       "batch_size": translator.decode.batch_size}}, indent=2) + "\n")
        if output_dir.exists():
            shutil.rmtree(output_dir)
        staging.rename(output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


class CTranslate2Translator:
    """Text → text with an exported model: the same normalization, SentencePiece and length limits as nmt's
    own Translator. CTranslate2 normalizes beam scores by |Y|^α (fairseq's rule), not Wu et al.'s penalty."""

    def __init__(self, model_dir: Path, device: str = "cpu", compute_type: str = "default", threads: int = 0,
                 warn: Callable[[str], None] | None = None):
        ctranslate2 = _ctranslate2()
        model_dir = Path(model_dir)
        if not (model_dir / "model.bin").is_file():
            raise NMTError(f"{model_dir} is not a CTranslate2 export (no model.bin); run `nmt export` first")
        self.tokenizers = Tokenizers.from_dir(model_dir)
        self.normalizer = Normalizer(**json.loads((model_dir / "normalizer.json").read_text(encoding="utf-8")))
        self.settings = json.loads((model_dir / "nmt_export.json").read_text(encoding="utf-8"))["decode"]
        self.warn = warn or (lambda message: None)
        self.engine = ctranslate2.Translator(str(model_dir), device="cuda" if device == "cuda" else "cpu",
                                             compute_type=compute_type, intra_threads=threads)

    def _pieces(self, sentence: str) -> list[str]:
        pieces = self.tokenizers.source.encode(self.normalizer.source(sentence), out_type=str)
        limit = self.settings["max_input_tokens"] - 1
        if len(pieces) > limit:
            self.warn(f"input of {len(pieces)} pieces truncated to {limit}: {sentence[:40]!r}...")
            pieces = pieces[:limit]
        return pieces

    def translate(self, sentences: list[str], beam_size: int | None = None, length_penalty: float = 1.0,
                  batch_size: int | None = None) -> list[Translation]:
        beam = beam_size or self.settings["beam_size"]
        pieces = [self._pieces(s) for s in sentences]
        results = [Translation(s, "", p, []) for s, p in zip(sentences, pieces)]
        todo = [i for i, p in enumerate(pieces) if p]
        if todo:
            longest = max(len(pieces[i]) for i in todo) + 1
            outputs = self.engine.translate_batch(
                [pieces[i] for i in todo], beam_size=beam, length_penalty=length_penalty,
                max_batch_size=batch_size or self.settings["batch_size"], batch_type="examples",
                max_decoding_length=int(self.settings["max_len_a"] * longest) + self.settings["max_len_b"])
            for i, output in zip(todo, outputs):
                tokens = output.hypotheses[0]
                results[i].target_pieces = tokens
                results[i].text = self.normalizer.clean(self.tokenizers.target.decode(tokens))
        return results
