"""Typed configuration: YAML → dataclasses once, validated before any work starts.

Code below the CLI receives these objects (or a few of their fields), never raw dicts.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import reprlib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmt.errors import ConfigError, warn

BUILTIN_CORPUS = "tatoeba-fra-eng"
D2L_CORPUS_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
# sha256 of fra.txt in the manythings.org release of 2019-04-07 (the d2l.ai copy); the content hash is the one
# to trust because mirrors repack the zip.
FRA_TXT_SHA256 = "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104"


INT64_MAX = 2**63 - 1
# A megaflop per second: no device trains slower (a 2-core CPU's emulated bf16 matmuls measured ~0.001 TFLOP/s).
MIN_PEAK_TFLOPS = 1e-6


def _check(**rules: Any) -> dict:
    """Field metadata read by `validate`: gt/ge/le bounds and `choices`."""
    return rules


def _data(default: Any, fingerprint: bool = True, **rules: Any):
    """A data field; `fingerprint=False` for settings that cannot change the prepared data (where it comes from).

    Every fingerprinted field names the prepared directory and must match on resume: a new field is covered the
    moment it is declared.
    """
    return field(default=default, metadata={**rules, "fingerprint": fingerprint})


def _model(default: Any, shape: bool, **rules: Any):
    """A model field; `shape=True` when it fixes the parameters (checked on resume, stored as the model's arguments)."""
    return field(default=default, metadata={**rules, "shape": shape})


def _train(default: Any, data_order: bool = False, **rules: Any):
    """A train field; `data_order=True` when changing it on resume changes which batches come next."""
    return field(default=default, metadata={**rules, "data_order": data_order})


@dataclass
class DataConfig:
    """Corpus, normalization, split and tokenizer: shared by every model config."""

    # What to train on: `tatoeba-fra-eng` (the built-in English–French pairs, downloaded from corpus_url), or a path or
    # URL to a file of pairs (TSV, CSV, JSON lines or TMX, plain or compressed: nmt/data/pair_formats.py). Or, instead,
    # two line-aligned plain-text files (source_file + target_file). nmt/data/sources.py.
    corpus: str = _data(BUILTIN_CORPUS, fingerprint=False)
    source_file: str = _data("", fingerprint=False)
    target_file: str = _data("", fingerprint=False)
    # Your own valid/test sets (line-aligned files; a source repeated on several lines gathers several references)
    # instead of the hashed split; training pairs whose source is in them are dropped (no leakage).
    valid_source_file: str = _data("", fingerprint=False)
    valid_target_file: str = _data("", fingerprint=False)
    test_source_file: str = _data("", fingerprint=False)
    test_target_file: str = _data("", fingerprint=False)
    # Language codes (ISO 639, e.g. en, fr, de, pt-BR): names in reports, the page, /health and the export. Empty: the
    # built-in corpus's own (en → fr, or fr → en with reverse); a corpus of your own must name them.
    source_lang: str = _data("", fingerprint=False)
    target_lang: str = _data("", fingerprint=False)
    reverse: bool = _data(False)  # swap the two sides: French→English from the built-in corpus
    # The columns of a data.corpus of your own that hold the source and the target text, counted from 1 as `cut -f`
    # counts them. Empty (null): the ones a header line names by language, else 1 and 2. tatoeba.org's exports are
    # id<TAB>sentence<TAB>id<TAB>sentence: 2 and 4.
    source_column: int | None = _data(None, ge=1, le=1000)
    target_column: int | None = _data(None, ge=1, le=1000)
    corpus_url: str = _data(D2L_CORPUS_URL, fingerprint=False)
    corpus_sha256: str = _data(FRA_TXT_SHA256, fingerprint=False)
    # False accepts another release (e.g. a newer 3-column manythings.org zip)
    verify_checksum: bool = _data(True, fingerprint=False)
    # Normalization per side; empty (null) = the corpus's default: for the built-in corpus the English side is
    # lowercased with the space d2l.ai puts before punctuation removed (so "i'm home ." == "I'm home."), the French
    # side kept as it is, whichever side each is on; for a corpus of your own, neither.
    lowercase_source: bool | None = _data(None)
    lowercase_target: bool | None = _data(None)
    join_punctuation_source: bool | None = _data(None)  # "home ." → "home."
    join_punctuation_target: bool | None = _data(None)
    unicode_nfc: bool = _data(True)
    remove_control_chars: bool = _data(True)  # and the invisible U+200B (zero-width space), U+2060, U+FEFF (BOM)
    # Keep U+200C/U+200D, the zero-width (non-)joiners: spelling in Persian, Indic scripts and emoji. Empty (null):
    # kept, or, fine-tuning, as the run whose tokenizer this data takes had them (runs before this setting: removed).
    keep_joiners: bool | None = _data(None)
    max_words: int = _data(50, ge=1)  # pairs longer than this (either side) are dropped
    # ... and so are pairs longer than this in subword pieces (a 1 MB "word" is one word but a million pieces).
    max_pieces: int = _data(256, ge=4, le=4096)
    # Training pairs whose sides differ in length, in pieces, by more than this factor are dropped (0: none): Moses'
    # clean-corpus-n.perl -ratio, which fairseq's prepare scripts run (1.5 in words for IWSLT; 9 its default), for
    # the misaligned pairs of a crawled corpus. Pieces, so that it holds for unspaced languages (a Chinese sentence
    # is one "word"). Valid and test are scored as they are. Off by default: on Tatoeba, aligned by hand, 3 drops 98
    # true translations, short English with longer French (results/prepare-length-ratio-tatoeba-cpu-bf16.json).
    max_length_ratio: float = _data(0.0, ge=0.0)
    # A line of one's own training text that holds no pair (a missing tab or column, a byte that is not UTF-8, a
    # broken CSV or JSON line): "error" stops preparation naming it; "skip" drops its pair, counted with the empty
    # ones, and names the first few in prepare's log (pandas' on_bad_lines; for a crawled corpus of millions of
    # lines). Over half the lines bad is an error either way. Held-out files of one's own are scored whole: an error.
    bad_lines: str = _data("error", choices=("error", "skip"))
    valid_fraction: float = _data(0.017, gt=0.0, lt=0.5)  # of distinct source sentences
    test_fraction: float = _data(0.017, gt=0.0, lt=0.5)
    # At most this many distinct source sentences in each hashed valid/test split (0: no cap), the ones lowest by the
    # split's hash; the rest train. For a corpus of millions of pairs, whose 1.7% are tens of thousands of sentences
    # to decode at every validation and evaluation (a WMT test set holds ~3,000). Held-out files of one's own are kept
    # whole.
    max_heldout_sources: int = _data(0, ge=0)
    split_salt: str = _data("nmt-split-v1")
    vocab_size: int = _data(8000, ge=64, le=1_000_000)
    joint_vocab: bool = _data(True)
    # SentencePiece's model: unigram or bpe subwords, or, as JoeyNMT's `level` offers, characters (vocab_size caps
    # them: the commonest kept) or whole words (the d2l.ai textbook's vocabulary: a word outside it is <unk>, so
    # byte_fallback must be off, whose bytes of an unseen word would decode with its "▁" marker as text).
    tokenizer_type: str = _data("unigram", choices=("unigram", "bpe", "char", "word"))
    byte_fallback: bool = _data(True)
    # SentencePiece's own range (0.1.99 to 0.2.3): below 0.98 its trainer stops with an INTERNAL error, after the
    # corpus was read and normalized.
    character_coverage: float = _data(0.9999, ge=0.98, le=1.0)
    # A run directory whose SentencePiece model(s) and normalization this data takes instead of training its own
    # (train.init_from sets it to that run: fine-tuned weights need the ids they were trained on). The five settings
    # above and unset normalization then follow that run; explicit normalization must agree with it. nmt/finetune.py.
    tokenizer_from: str = _data("", fingerprint=False)
    # Filled in by nmt from tokenizer_from: the borrowed model files' sha256, which names the prepared data (so a
    # finished run's data is found again without the run it came from).
    tokenizer_sha256: str = _data("")
    # Subword regularization (0: off; Kudo 2018, as JoeyNMT's and OpenNMT-py's alpha and nbest_size): the training
    # pairs are also encoded in `subword_samples` segmentations, each drawn from the unigram model's `subword_nbest`
    # best with probability proportional to P(segmentation)^alpha, and epoch e trains on draw e mod subword_samples:
    # the model meets "kitchen" as "▁kitchen" in one epoch and "▁kit ch en" in another. Valid, test and translation
    # keep the best segmentation. Drawn in `nmt prepare`, reproducibly (nmt/data/subword_sampling.py). Unigram only:
    # SentencePiece's BPE-dropout draws from a generator that no seed makes repeat.
    subword_alpha: float = _data(0.0, ge=0.0, le=1.0)
    subword_nbest: int = _data(16, ge=2, le=256)
    subword_samples: int = _data(4, ge=1, le=64)  # segmentations drawn, each one more copy of the training tokens


@dataclass
class ModelConfig:
    arch: str = _model("transformer", shape=True, choices=("seq2seq", "bahdanau", "luong", "transformer"))
    embed_dim: int = _model(256, shape=True, ge=1, le=16384)  # d_model for the Transformer
    hidden_size: int = _model(512, shape=True, ge=1, le=16384)  # RNN state size (per direction)
    num_layers: int = _model(2, shape=True, ge=1, le=64)  # per encoder and per decoder
    dropout: float = _model(0.1, shape=False, ge=0.0, lt=1.0)
    # Luong only: score function, local-p window half-width D, input feeding.
    attention: str = _model("general", shape=True, choices=("dot", "general", "concat", "local-p"))
    local_window: int = _model(5, shape=False, ge=1, le=4096)  # D; data.max_pieces' cap: wider covers any source
    input_feeding: bool = _model(False, shape=True)
    # Transformer only.
    num_heads: int = _model(4, shape=True, ge=1, le=256)
    ff_dim: int = _model(1024, shape=True, ge=1, le=65536)
    pre_norm: bool = _model(True, shape=True)
    tie_embeddings: bool = _model(True, shape=True)  # effective only with a joint vocabulary
    # Weight initialization: "default" keeps each layer's PyTorch default; "xavier" draws every weight matrix (linear
    # and recurrent) Xavier-uniform and zeroes the biases, as JoeyNMT does. Embeddings keep their own scheme.
    init: str = _model("default", shape=False, choices=("default", "xavier"))
    # Rows of the sinusoidal position table: the longest source or target the Transformer can see.
    max_positions: int = _model(1024, shape=False, ge=8, le=65536)
    # Transformer under bf16 autocast: carry the residual stream and the LayerNorms in bf16, as fairseq's --bf16 and
    # Megatron do, instead of autocast's fp32 (fp32 embeddings, LayerNorm upcast): half the bytes through every
    # elementwise kernel, no casts around a LayerNorm. Its statistics still accumulate in fp32 inside the kernel.
    # No effect in fp32 or under fp16 (whose range a residual stream could overflow). Weights are the same either way.
    bf16_residual: bool = _model(False, shape=False)
    # Transformer only: dropout on the attention probabilities and on the feed-forward's hidden activations
    # (fairseq's --attention-dropout and --activation-dropout, 0 by default there); unset, `dropout`, as the Annotated
    # Transformer drops all three. Zero makes the update cheaper on a GPU (no mask drawn, SDPA without dropout).
    attention_dropout: float | None = _model(None, shape=False, ge=0.0, lt=1.0)
    activation_dropout: float | None = _model(None, shape=False, ge=0.0, lt=1.0)


@dataclass
class TrainConfig:
    max_steps: int = field(default=100_000, metadata=_check(ge=1))
    max_epochs: int = field(default=100, metadata=_check(ge=1))
    seed: int = _train(1234, data_order=True, ge=0)
    max_tokens: int = _train(4096, data_order=True, ge=1)  # per micro-batch, padded tokens of the longer side
    accum_steps: int = _train(1, data_order=True, ge=1)
    # 0: batches as tight as their sentences (a new shape almost every batch). k > 0: static shapes: both sides
    # padded to the sentences' longer side + 1 rounded up to a multiple of k, and every batch of a width filled to
    # max_tokens // width rows (empty rows and padding carry no loss), so training meets one shape per width, as
    # torch.compile without dynamic shapes (and CUDA graphs) needs. nmt/data/batching.py.
    length_multiple: int = _train(0, data_order=True, ge=0, le=1024)
    # 0: one sentence per row. L > 0 (Transformer only): sequence packing: each batch is max_tokens // L rows of L
    # positions on each side, every row several whole sentences (shuffled, first fit), attention kept within each
    # sentence and positions restarting at each: one static shape for the whole of training, with little padding.
    # L must hold the longest training sentence + 1 (checked when training starts).
    pack_length: int = _train(0, data_order=True, ge=0, le=65536)
    # Packed rows' attention: "sdpa" (F.scaled_dot_product_attention with the rows' block-diagonal mask as a tensor:
    # memory-efficient kernels) or "flex" (FlexAttention, compiled: the mask evaluated from the segment ids inside
    # one generated kernel; no attention dropout, GPU only; nmt/models/flex_masks.py).
    packed_attention: str = _train("sdpa", choices=("sdpa", "flex"))
    lr: float = field(default=5e-4, metadata=_check(gt=0.0))
    # linear: straight to zero at max_steps, or as time_budget_s runs out if that comes first (by the clock, so the
    # lr of a step then depends on the machine's speed, as the step the budget ends at does; nmt/optim.py); cosine:
    # half a cosine to zero over the same span (on the demo's valid split 39.49 BLEU against linear's 41.32 by the
    # clock, 39.52 against 40.09 at 1,900 updates each: results/demo-schedule-cosine-probe-cpu-bf16.json).
    # inverse_sqrt and constant warm up too; plateau starts at lr.
    schedule: str = field(default="inverse_sqrt",
                          metadata=_check(choices=("inverse_sqrt", "linear", "cosine", "plateau", "constant")))
    warmup_steps: int = field(default=4000, metadata=_check(ge=0))
    plateau_factor: float = field(default=0.5, metadata=_check(gt=0.0, lt=1.0))
    weight_decay: float = field(default=0.0001, metadata=_check(ge=0.0))
    clip_norm: float = field(default=1.0, metadata=_check(ge=0.0))  # 0 disables clipping
    label_smoothing: float = field(default=0.1, metadata=_check(ge=0.0, lt=1.0))
    # Target rows the fused loss projects to the vocabulary at a time (nmt/models/loss.py); 0: by device, as many as
    # make 4M logits on a CPU (16 MiB in fp32: 524 rows at 8k pieces, the bound that keeps its memory low) and 32.8M
    # on a GPU (4,096 rows at 8k pieces: fewer, larger products and fewer additions into the output matrix's
    # gradient; an H200's 32k update 8.5% faster than at 524 rows, results/gpu-profile-transformer-32k-*-h200.json).
    loss_block_rows: int = field(default=0, metadata=_check(ge=0, le=1 << 20))
    eval_every: int = field(default=1000, metadata=_check(ge=1))
    # Validation reads the first N source sentences (BLEU) and the first N pairs (dev loss); 0: the whole split.
    eval_max_sentences: int = field(default=0, metadata=_check(ge=0))
    # Sentences per greedy decoding batch in validation (fairseq's --batch-size-valid); 0: by device, as measured on
    # the valid split: 1,024 on a GPU (H100: 7,481 sentences/s against 1,294 at 128, the same translations;
    # results/gpu-greedy-batch-sizes-transformer-h100.json), decode.batch_size elsewhere (chosen on a CPU).
    eval_batch_size: int = field(default=0, metadata=_check(ge=0, le=100_000))
    # Dev BLEU by beam search of this width instead of greedy search (fairseq's --eval-bleu-args '{"beam": N}'):
    # best.pt and patience then follow the search the run will be translated with, at beam search's cost (beam 5: a
    # quarter of greedy's sentences/s on the demo model, results/sampling-demo-valid-cpu-bf16.json). The run's decode
    # settings (length penalty, length limits) apply; sampling never does.
    eval_beam_size: int = field(default=1, metadata=_check(ge=1, le=256))
    save_every: int = field(default=1000, metadata=_check(ge=1))
    # Also keep the weights of the last N saves as checkpoints/step-<step>.pt, for `nmt average`; 0 keeps none.
    keep_last: int = field(default=0, metadata=_check(ge=0, le=100))
    # Validate, save and translate with an exponential moving average of the weights (nmt/weight_average.py), the
    # optimizer training its own beside it (last.pt keeps both): fairseq's --ema-decay, Marian's
    # --exponential-smoothing. 0: off. The decay grows with the updates averaged, min(decay, (1 + n) / (10 + n)).
    # Off by default: on the demo model (valid, beam 5) +1.54 BLEU over the final weights under inverse_sqrt, nothing
    # under the demo's linear-to-zero schedule, which won in its 420 s (results/ema-demo-*-valid-cpu-avx2.json).
    ema_decay: float = field(default=0.0, metadata=_check(ge=0.0, lt=1.0))
    log_every: int = field(default=50, metadata=_check(ge=1))
    # Also write the metrics (train and valid records) as TensorBoard scalars under RUN/tensorboard, as JoeyNMT does
    # (`tensorboard --logdir runs`); needs `pip install 'nmt[tensorboard]'`. metrics.jsonl stays the record of truth:
    # the event files are rewritten from it at every session's start (nmt/tensorboard_log.py).
    tensorboard: bool = False
    patience: int = field(default=10, metadata=_check(ge=1))  # evaluations without a gain in best_metric: stop
    # What picks best.pt, counts patience and drives the plateau schedule: dev BLEU (greedy decoding of the valid
    # split), dev chrF, or dev loss (token NLL, lower is better; on a small or noisy dev set the smoothest). JoeyNMT's
    # early_stopping_metric, fairseq's --best-checkpoint-metric.
    best_metric: str = field(default="bleu", metadata=_check(choices=("bleu", "chrf", "loss")))
    # Validate a copy of the weights on a thread of its own while training goes on (nmt/background_validation.py):
    # for a GPU that waits on the host; a validation's outcome stops training (patience) at the next validation
    # point, one eval_every later than inline. Not with the plateau schedule, whose lr would wait on it too.
    eval_in_background: bool = False
    # Stop (validated and saved) once training has run this many seconds over all sessions; 0: no limit.
    time_budget_s: float = field(default=0.0, metadata=_check(ge=0.0))
    device: str = field(default="auto", metadata=_check(choices=("auto", "cpu", "cuda")))
    precision: str = field(default="auto", metadata=_check(choices=("auto", "fp32", "bf16", "fp16")))
    compile: bool = False
    # torch.compile's mode. reduce-overhead replays each compiled graph as a CUDA graph (one per batch shape, so it
    # needs train.length_multiple); on a CPU every mode compiles as default does.
    compile_mode: str = field(default="default", metadata=_check(choices=(
        "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")))
    # torch.compile's backend. inductor generates fused kernels (for an RNN, whose time loops a graph unrolls, that
    # takes minutes per batch width); cudagraphs generates nothing and replays the traced graph's own kernels as a
    # CUDA graph per batch shape (static shapes; on a CPU the traced graph runs eagerly, as aot_eager).
    compile_backend: str = field(default="inductor", metadata=_check(choices=("inductor", "cudagraphs")))
    # What torch.compile traces: the whole model, or (layers, the Transformer's) each repeated layer on its own, one
    # compilation shared by the six encoder layers and one by the six decoder layers, the output head with static
    # shapes too, the rest eager: less than half the compile time (transformer.yaml's first update on a 2-core CPU,
    # cold cache: 32.5 s against 72.8 s; results/compile-scope-cpu.json), which time-to-BLEU pays at every start
    # (torchtune compiles per layer too). The default stays `model` until a GPU shows what each gives per update.
    compile_scope: str = field(default="model", metadata=_check(choices=("model", "layers")))
    # The whole update (forward, backward, clipping, AdamW) captured as one CUDA graph per batch shape and replayed:
    # the host launches one graph, not ~1,700 kernels (nmt/graphed_update.py). Needs static shapes: packed rows
    # (train.pack_length, one shape) or train.length_multiple (a graph per width, any architecture); on a CPU, or
    # under torchrun, training runs eagerly (said in the log). With train.compile (inductor, a mode without CUDA
    # graphs of its own) the graph replays inductor's fused kernels.
    cuda_graph: bool = False
    nonfinite_loss: str = field(default="stop", metadata=_check(choices=("stop", "skip")))
    # CPU intra-op threads; 0: torch's default (one per CPU of the host), at most the CPUs this process may use (its
    # affinity and a container's CPU quota, which torch does not see). At most 1,024, above any CPU's count: tens of
    # thousands crash OpenMP (libgomp cannot create them and the process dies).
    threads: int = field(default=0, metadata=_check(ge=0, le=1024))
    # How many kernels oneDNN (bf16 matmuls on a CPU) keeps, one per matmul shape, as ONEDNN_PRIMITIVE_CACHE_CAPACITY
    # (which, set by the user, wins). Small keeps a bf16 run's memory flat; large saves remaking kernels, which on a
    # CPU with AMX costs small batches 40% of their tokens/s (nmt/cpu_memory.py). No effect on fp32 or a GPU.
    onednn_cache: int = field(default=16, metadata=_check(ge=0, le=65536))
    # Peak FLOP/s for the MFU figure in the log; 0: the GPU's bf16 peak from a table, or a matmul measured on CPU.
    # Else from MIN_PEAK_TFLOPS (below it the MFU overflowed to Infinity, which is no JSON) to an exaflop.
    peak_tflops: float = field(default=0.0, metadata=_check(ge=0.0, le=1e6))
    # Fine-tuning: a new run starts from this run's weights (a run directory: its averaged, best or last checkpoint,
    # as `nmt translate` picks; or a checkpoint file in one) and tokenizer; optimizer, schedule and step start
    # afresh. The model's shape must be the parent's. A run that has a last.pt resumes from it instead.
    init_from: str = ""


@dataclass
class DecodeConfig:
    beam_size: int = field(default=5, metadata=_check(ge=1, le=256))
    length_penalty: float = field(default=1.0, metadata=_check(ge=0.0, le=10.0))  # alpha (see length_normalization)
    # wu: score / ((5 + |Y|) / 6)^alpha (Wu et al. 2016); fairseq: score / |Y|^alpha. search.LengthNormalization.
    # Defaults chosen on the valid split (README: length normalization): fairseq's |Y|^1.0 with the patient stop was
    # best for the converged CPU model and beat Wu's rule for the early one.
    length_normalization: str = field(default="fairseq", metadata=_check(choices=("wu", "fairseq")))
    patient_stop: bool = True  # keep a sentence open while a live beam could still beat its best ended one
    max_len_a: float = field(default=1.5, metadata=_check(ge=0.0, le=100.0))  # max output = a * source length + b
    max_len_b: int = field(default=10, metadata=_check(ge=1, le=65536))
    batch_size: int = field(default=128, metadata=_check(ge=1, le=100_000))  # sentences per decoding batch
    # Longer inputs are truncated with a warning.
    max_input_tokens: int = field(default=256, metadata=_check(ge=2, le=65536))
    # auto: as train.precision's auto (device.autocast_dtype): bf16 autocast on CUDA and on CPUs with native bf16,
    # else fp32. Chosen on valid (results/decode-precision-cpu.json, demo model, 2-core AVX512-BF16 CPU, beam 5):
    # 31.82 BLEU in bf16 vs 31.79 in fp32, 164.6 vs 133.8 sentences/s. CTranslate2: the export's compute type.
    precision: str = field(default="auto", metadata=_check(choices=("auto", "fp32", "bf16")))
    # Sampling instead of search, for back-translation (sampled synthetic sources train better than beam search's:
    # Edunov et al. 2018): 1 = no sampling (greedy or beam search, as beam_size says); K > 1 = each piece drawn among
    # the K most probable; 0 = among the whole vocabulary. Then top-p keeps the smallest set of pieces whose
    # probability reaches p, the temperature divides the logits, and the seed fixes the draws (for the same input,
    # batch and settings). Sampling draws one continuation per sentence: beam_size must be 1; an n-best list is that
    # many draws, ranked. CTranslate2 takes the seed once, at load (nmt.ct2_engine).
    sampling_topk: int = field(default=1, metadata=_check(ge=0, le=1_000_000))
    sampling_topp: float = field(default=1.0, metadata=_check(gt=0.0, le=1.0))
    sampling_temperature: float = field(default=1.0, metadata=_check(gt=0.0, le=100.0))
    sampling_seed: int = field(default=0, metadata=_check(ge=0))  # at most INT64_MAX, as every int setting
    # Never repeat an n-gram of pieces within an output (fairseq's and CTranslate2's no_repeat_ngram_size): 0 = off.
    no_repeat_ngram_size: int = field(default=0, metadata=_check(ge=0, le=64))

    @property
    def samples(self) -> bool:
        return self.sampling_topk != 1


def _sampling_settings(decode: DecodeConfig) -> str:
    """The sampling settings a user set, e.g. 'top-p 0.5': 'top-k 0' alone read as a setting nobody gave."""
    settings = [f"top-k {decode.sampling_topk}"] if decode.sampling_topk > 1 else []
    if decode.sampling_topp < 1.0:
        settings.append(f"top-p {decode.sampling_topp:g}")
    if decode.sampling_temperature != 1.0:
        settings.append(f"temperature {decode.sampling_temperature:g}")
    return ", ".join(settings) or "over the whole vocabulary"


def sampler_settings_unused(decode: DecodeConfig) -> list[str]:
    """The sampler settings `decode` changes from their defaults (top-p, temperature) while it does not sample
    (decode.sampling_topk 1: search), where they have no effect."""
    if decode.samples:
        return []
    return [name for name in ("sampling_topp", "sampling_temperature") if getattr(decode, name) != 1.0]


def check_n_best(n_best: int, decode: DecodeConfig) -> None:
    """Beam search keeps `beam_size` hypotheses, so it can rank that many and no more; greedy search finds one;
    sampling draws any number, one sentence at a time (beam 1)."""
    if n_best < 1:
        raise ConfigError(f"n-best must be 1 or more, not {n_best}")
    if decode.samples:
        if decode.beam_size != 1:
            raise ConfigError(f"sampling ({_sampling_settings(decode)}) draws one continuation at a time: it takes "
                              f"beam 1, not {decode.beam_size} (an n-best list is that many draws)")
    elif n_best > decode.beam_size:
        raise ConfigError(f"an n-best list of {n_best} needs a beam of {n_best} or more (the beam is "
                          f"{decode.beam_size})")


def check_constraints(decode: DecodeConfig) -> None:
    """Lexical constraints steer beam search: its beams are shared out by how much of the phrases they hold, which
    greedy search (one beam) and sampling cannot do."""
    if decode.samples:
        raise ConfigError(f"constraints steer beam search; sampling ({_sampling_settings(decode)}) draws instead: "
                          "drop one of the two")
    if decode.beam_size < 2:
        raise ConfigError("constraints need beam search: a beam of 2 or more (--beam), not greedy search's 1")


@dataclass
class Config:
    name: str = "model"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}


# What JoeyNMT, fairseq and OpenNMT-py call a setting that nmt names otherwise: a user bringing a config over is told
# nmt's name (difflib finds `max_epoch`, not `learning_rate` → `lr`). Notes say where the meaning differs; a
# section-qualified name is a peer's name in that section only (decode.batch_size is nmt's own).
_PEER_NAMES = {
    "learning_rate": "train.lr", "train.batch_size": "train.max_tokens (nmt batches by tokens)",
    "batch_multiplier": "train.accum_steps", "update_freq": "train.accum_steps", "accum_count": "train.accum_steps",
    "gradient_accumulation_steps": "train.accum_steps", "max_update": "train.max_steps",
    "train_steps": "train.max_steps", "epochs": "train.max_epochs", "random_seed": "train.seed",
    "validation_freq": "train.eval_every", "valid_steps": "train.eval_every",
    "validate_interval_updates": "train.eval_every", "logging_freq": "train.log_every",
    "report_every": "train.log_every", "log_interval": "train.log_every", "save_interval_updates": "train.save_every",
    "tensorboard_logdir": "train.tensorboard (true: the run's tensorboard/ folder)",
    "tensorboard_log_dir": "train.tensorboard (true: the run's tensorboard/ folder)",
    "eval_bleu_args": "train.eval_beam_size (the beam of fairseq's JSON)",
    "average_decay": "train.ema_decay (the decay: 1 minus this setting)",
    "exponential_smoothing": "train.ema_decay (the decay: 1 minus this setting)",
    "save_checkpoint_steps": "train.save_every", "keep_last_ckpts": "train.keep_last",
    "keep_checkpoint": "train.keep_last", "keep_interval_updates": "train.keep_last",
    "clip_grad_norm": "train.clip_norm", "max_grad_norm": "train.clip_norm",
    "early_stopping_metric": "train.best_metric", "warmup_updates": "train.warmup_steps",
    "learning_rate_warmup": "train.warmup_steps", "scheduling": "train.schedule", "lr_scheduler": "train.schedule",
    "decay_method": "train.schedule", "use_cuda": "train.device", "fp16": "train.precision",
    "amp": "train.precision", "embedding_dim": "model.embed_dim", "encoder_embed_dim": "model.embed_dim",
    "word_vec_size": "model.embed_dim", "ff_size": "model.ff_dim", "encoder_ffn_embed_dim": "model.ff_dim",
    "transformer_ff": "model.ff_dim", "encoder_layers": "model.num_layers", "layers": "model.num_layers",
    "encoder_attention_heads": "model.num_heads", "heads": "model.num_heads", "rnn_size": "model.hidden_size",
    "tied_embeddings": "model.tie_embeddings", "share_all_embeddings": "model.tie_embeddings",
    "share_embeddings": "model.tie_embeddings", "layer_norm": "model.pre_norm", "beam": "decode.beam_size",
    "alpha": "decode.length_penalty", "lenpen": "decode.length_penalty", "temperature": "decode.sampling_temperature",
    "voc_limit": "data.vocab_size", "src_vocab_size": "data.vocab_size", "max_length": "data.max_pieces",
    "src_lang": "data.source_lang", "trg_lang": "data.target_lang", "tgt_lang": "data.target_lang",
    "lowercase": "data.lowercase_source and data.lowercase_target", "testing": "decode",
}


def _sections_holding(key: str) -> list[str]:
    """The config sections that have a setting of this name (`lr` → ["train"])."""
    return [section for section, cls in _SECTIONS.items() if key in {f.name for f in dataclasses.fields(cls)}]


# Settings added after the first release, with the value that release always used: they enter the fingerprint only
# when they differ from it, so English→French data prepared before them keeps its directory (and its runs resume).
_LATER_DATA_SETTINGS = {"reverse": False, "lowercase_target": False, "join_punctuation_source": True,
                        "join_punctuation_target": False, "unicode_nfc": True, "remove_control_chars": True,
                        "tokenizer_sha256": "", "source_column": None, "target_column": None, "max_length_ratio": 0.0,
                        "bad_lines": "error", "max_heldout_sources": 0, "subword_alpha": 0.0, "subword_nbest": 16,
                        "subword_samples": 4,
                        # Unlike the others, the value now used: text with no ZWNJ/ZWJ (the built-in corpus has none)
                        # prepares the same either way. Data prepared before from text with them stays as it was,
                        # and its manifest's normalizer, which its runs translate with, says so.
                        "keep_joiners": True}


def tsv_columns(cfg: DataConfig) -> tuple[int, int]:
    """The columns (counted from 1) of a data.corpus of one's own that hold the source and the target text."""
    return (cfg.source_column or 1, cfg.target_column or 2)


def fingerprint_settings(cfg: DataConfig) -> dict:
    """The data settings that decide the prepared data (and so its directory name), normalization resolved."""
    from nmt.data.sources import resolve_normalizer  # the corpus decides what "default" normalization means

    resolved = {**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.metadata["fingerprint"]},
                **dataclasses.asdict(resolve_normalizer(cfg))}
    return {k: v for k, v in resolved.items() if _LATER_DATA_SETTINGS.get(k, object()) != v}


def model_args(cfg: ModelConfig) -> dict:
    """The settings that fix a model's parameters: what a checkpoint stores to rebuild it (nanoGPT's model_args)."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.metadata["shape"]}


def data_order_settings(cfg: TrainConfig) -> dict:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.metadata.get("data_order")}


CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes that record CUDA graphs
# BCP 47 tags are case-insensitive (`EN`, `pt-br`), and locales write `pt_BR`: all were "not a language code".
_LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*")


def subword_sampling_refused(cfg: DataConfig) -> str:
    """Why data.subword_alpha cannot be used with this tokenizer ("" where it can)."""
    if not cfg.subword_alpha or cfg.tokenizer_type == "unigram":
        return ""
    why = ("SentencePiece's BPE-dropout draws from a generator that no seed makes repeat, and the same settings must "
           "prepare the same data" if cfg.tokenizer_type == "bpe" else
           f"a {cfg.tokenizer_type} vocabulary has one way to cut a sentence")
    return (f"data.subword_alpha draws among the segmentations of a unigram model: {why} (data.tokenizer_type "
            "unigram, or data.subword_alpha: 0)")


def decode_lengths(d: DecodeConfig) -> list[tuple[str, int]]:
    """The positions decoding may use, named: the longest input it reads and the longest output it may write
    (max_len_a × that + max_len_b, and the start token)."""
    return [("decode.max_input_tokens", d.max_input_tokens),
            ("decode.max_len_a * max_input_tokens + max_len_b + 1", int(d.max_len_a * d.max_input_tokens)
             + d.max_len_b + 1)]


def check_fits_positions(lengths: list[tuple[str, int]], positions: int | None, remedy: str) -> None:
    """Each named length within a Transformer's position table (`positions`; None: a model without one). Past it,
    decoding failed at the first sentence that long, with an error that named no setting."""
    for what, length in lengths if positions is not None else ():
        if length > positions:
            raise ConfigError(f"{what} = {length} exceeds model.max_positions {positions} (the Transformer's "
                              f"position table); {remedy}")


def check_consistency(cfg: Config) -> list[str]:
    """Rules across fields: raise ConfigError for what cannot work, return warnings for what is ignored."""
    m, d = cfg.model, cfg.decode
    if m.arch == "transformer":
        if m.embed_dim % m.num_heads:
            raise ConfigError(f"model.embed_dim {m.embed_dim} must be divisible by model.num_heads {m.num_heads}")
        if m.embed_dim % 2:
            raise ConfigError(f"model.embed_dim {m.embed_dim} must be even (sinusoidal positions come in pairs)")
        check_fits_positions([*decode_lengths(d), ("data.max_pieces + 1", cfg.data.max_pieces + 1)],
                             m.max_positions, "lower it or raise model.max_positions")
    if d.samples:
        check_n_best(1, d)  # sampling takes beam 1: said when the config loads, not at its first translation
    if cfg.data.tokenizer_type == "word" and cfg.data.byte_fallback:
        raise ConfigError("data.tokenizer_type word with data.byte_fallback: an unseen word would be spelt in bytes "
                          "with its '▁' marker, which decodes as that character, not a space; set "
                          "data.byte_fallback: false (an unseen word is then <unk>, as in a word vocabulary)")
    if refused := subword_sampling_refused(cfg.data):
        raise ConfigError(refused)
    source_column, target_column = tsv_columns(cfg.data)
    if source_column == target_column:
        raise ConfigError(f"data.source_column and data.target_column both read column {source_column} (unset: 1 "
                          "and 2): name two columns")
    if 0 < cfg.data.max_length_ratio < 1:
        raise ConfigError(f"data.max_length_ratio {cfg.data.max_length_ratio:g} would drop every pair (a longer side "
                          "over a shorter one is at least 1): set 0 (no filter) or 1 and more, e.g. 3")
    for key in ("source_lang", "target_lang"):
        code = getattr(cfg.data, key)
        if code and not _LANGUAGE_CODE.fullmatch(code):
            raise ConfigError(f"data.{key} {code!r} is not a language code (ISO 639, e.g. en, fr, de, pt-BR)")
    t = cfg.train
    if 0 < t.peak_tflops < MIN_PEAK_TFLOPS:
        raise ConfigError(f"train.peak_tflops {t.peak_tflops!r} is below any device's: set 0 (the GPU's peak from a "
                          f"table, or a matmul measured on CPU) or the device's peak, from {MIN_PEAK_TFLOPS:g}")
    if t.schedule in ("linear", "cosine") and t.warmup_steps >= t.max_steps:
        raise ConfigError(f"train.schedule {t.schedule} decays from train.warmup_steps {t.warmup_steps} to "
                          f"train.max_steps {t.max_steps}: warmup_steps must be smaller")
    graphs = (f"train.compile_backend {t.compile_backend}" if t.compile_backend == "cudagraphs"
              else f"train.compile_mode {t.compile_mode}" if t.compile_mode in CUDA_GRAPH_MODES else None)
    if t.compile and graphs and not (t.length_multiple or t.pack_length):
        raise ConfigError(f"{graphs} records a CUDA graph per batch shape: set "
                          "train.pack_length (e.g. 128) or train.length_multiple (e.g. 8) so that batches come in "
                          "static shapes")
    if t.compile and t.compile_scope == "layers":
        if m.arch != "transformer":
            raise ConfigError(f"train.compile_scope layers compiles the Transformer's repeated layers; a {m.arch} "
                              "model compiles whole (train.compile_scope: model)")
        if graphs:
            raise ConfigError(f"train.compile_scope layers and {graphs}: CUDA graphs of single layers would leave "
                              "the launches between them to the host; set train.cuda_graph for one graph of the "
                              "whole update, or compile the whole model (train.compile_scope: model)")
    if t.eval_in_background and t.schedule == "plateau":
        raise ConfigError("train.eval_in_background: the plateau schedule changes the lr at each validation's "
                          "outcome, which training would have to wait for; use another train.schedule, or validate "
                          "inline (train.eval_in_background: false)")
    if t.cuda_graph:
        if not (t.pack_length or t.length_multiple):
            raise ConfigError("train.cuda_graph captures an update per batch shape: set train.pack_length (e.g. "
                              "128, the Transformer's one shape) or train.length_multiple (e.g. 8, a shape per "
                              "width)")
        if t.compile and graphs:  # inductor's kernels without its own graphs are what a captured update wants
            raise ConfigError(f"train.cuda_graph and {graphs} are two ways to CUDA graphs: set one (train.compile "
                              "with compile_mode default or max-autotune-no-cudagraphs and the inductor backend "
                              "fuses the kernels that train.cuda_graph then captures)")
        if t.precision == "fp16":
            raise ConfigError("train.cuda_graph takes precision bf16 or fp32 (fp16's loss scaler decides on the host)")
    if t.pack_length:
        if m.arch != "transformer":
            raise ConfigError(f"train.pack_length packs several sentences into a row, which only the Transformer "
                              f"can keep apart (a {m.arch} model's recurrence runs along the row): set it to 0")
        if t.length_multiple:
            raise ConfigError("train.pack_length and train.length_multiple are two ways to static shapes: set one")
        if t.pack_length > t.max_tokens:
            raise ConfigError(f"train.pack_length {t.pack_length} exceeds train.max_tokens {t.max_tokens}: a batch "
                              "must hold at least one row")
    if t.packed_attention == "flex":
        _check_flex_attention(m, t)
    warnings = []
    for name, default in (("compile_mode", "default"), ("compile_backend", "inductor"), ("compile_scope", "model")):
        if getattr(t, name) != default and not t.compile:
            warnings.append(f"train.{name} {getattr(t, name)} has no effect without train.compile: true (ignored)")
    if t.schedule == "plateau" and t.warmup_steps != TrainConfig.warmup_steps:
        warnings.append(f"train.warmup_steps {t.warmup_steps} has no effect with train.schedule plateau, which starts "
                        "at train.lr (ignored)")
    if t.schedule in ("inverse_sqrt", "constant") and t.warmup_steps > t.max_steps:  # linear, cosine: an error
        # A short run of a config written for a long one (max_steps lowered, the default 4,000 warm-up kept) trained
        # at a fraction of its lr and learnt next to nothing, with no word of why.
        warnings.append(f"train.warmup_steps {t.warmup_steps} > train.max_steps {t.max_steps}: training ends with "
                        f"the learning rate still warming up (at most {t.max_steps / t.warmup_steps:.1%} "
                        f"of train.lr {t.lr:g}); lower train.warmup_steps")
    if t.compile and t.compile_backend == "cudagraphs" and t.compile_mode != "default":
        warnings.append(f"train.compile_mode {t.compile_mode} is inductor's: train.compile_backend cudagraphs "
                        "ignores it")
    defaults = ModelConfig()
    transformer_only = ("num_heads", "ff_dim", "pre_norm", "max_positions", "bf16_residual", "attention_dropout",
                        "activation_dropout")
    ignored = {"transformer": ("hidden_size", "attention", "local_window", "input_feeding"),
               "luong": transformer_only,
               "bahdanau": (*transformer_only, "attention", "local_window", "input_feeding"),
               "seq2seq": (*transformer_only, "attention", "local_window", "input_feeding")}[m.arch]
    for name in ignored:
        if getattr(m, name) != getattr(defaults, name):
            warnings.append(f"model.{name} has no effect on a {m.arch} model (ignored)")
    if m.arch == "luong" and m.attention != "local-p" and m.local_window != defaults.local_window:
        warnings.append("model.local_window only applies to model.attention: local-p (ignored)")
    for name in sampler_settings_unused(cfg.decode):
        warnings.append(f"decode.{name} {getattr(cfg.decode, name):g} has no effect without sampling "
                        "(decode.sampling_topk 1: search) (ignored)")
    if cfg.data.source_file and cfg.data.corpus.strip() and cfg.data.corpus != BUILTIN_CORPUS:  # "": none named
        warnings.append(f"data.corpus {cfg.data.corpus} is not read: data.source_file + data.target_file name the "
                        "training text (ignored)")
    read_whole = ("data.source_file + data.target_file are" if cfg.data.source_file
                  else "the built-in corpus is" if cfg.data.corpus == BUILTIN_CORPUS else None)
    for name in ("source_column", "target_column"):
        if getattr(cfg.data, name) is not None and read_whole:
            warnings.append(f"data.{name} picks a column of a data.corpus of your own; {read_whole} read as they "
                            "come (ignored)")
    for name in ("subword_nbest", "subword_samples"):
        if getattr(cfg.data, name) != getattr(DataConfig, name) and not cfg.data.subword_alpha:
            warnings.append(f"data.{name} {getattr(cfg.data, name)} has no effect without data.subword_alpha (ignored)")
    return warnings


def to_dict(config: Any) -> dict:
    """Plain values only: safe for YAML, JSON and `torch.load(weights_only=True)`."""
    return dataclasses.asdict(config)


def from_dict(raw: Any, cls: type = Config, path: str = "") -> Any:
    """Build and validate a dataclass from a (YAML) mapping; errors carry the full dotted key."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or 'config'} must be a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in raw.items():
        full = f"{path}.{key}" if path else str(key)
        if key not in fields:
            raise ConfigError(_unknown_key_message(full, str(key), fields, path, value))
        values[key] = _coerce(value, hints[key], full)
    obj = cls(**values)
    for name, f in fields.items():
        _validate_range(getattr(obj, name), f.metadata, f"{path}.{name}" if path else name)
    return obj


def _check_flex_attention(m: ModelConfig, t: TrainConfig) -> None:
    if not t.pack_length or t.pack_length % 128:
        raise ConfigError(f"train.packed_attention flex takes packed rows of a multiple of 128 positions (its "
                          f"tiles; torch 2.13's CPU kernel got shorter rows wrong, pytorch#159247): set "
                          f"train.pack_length to 128, 256, ... (now {t.pack_length})")
    attention_dropout = m.dropout if m.attention_dropout is None else m.attention_dropout
    if attention_dropout:
        raise ConfigError(f"train.packed_attention flex has no attention dropout: set model.attention_dropout: 0 "
                          f"(now {attention_dropout}{', model.dropout' if m.attention_dropout is None else ''})")
    import torch  # only for this setting: the config module stays free of torch for the CLI's start-up

    from nmt.models.flex_masks import flex_attention_available

    if not flex_attention_available():
        raise ConfigError(f"train.packed_attention flex needs torch >= 2.5 (FlexAttention), not {torch.__version__}")


def _unknown_key_message(full: str, key: str, fields: dict, path: str, value: Any = None) -> str:
    peer = _PEER_NAMES.get(full) or _PEER_NAMES.get(key)
    if peer:
        return f"unknown key {full}; did you mean {peer}? (nmt's name for it)"
    # A setting written outside its section (`--set lr=1e-3`, `train.beam_size: 5`) is named where it lives.
    home = [section for section in _sections_holding(key) if section != path]
    if home:
        return f"unknown key {full}; did you mean {home[0]}.{key}?"
    close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
    if close:
        return f"unknown key {full}; did you mean {path + '.' if path else ''}{close[0]}?"
    holds_anchors = not path and isinstance(value, dict)  # settings to merge elsewhere (`<<: *small`)
    anchors = f" (a key that holds YAML anchors: name it {ANCHORS_PREFIX}{key})" if holds_anchors else ""
    return f"unknown key {full}; valid keys: {', '.join(fields)}{anchors}"


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 4
_SHOWN.maxlevel = 2


def _shown(value: Any) -> str:
    """A value as an error shows it: its repr, cut short. An alias bomb's list (nine of the one before, eight deep,
    read at once as shared references) made a message of 254 MB; a setting of 5 MB of text, one of 5 MB."""
    try:
        return _SHOWN.repr(value)
    except ValueError:  # an int past Python's 4,300 digits (from code: YAML's are refused as read)
        return f"an integer of {value.bit_length():,} bits"


def _as_number(value: Any) -> float | None:
    """The number a YAML value spells, or None; PyYAML reads "3e-4" as a string (YAML 1.1), so numeric strings count."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _coerce(value: Any, typ: Any, path: str) -> Any:
    args = typing.get_args(typ)
    if type(None) in args:  # `X | None`: null means "the default of the context"
        if value is None:
            return None
        typ = next(a for a in args if a is not type(None))
    if dataclasses.is_dataclass(typ):
        return from_dict(value if value is not None else {}, typ, path)
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        # "max_steps: 1e5" is a string to PyYAML and 1.0e5 a float: either is a whole number the user meant.
        number = _as_number(value)
        if number is not None and math.isfinite(number) and number.is_integer():
            return int(number)
    elif typ is float:
        number = _as_number(value)
        if number is not None:
            if not math.isfinite(number):  # YAML's .inf/.nan, or "inf": no setting means infinity
                raise ConfigError(f"{path} must be a finite number, got {_shown(value)}")
            return number
    elif typ is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{path} must be {typ.__name__}, got {_shown(value)} ({type(value).__name__})")


def _validate_range(value: Any, rules: Any, path: str) -> None:
    if value is None:  # an unset optional setting: nothing to check
        return
    if "choices" in rules and value not in rules["choices"]:
        raise ConfigError(f"{path} must be one of {', '.join(rules['choices'])}; got {_shown(value)}")
    if isinstance(value, int) and not isinstance(value, bool):
        # Every integer setting reaches torch, numpy or C code as 64 bits (a seed, a slice's end): past them, an
        # internal error far from the setting's name.
        rules = {"ge": -INT64_MAX - 1, "le": INT64_MAX, **rules}
    checks = {"gt": (lambda v, b: v > b, ">"), "ge": (lambda v, b: v >= b, ">="),
              "lt": (lambda v, b: v < b, "<"), "le": (lambda v, b: v <= b, "<=")}
    for rule, (ok, symbol) in checks.items():
        if rule in rules and not ok(value, rules[rule]):
            raise ConfigError(f"{path} must be {symbol} {rules[rule]}; got {_shown(value)}")


def sampling_overrides(topk: int | None, topp: float | None, temperature: float | None,
                       beam: int | None) -> dict:
    """What a command line's or a request's sampling options ask of the decode settings: top-p or a temperature asks
    for sampling (over the whole vocabulary unless top-k says otherwise), and sampling replaces the run's beam with 1
    unless a beam is given (then check_n_best refuses it)."""
    if topp is not None and topp <= 0.0:
        raise ConfigError("top-p must be above 0 (1: no cut)")
    if temperature is not None and temperature <= 0.0:
        raise ConfigError("the temperature must be above 0")
    if topk is None and topp is None and temperature is None:
        return {}
    topk = 0 if topk is None else topk
    return {"sampling_topk": topk, **({"beam_size": 1} if beam is None and topk != 1 else {})}


def decode_overrides(items: list[str]) -> dict:
    """`--set decode.KEY=VALUE` items of the commands that decode, as {field: value}, each checked as a config file's
    would be; any other section is refused (the model and the data were fixed by training)."""
    raw = apply_overrides({}, items)
    others = sorted(set(raw) - {"decode"})
    if others:
        other = others[0]
        if "decode" in _sections_holding(other):
            raise ConfigError(f"--set {other}=…: a decode setting takes its section: --set decode.{other}=…")
        if other not in _SECTIONS:
            raise ConfigError(f"--set {other}…: no such setting; only decode settings apply here "
                              f"(--set decode.KEY=VALUE, e.g. decode.batch_size=50)")
        raise ConfigError(f"--set {other}.…: only decode settings apply here (--set decode.KEY=VALUE, e.g. "
                          f"decode.batch_size=50); the {other} section was fixed by training")
    given = raw.get("decode", {})
    if not isinstance(given, dict):
        raise ConfigError("--set decode=…: name a setting, e.g. --set decode.batch_size=50")
    for key in given:
        home = _sections_holding(key)
        if home and "decode" not in home:
            raise ConfigError(f"--set decode.{key}: {key} is a {home[0]} setting, fixed by training; only decode "
                              f"settings apply here")
    checked = from_dict(given, DecodeConfig, "decode")
    return {key: getattr(checked, key) for key in given}


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` overrides to a raw mapping; values are parsed as YAML scalars."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"bad override {item!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
        key, text = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ConfigError(f"bad override {item!r}: empty key segment")
        try:
            value = yaml.load(text, Loader=_UniqueKeyLoader) if text.strip() else ""  # noqa: S506 - a SafeLoader
        except ConfigError as err:
            raise ConfigError(f"--set {key.strip()}: {str(err).split(': ', 1)[-1]}") from None
        except yaml.YAMLError:
            value = text
        node = raw
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"bad override {item!r}: {part} is not a section")
            node = child
        node[parts[-1]] = value
    return raw


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice (plain YAML silently keeps the last one). A merge key (`<<: *shared`)
    is no key of its own: SafeLoader merges it, a key written beside it overriding the merged one, as YAML says."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        """A plain integer, or a one-line error for one of more digits than Python reads as an int (4,300: its
        ValueError was an internal error)."""
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise ConfigError(f"line {node.start_mark.line + 1}: a number of {len(node.value):,} digits, past any "
                              "setting's (64 bits at most)") from None


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def read_yaml(path: Path) -> Any:
    """One YAML document with safe types only and no duplicate keys; every failure is a one-line ConfigError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    except yaml.MarkedYAMLError as err:
        # Where and what: "invalid YAML (while scanning for the next token)" named neither the line nor the tab.
        mark = err.problem_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = err.problem or "parse error"
        raise ConfigError(f"{path}{where}: invalid YAML: {what}" + (f" ({err.context})" if err.context else "")) \
            from None
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else "parse error"
        raise ConfigError(f"{path}: invalid YAML ({first})") from None


# A top-level key of this prefix holds YAML anchors that sections merge (`x-small: &small {...}`, then
# `model: {<<: *small}`), as docker-compose's extension fields do: it names no section and is dropped after reading.
ANCHORS_PREFIX = "x-"

_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def shipped_configs() -> dict[str, Path]:
    """The configs nmt ships, by name: configs/ of this checkout, or nmt/configs/ inside an installed wheel (the
    build copies configs/ there), so `--config transformer` works without a checkout."""
    package = Path(__file__).resolve().parent
    checkout = package.parent
    folders = [package / "configs"]
    if (checkout / "pyproject.toml").is_file():  # never some other project's configs/ beside site-packages/nmt
        folders.append(checkout / "configs")
    for folder in folders:
        if folder.is_dir() and any(folder.glob("*.yaml")):
            return {path.stem: path for path in sorted(folder.glob("*.yaml"), key=lambda path: path.stem)}
    return {}


def _local_configs(path: Path) -> list[Path]:
    """Files here that a config typed without its suffix (`demo`, `configs/demo`) may mean."""
    if path.suffix:
        return []
    candidates = [path.with_suffix(".yaml")] + ([Path("configs") / f"{path.name}.yaml"] if len(path.parts) == 1 else [])
    return [candidate for candidate in candidates if candidate.is_file()]


def _shipped_config(path: Path) -> Path | None:
    """The shipped config a bare name (`demo`) stands for, else None: a path (with a folder or a suffix) is a file."""
    return shipped_configs().get(path.name) if not path.suffix and len(path.parts) == 1 else None


def _refuse_ambiguous_name(path: Path) -> None:
    """A bare name (`demo`) that is a shipped config and also, with its suffix, another file here (`demo.yaml`,
    `configs/demo.yaml` in a copy of the checkout's folder): the user may mean either, so neither is guessed."""
    shipped = _shipped_config(path)
    if shipped is None:
        return
    local = [candidate for candidate in _local_configs(path) if not candidate.samefile(shipped)]
    if local:
        raise ConfigError(f"--config {path} may mean {local[0]} here or the shipped config {path} ({shipped}): "
                          f"name the file, --config {local[0]} or --config {shipped}")


def _config_suggestion(path: Path) -> str:
    """What a missing config was probably meant to be: ' (did you mean configs/demo.yaml?)' when that file is here,
    else the shipped configs by name (`configs/demo.yaml` outside a checkout: `--config demo`)."""
    local = _local_configs(path)
    if local:
        return f" (did you mean {local[0]}?)"
    shipped = shipped_configs()
    if path.stem in shipped:
        return f" (the shipped config of that name: --config {path.stem})"
    return f" (shipped configs, by name: {', '.join(shipped)})" if shipped else ""


def load_config(path: str | Path | None, overrides: list[str] | None = None, warn=warn) -> Config:
    """Read a YAML config (or the defaults when `path` is None), apply overrides, validate. A bare name that is no
    file here (`transformer`) is the shipped config of that name."""
    raw: Any = {}
    if path is not None:
        path = Path(path)
        if not path.exists():
            _refuse_ambiguous_name(path)
            path = _shipped_config(path) or path
        # Not `is_file()`: a pipe (`--config <(...)`) or /dev/stdin is a config too; read_yaml reports the rest.
        if not path.exists():
            raise ConfigError(f"config file not found: {path}{_config_suggestion(path)}")
        if path.is_dir():
            raise ConfigError(f"config {path} is a directory, not a YAML file")
        raw = read_yaml(path) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        raw = {key: value for key, value in raw.items() if not str(key).startswith(ANCHORS_PREFIX)}
        raw.setdefault("name", path.stem)
    config = from_dict(apply_overrides(raw, overrides or []))
    if not _RUN_NAME.fullmatch(config.name):
        raise ConfigError(f"name {config.name!r} must be a plain name (letters, digits, . _ -): "
                          "it names the directory under runs/")
    for message in check_consistency(config):
        warn(message)
    return config
