"""The config's sections as dataclasses: every setting with its default, its bounds (field metadata that
`nmt.config.parsing` checks) and what it touches (the prepared data's fingerprint, the model's shape, the order of
the batches)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


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


@dataclass
class Config:
    name: str = "model"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}


def sections_holding(key: str) -> list[str]:
    """The config sections that have a setting of this name (`lr` → ["train"])."""
    return [section for section, cls in SECTIONS.items() if key in {f.name for f in dataclasses.fields(cls)}]


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
