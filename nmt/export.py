"""`nmt export`: a trained Transformer run → a CTranslate2 model directory (the CPU/GPU inference engine).

The weights map one to one onto `ctranslate2.specs.TransformerSpec`: pre- or post-LN layers, fused Q/K/V
projections, our own sinusoidal table (CTranslate2's default orders sin/cos differently), sqrt(d)-scaled and tied
embeddings. The SentencePiece model(s) and normalizer.json are copied beside it, so the export translates text on its
own (`nmt translate --engine ctranslate2 --model DIR`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import torch

from nmt.atomic import install_dir, staging_dir, unwritable_reason
from nmt.ct2_engine import EXPORT_METADATA, import_ctranslate2 as _ctranslate2
from nmt.data.tokenizer import PAD_ID, Tokenizers
from nmt.errors import NMTError
from nmt.models.transformer import Transformer
from nmt.translator import Translator

# --quantization: CTranslate2's names, and bf16 (nmt's name for it elsewhere, as in decode.precision), which
# CTranslate2 calls bfloat16: passed on as it was, bf16 was refused by the converter as an internal error.
QUANTIZATIONS = {name: name for name in ("float32", "float16", "bfloat16", "int8", "int8_float32", "int8_float16",
                                         "int8_bfloat16", "int16")} | {"bf16": "bfloat16"}


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


def check_output_dir(output_dir: Path, run_dir: Path | None, force: bool) -> None:
    """Refuse an output that would overwrite the run (it, inside it, or around it) or anything but an old export."""
    out = Path(output_dir).resolve()
    if run_dir is not None:
        run = Path(run_dir).resolve()
        if out == run or run in out.parents or out in run.parents:
            raise NMTError(f"{output_dir} is the run directory {run_dir}, lies inside it or contains it: "
                           "export to a directory of its own")
    # An empty folder made for the export (`mkdir out && nmt export -o out`) holds nothing to lose: it was "exists;
    # pass --force", and then, with --force, "not an nmt export".
    made_for_it = out.is_dir() and not out.is_symlink() and not any(out.iterdir())
    if made_for_it or (not out.exists() and not out.is_symlink()):
        # Written beside the target and renamed into place: its parent takes the files.
        reason = unwritable_reason(Path(output_dir).parent if made_for_it else output_dir)
        if reason:
            raise NMTError(f"cannot write the export to {output_dir}: {reason}")
        return
    if not force:
        raise NMTError(f"{output_dir} exists; pass --force to replace it")
    if out.is_symlink() or not out.is_dir() or not (out / EXPORT_METADATA).is_file():
        raise NMTError(f"{output_dir} exists and is not an nmt export (no {EXPORT_METADATA}); --force only "
                       "replaces a previous export: choose another directory")


def export_ctranslate2(translator: Translator, output_dir: Path, quantization: str = "float32",
                       force: bool = False) -> Path:
    """Write the CTranslate2 model of `translator` (a Transformer run) with its tokenizer, normalizer and the run's
    whole decode configuration (what the CTranslate2 engine decodes with)."""
    model = translator.model
    if not isinstance(model, Transformer):
        raise NMTError(f"CTranslate2 export needs a Transformer; this run is a {type(model).__name__} "
                       "(CTranslate2 has no RNN decoder)")
    if quantization not in QUANTIZATIONS:
        raise NMTError(f"unknown quantization {quantization!r}: use one of {', '.join(QUANTIZATIONS)}")
    quantization = QUANTIZATIONS[quantization]
    output_dir = Path(output_dir)
    check_output_dir(output_dir, translator.run.directory if translator.run else None, force)
    converter = _converter(model.float().cpu().eval(), translator.tokenizers)
    staging = staging_dir(output_dir)
    try:
        converter.convert(str(staging), quantization=quantization, force=True)
        for name in Tokenizers.files(translator.tokenizers.joint):
            shutil.copyfile(translator.run.directory / name, staging / name)
        (staging / "normalizer.json").write_text(json.dumps(translator.normalizer.__dict__) + "\n")
        (staging / EXPORT_METADATA).write_text(json.dumps({
            "checkpoint": str(translator.checkpoint), "quantization": quantization,
            "languages": [translator.source_lang, translator.target_lang],
            "max_target_positions": model.max_target_positions,  # bounds the prefixes and targets it takes
            "decode": dataclasses.asdict(translator.decode),
            "data": dataclasses.asdict(translator.config.data) if translator.config else None,
            "prepared_data": str(translator.trained_on) if translator.trained_on else None}, indent=2) + "\n")
        install_dir(staging, output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir
