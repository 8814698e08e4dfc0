"""Bad input through the real CLI: exit code 2, one line on stderr, no traceback, and nothing on disk changed.

Each row: (id, arguments, what to plant first). `{R}` is a copy of a trained toy run, `{T}` the case's own folder,
`{D}` the toy data directory. Run directories a failing `train` would create must not appear either.
"""

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config import load_config
from nmt.train import train
from tests_helpers import TOY_RUN, default_stop_signals, nmt, write_config

pytestmark = pytest.mark.slow


def _plant(kinds: str | tuple, t: Path, r: Path) -> None:
    """Create what a case needs before the command runs (one kind or a tuple of them)."""
    for kind in (kinds,) if isinstance(kinds, str) else kinds:
        _plant_one(kind, t, r)


def _plant_one(kind: str, t: Path, r: Path) -> None:
    if kind == "empty-files":
        (t / "empty.txt").write_text("")
    elif kind == "latin1":
        (t / "src.txt").write_bytes("caf\xe9 .\n".encode("latin-1"))
        (t / "ref.txt").write_text("Un café.\n")
    elif kind == "mismatch":
        (t / "src.txt").write_text("go .\ni lost .\n")
        (t / "ref.txt").write_text("Va !\n")
    elif kind == "zero-checkpoint":
        (t / "zero.pt").write_bytes(b"")
    elif kind == "list-checkpoint":
        torch.save([1, 2, 3], t / "list.pt")
    elif kind == "a-file":
        (t / "file").write_text("x")
    elif kind == "dir":
        (t / "adir").mkdir()
    elif kind == "corrupt-spm":
        (r / "spm.model").write_bytes(b"\x00garbage")
    elif kind == "corrupt-config":
        (r / "config.yaml").write_text("model: [unclosed\n")
    elif kind == "foreign-config":
        (r / "config.yaml").write_text("model:\n  arch: lstm\n")
    elif kind.startswith("yaml:"):
        (t / "c.yaml").write_bytes(kind[5:].encode("latin-1"))
    elif kind == "tiny-corpus":
        (t / "tiny.txt").write_text("Go.\tVa !\nHi.\tSalut !\n")
    elif kind == "an-export-dir":  # what marks a directory as an export, and nothing else
        (t / "ct2").mkdir()
        (t / "ct2" / "nmt_export.json").write_text("{}")
    elif kind.startswith("export"):
        _plant_export(kind, t, r)
    elif kind == "steps-of-two-shapes":
        from nmt.run_dir import Weights
        for step, width in ((1, 4), (2, 5)):
            weights = Weights(model={"w": torch.zeros(width)}, config={"model": {"arch": "transformer"}})
            torch.save(weights.payload(), r / "checkpoints" / f"step-{step:07d}.pt")
    elif kind == "reversed-copy":  # the same run, as if trained the other way round (its config and checkpoint)
        from nmt.checkpoint import load_checkpoint, save_checkpoint
        shutil.copytree(r, t / "reversed")
        config = yaml.safe_load((t / "reversed" / "config.yaml").read_text())
        config["data"]["reverse"] = True
        (t / "reversed" / "config.yaml").write_text(yaml.safe_dump(config))
        best = t / "reversed" / "checkpoints" / "best.pt"
        save_checkpoint({**load_checkpoint(best), "config": config}, best)
    elif kind in ("checkpoint-other-vocabulary", "checkpoint-other-direction"):  # as another run's best.pt is
        from nmt.checkpoint import load_checkpoint, save_checkpoint
        state = load_checkpoint(r / "checkpoints" / "best.pt")
        if kind == "checkpoint-other-vocabulary":
            state["model_args"] = {**state["model_args"], "src_vocab": 999, "tgt_vocab": 999}
        else:
            state["config"]["data"] = {**state["config"]["data"], "reverse": True}
        (t / "other" / "checkpoints").mkdir(parents=True)
        save_checkpoint(state, t / "other" / "checkpoints" / "best.pt")
    elif kind == "loose-checkpoint":
        shutil.copy(r / "checkpoints" / "best.pt", t / "loose.pt")
    elif kind == "stray-step":
        (r / "checkpoints" / "step-latest.pt").write_bytes((r / "checkpoints" / "best.pt").read_bytes())
    elif kind == "pickled-offsets":
        import numpy as np
        shutil.copytree(TOY_DATA_DIR[0], t / "data")
        prepared = next((t / "data" / "prepared").iterdir())
        np.save(prepared / "train.000.src.offsets.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    elif kind in ("offsets-backwards", "ids-past-vocabulary"):  # what was trained on or an IndexError
        import numpy as np
        shutil.copytree(TOY_DATA_DIR[0], t / "data")
        prepared = next((t / "data" / "prepared").iterdir())
        if kind == "offsets-backwards":
            offsets = np.load(prepared / "train.000.src.offsets.npy")
            offsets[3] = offsets[2] - 1
            np.save(prepared / "train.000.src.offsets.npy", offsets)
        else:
            tokens = prepared / "train.000.tgt.bin"
            tokens.write_bytes(b"\xff" * tokens.stat().st_size)


def _plant_export(kind: str, t: Path, r: Path) -> None:
    """An export of the run, then damaged as `kind` says."""
    pytest.importorskip("ctranslate2")
    from nmt.export import export_ctranslate2
    from nmt.translator import Translator

    export_ctranslate2(Translator.from_run(r, device="cpu"), t / "ct2")
    model = t / "ct2" / "model.bin"
    if kind == "export-random-bin":
        model.write_bytes(bytes(range(256)) * 64)
    elif kind == "export-truncated-bin":
        model.write_bytes(model.read_bytes()[:len(model.read_bytes()) // 2])
    elif kind == "export-bad-normalizer":
        (t / "ct2" / "normalizer.json").write_text("{not json")
    elif kind == "export-no-decode":
        (t / "ct2" / "nmt_export.json").write_text('{"quantization": "float32"}')
    elif kind == "export-no-vocabulary":
        for vocabulary in (t / "ct2").glob("*vocabulary*"):
            vocabulary.unlink()


TOY_DATA_DIR: list = []  # set by the module fixture: the session's toy data directory


TOY_DATA_YAML = ("data: {vocab_size: 300, valid_fraction: 0.1, test_fraction: 0.1, corpus_sha256: '', "
                 "verify_checksum: false}\n")
# Two steps at most: a bad input that were wrongly accepted must end the test quickly, not train for hours.
BASE = ("model: {arch: transformer, embed_dim: 32, num_layers: 1, num_heads: 2, ff_dim: 64}\n"
        "train: {max_steps: 2, warmup_steps: 1, eval_every: 2, max_tokens: 400, threads: 1, device: cpu}\n")
OTHER = "{T}/other/checkpoints/best.pt"  # a checkpoint of another run
CASES = [
    # translate
    ("translate-no-run", ["translate", "--run", "{T}/nowhere", "hi"], None, "is not a run directory"),
    ("translate-run-is-file", ["translate", "--run", "{T}/file", "hi"], "a-file", "is not a run directory"),
    ("translate-device", ["translate", "--run", "{R}", "--device", "foo", "hi"], None, "unknown device 'foo'"),
    ("translate-cuda-missing", ["translate", "--run", "{R}", "--device", "cuda", "hi"], None, "no CUDA device"),
    ("translate-beam-0", ["translate", "--run", "{R}", "--beam", "0", "hi"], None, "Invalid value for '--beam'"),
    ("translate-lp-inf", ["translate", "--run", "{R}", "--length-penalty", "inf", "hi"], None,
     "'--length-penalty': must be a finite number, got 'inf'"),
    ("translate-layer", ["translate", "--run", "{R}", "--attention-layer", "5", "--show-attention", "hi"], None,
     "this model has 1 attention layer with 2 heads each;"),
    ("translate-head", ["translate", "--run", "{R}", "--attention-head", "9", "--show-attention", "hi"], None,
     "this model has 1 attention layer with 2 heads each;"),
    ("translate-layer-alone", ["translate", "--run", "{R}", "--attention-layer", "0", "hi"], None,
     "--attention-layer and --attention-head choose what --attention PNG or --show-attention shows"),
    ("translate-heat-dir", ["translate", "--run", "{R}", "--attention", "{T}/adir", "hi"], "dir", "is a directory"),
    ("translate-heat-under-file", ["translate", "--run", "{R}", "--attention", "{T}/file/heat.png", "hi"],
     "a-file", "is not a writable directory"),
    ("translate-heat-format", ["translate", "--run", "{R}", "--attention", "{T}/heat.gifx", "hi"], None,
     "not supported"),
    ("translate-zero-checkpoint", ["translate", "--run", "{R}", "--checkpoint", "{T}/zero.pt", "hi"],
     "zero-checkpoint", "the file is empty"),
    ("translate-list-checkpoint", ["translate", "--run", "{R}", "--checkpoint", "{T}/list.pt", "hi"],
     "list-checkpoint", "is not an nmt checkpoint"),
    ("translate-checkpoint-of-another-vocabulary", ["translate", "--run", "{R}", "--checkpoint", OTHER, "hi"],
     "checkpoint-other-vocabulary", "was trained with a vocabulary of 999/999 source/target pieces, but"),
    ("translate-checkpoint-of-another-direction", ["translate", "--run", "{R}", "--checkpoint", OTHER, "hi"],
     "checkpoint-other-direction", "was trained on other data than"),
    ("translate-loose-checkpoint", ["translate", "--checkpoint", "{T}/loose.pt", "hi"], "loose-checkpoint",
     "loose.pt is not in a run's checkpoints/ folder: pass --run RUN"),
    ("translate-missing-checkpoint", ["translate", "--run", "{R}", "--checkpoint", "{T}/none.pt", "hi"], None,
     "checkpoint not found"),
    ("translate-corrupt-spm", ["translate", "--run", "{R}", "hi"], "corrupt-spm", "cannot load SentencePiece"),
    ("translate-corrupt-config", ["translate", "--run", "{R}", "hi"], "corrupt-config", "invalid YAML"),
    ("translate-foreign-config", ["translate", "--run", "{R}", "hi"], "foreign-config", "model.arch must be one of"),
    # evaluate
    ("evaluate-ref-without-src", ["evaluate", "--run", "{R}", "--ref", "{T}/r.txt"], None, "--ref needs --src"),
    ("evaluate-empty", ["evaluate", "--run", "{R}", "--src", "{T}/empty.txt", "--ref", "{T}/empty.txt"],
     "empty-files", "is empty: nothing to score"),
    ("evaluate-latin1", ["evaluate", "--run", "{R}", "--src", "{T}/src.txt", "--ref", "{T}/ref.txt"], "latin1",
     "not UTF-8"),
    ("evaluate-line-mismatch", ["evaluate", "--run", "{R}", "--src", "{T}/src.txt", "--ref", "{T}/ref.txt"],
     "mismatch", "has 1 line but the source has 2"),
    ("evaluate-split", ["evaluate", "--run", "{R}", "--split", "train"], None, "--split must be test or valid"),
    ("evaluate-split-and-src", ["evaluate", "--run", "{R}", "--split", "valid", "--src", "{T}/src.txt", "--ref",
                                "{T}/ref.txt"], "mismatch", "--split valid names a split of the run's data and --src"),
    ("evaluate-compare-one-run", ["evaluate", "--compare", "{R}"], None, "--compare needs two runs or more"),
    ("evaluate-compare-out-dir", ["evaluate", "--run", "{R}", "--compare", "{R}", "--out-dir", "{T}/o"], None,
     "writes no files: --out-dir does not apply"),
    ("evaluate-compare-directions", ["evaluate", "--run", "{R}", "--compare", "{T}/reversed"], "reversed-copy",
     "reversed translates fr→en but"),
    ("evaluate-compare-missing", ["evaluate", "--run", "{R}", "--compare", "{T}/nowhere"], None,
     "nowhere is not a run directory"),
    # plot
    ("plot-dir", ["plot", "--run", "{R}", "-o", "{T}/adir"], "dir", "is a directory"),
    ("plot-device", ["plot", "--run", "{R}", "-o", "/dev/null"], None, "/dev/null is not a regular file"),
    ("translate-heat-device", ["translate", "--run", "{R}", "--attention", "/dev/null", "hi"], None,
     "/dev/null is not a regular file"),
    ("plot-no-run", ["plot", "--run", "{T}/nowhere"], None, "is not a run directory"),
    # train: refused before the run directory is written
    ("train-missing-config", ["train", "--config", "{T}/none.yaml", "--run-dir", "{T}/run"], None,
     "config file not found"),
    ("train-duplicate-key", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run"],
     "yaml:" + BASE + "decode: {beam_size: 2}\ndecode: {beam_size: 3}\n", "duplicate key 'decode'"),
    ("train-config-latin1", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run"],
     "yaml:name: caf\xe9\n", "not UTF-8"),
    ("train-heads", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set", "model.num_heads=3"],
     "yaml:" + BASE, "divisible by model.num_heads 3"),
    ("train-negative-seed", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set", "train.seed=-1"],
     "yaml:" + BASE, "train.seed must be >= 0"),
    # Past 64 bits torch's generators overflow (an internal error); tens of thousands of threads crash libgomp.
    ("train-huge-seed", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                         "train.seed=99999999999999999999"], "yaml:" + BASE,
     "train.seed must be <= 9223372036854775807; got 99999999999999999999"),
    ("train-huge-threads", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set", "train.threads=100000"],
     "yaml:" + BASE, "train.threads must be <= 1024"),
    # Its MFU overflowed to Infinity in metrics.jsonl, which no strict JSON reader takes.
    ("train-tiny-peak", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                         "train.peak_tflops=5e-324"],
     "yaml:" + BASE, "train.peak_tflops 5e-324 is below any device's"),
    ("train-absurd-size", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                           "model.embed_dim=1000000"], "yaml:" + BASE, "model.embed_dim must be <= 16384"),
    ("train-absurd-vocab", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                            "data.vocab_size=100000000"], "yaml:" + BASE, "data.vocab_size must be <="),
    ("train-name-escapes", ["train", "--config", "{T}/c.yaml", "--set", "name=/tmp/escape"], "yaml:" + BASE,
     "must be a plain name"),
    ("train-input-positions", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                               "decode.max_input_tokens=5000"], "yaml:" + BASE, "exceeds model.max_positions"),
    ("train-output-positions", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                                "decode.max_len_b=2000"], "yaml:" + BASE, "exceeds model.max_positions"),
    ("train-run-dir-is-file", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/file"], ("a-file", "yaml:" + BASE),
     "exists and is not a directory"),
    ("train-run-dir-under-file", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/file/run"],
     ("a-file", "yaml:" + BASE), "file is not a directory"),
    ("train-shape-change", ["train", "--config", "{T}/c.yaml", "--run-dir", "{R}", "--set", "model.embed_dim=48"],
     "yaml:" + BASE, "was trained with model.embed_dim=32 but the config says 48"),
    ("train-bad-override", ["train", "--config", "{T}/c.yaml", "--set", "train.nope=1"], "yaml:" + BASE,
     "unknown key train.nope"),
    # data
    ("prepare-data-dir-is-file", ["prepare", "--data-dir", "{T}/file", "--url", "{T}/tiny.txt"], "a-file",
     "exists and is not a directory"),
    ("prepare-url-for-own-corpus", ["prepare", "--config", "{T}/c.yaml", "--data-dir", "{T}/data", "--url",
                                    "{T}/tiny.txt"],
     "yaml:data: {corpus: mine.tsv, source_lang: de, target_lang: en}\n",
     "--url is where the built-in corpus downloads from; this config trains on text of its own (mine.tsv)"),
    ("train-url-for-own-files", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--url", "{T}/x.zip"],
     "yaml:data: {source_file: a.de, target_file: a.en, source_lang: de, target_lang: en}\n" + BASE,
     "this config trains on text of its own (a.de)"),
    ("download-not-zip", ["download", "--url", "{T}/tiny.txt", "--data-dir", "{T}/data"], "tiny-corpus",
     "is not a valid zip archive"),
    ("download-url-is-dir", ["download", "--url", "{T}/adir", "--data-dir", "{T}/data"], "dir",
     "adir is a directory: give the corpus zip archive itself"),
    ("download-file-url-of-another-host", ["download", "--url", "file://fileserver/fra-eng.zip", "--data-dir",
                                           "{T}/data"], None,
     "file://fileserver/fra-eng.zip names a file on host 'fileserver': file:// URLs name this machine's files"),
    ("prepare-corpus-file-url-of-another-host", ["prepare", "--config", "{T}/c.yaml", "--data-dir", "{T}/data"],
     "yaml:data: {corpus: 'file://nas/mine.tsv', source_lang: de, target_lang: en}\n", "names a file on host 'nas'"),
    ("download-scheme", ["download", "--url", "ftp://example.invalid/x.zip", "--data-dir", "{T}/data"], None,
     "unsupported corpus URL scheme"),
    # urllib's ValueError on a bracket left open was an internal error (exit 1).
    ("download-bad-ipv6-url", ["download", "--url", "https://[::1/fra-eng.zip", "--data-dir", "{T}/data"], None,
     "https://[::1/fra-eng.zip is not a valid URL (Invalid IPv6 URL)"),
    ("download-nonnumeric-port", ["download", "--url", "http://example.org:abc/x.zip", "--data-dir", "{T}/data"],
     None, "http://example.org:abc/x.zip is not a valid URL (Port could not be cast to integer value as 'abc')"),
    ("download-port-out-of-range", ["download", "--url", "http://example.org:99999/x.zip", "--data-dir", "{T}/data"],
     None, "http://example.org:99999/x.zip is not a valid URL (Port out of range 0-65535)"),
    ("download-url-with-a-space", ["download", "--url", "https://example.org/my corpus.zip", "--data-dir", "{T}/data"],
     None, "'https://example.org/my corpus.zip' is not a valid URL (it holds a space or a control character: "
           "percent-encode it, a space as %20)"),
    ("prepare-corpus-bad-ipv6-url", ["prepare", "--config", "{T}/c.yaml", "--data-dir", "{T}/data"],
     "yaml:data: {corpus: 'https://[fe80::1/pairs.tsv', source_lang: de, target_lang: en}\n",
     "https://[fe80::1/pairs.tsv is not a valid URL (Invalid IPv6 URL)"),
    ("download-data-dir-is-file", ["download", "--url", "{T}/tiny.txt", "--data-dir", "{T}/file"], "a-file",
     "exists and is not a directory"),
    ("no-such-command", ["bogus"], None, "No such command 'bogus'"),
    # the last exit-1s (issue 18)
    ("train-huge-model", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set", "model.embed_dim=16384",
                          "--set", "model.ff_dim=65536", "--set", "model.num_layers=64", "--set",
                          "model.num_heads=256"], "yaml:" + BASE + TOY_DATA_YAML, "GiB available"),
    # Packed rows' attention masks grow as the row's square: a row of 65,536 positions was an OOM kill (exit 137).
    ("train-huge-packed-rows", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set",
                                "train.pack_length=65536", "--set", "train.max_tokens=1048576"],
     "yaml:" + BASE + TOY_DATA_YAML, "attention masks of packed rows (train.pack_length 65536, train.max_tokens "
                                     "1048576) needs at least 324.0 GiB"),
    # A run written into the data directory mixed its checkpoints with the corpus and its preparations.
    ("train-run-in-data-dir", ["train", "--config", "{T}/c.yaml", "--run-dir", "{D}", "--data-dir", "{D}"],
     "yaml:" + BASE + TOY_DATA_YAML, "is the data directory"),
    ("train-run-in-data-dir-by-another-name", ["train", "--config", "{T}/c.yaml", "--run-dir", "{D}/../{D.name}/",
                                               "--data-dir", "{D}"], "yaml:" + BASE + TOY_DATA_YAML,
     "is the data directory"),
    ("train-lr-inf", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set", "train.lr=inf"],
     "yaml:" + BASE, "train.lr must be a finite number"),
    ("train-lr-nan", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--set", "train.lr=.nan"],
     "yaml:" + BASE, "train.lr must be a finite number"),
    ("train-pickled-arrays", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--data-dir", "{T}/data"],
     ("pickled-offsets", "yaml:" + BASE + TOY_DATA_YAML), "is missing or damaged"),
    ("train-offsets-backwards", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--data-dir",
                                 "{T}/data"], ("offsets-backwards", "yaml:" + BASE + TOY_DATA_YAML),
     "(ValueError: the offsets in train.000.src.offsets.npy go backwards)"),
    ("train-ids-past-vocabulary", ["train", "--config", "{T}/c.yaml", "--run-dir", "{T}/run", "--data-dir",
                                   "{T}/data"], ("ids-past-vocabulary", "yaml:" + BASE + TOY_DATA_YAML),
     "(ValueError: train.000.tgt.bin holds piece id 65535, past the vocabulary's"),
    ("translate-beam-1000", ["translate", "--run", "{R}", "--beam", "1000", "hi"], None, "Invalid value for '--beam'"),
    ("average-two-shapes", ["average", "--run", "{R}", "--last", "2"], "steps-of-two-shapes",
     "differ in the shape of w"),
    # An export where a run is expected: the way to use it is named
    ("translate-run-is-export", ["translate", "--run", "{T}/ct2", "hi"], "an-export-dir",
     "is a CTranslate2 export (`nmt export`), not a run: translate, evaluate and serve take it as --engine"),
    ("translate-checkpoint-in-export", ["translate", "--checkpoint", "{T}/ct2/model.bin", "hi"], "an-export-dir",
     "is a CTranslate2 export"),
    ("ct2-model-is-a-run", ["translate", "--engine", "ctranslate2", "--model", "{R}", "hi"], None,
     "is a run, not a CTranslate2 export: use it with --run"),
    ("serve-run-is-export", ["serve", "--run", "{T}/ct2"], "an-export-dir", "take it as --engine ctranslate2 --model"),
    # Many servers read an empty host as every interface; getaddrinfo names no address ("cannot serve on : ...").
    ("serve-allow-a-url", ["serve", "--run", "{R}", "--allow-host", "https://mt.example/"], None,
     "--allow-host 'https://mt.example/' is a URL: name its host alone (mt.example)"),
    ("serve-empty-host", ["serve", "--run", "{R}", "--host", ""], None,
     "--host '' names no address: 0.0.0.0 serves on every interface (:: with IPv6), 127.0.0.1 on this machine only"),
    # --allow-fewer forgives only the count of checkpoints (make demo relies on it to stop on anything else)
    ("average-two-shapes-allow-fewer", ["average", "--run", "{R}", "--last", "2", "--allow-fewer"],
     "steps-of-two-shapes", "differ in the shape of w"),
    ("average-stray-step", ["average", "--run", "{R}", "--last", "2"], "stray-step", "has 0 step checkpoints"),
    ("ct2-random-model", ["translate", "--engine", "ctranslate2", "--model", "{T}/ct2", "hi"], "export-random-bin",
     "cannot be loaded by CTranslate2"),
    ("ct2-truncated-model", ["translate", "--engine", "ctranslate2", "--model", "{T}/ct2", "hi"],
     "export-truncated-bin", "cannot be loaded by CTranslate2"),
    ("ct2-bad-normalizer", ["translate", "--engine", "ctranslate2", "--model", "{T}/ct2", "hi"],
     "export-bad-normalizer", "normalizer.json is missing or damaged"),
    ("ct2-no-decode", ["translate", "--engine", "ctranslate2", "--model", "{T}/ct2", "hi"], "export-no-decode",
     "nmt_export.json is damaged"),
    ("ct2-no-vocabulary", ["translate", "--engine", "ctranslate2", "--model", "{T}/ct2", "hi"],
     "export-no-vocabulary", "cannot be loaded by CTranslate2"),
    ("ct2-cuda-missing", ["translate", "--engine", "ctranslate2", "--model", "{T}/ct2", "--device", "cuda", "hi"],
     "export-ok", "no CUDA device"),
    # --set on the commands that decode: decode settings only, checked as a config's are
    ("translate-set-train", ["translate", "--run", "{R}", "--set", "train.lr=1", "hi"], None,
     "only decode settings apply here"),
    ("evaluate-set-bad-range", ["evaluate", "--run", "{R}", "--set", "decode.batch_size=0"], None,
     "decode.batch_size must be >= 1"),
    ("score-set-unknown", ["score", "--run", "{R}", "--set", "decode.beam=3"], None,
     "unknown key decode.beam; did you mean decode.beam_size?"),
    ("translate-set-disagrees", ["translate", "--run", "{R}", "--set", "decode.beam_size=3", "--beam", "4", "hi"],
     None, "--set decode.beam_size=3 and a named option (4) disagree"),
    ("serve-set-sampling-beam", ["serve", "--run", "{R}", "--set", "decode.sampling_topk=5",
                                 "--set", "decode.beam_size=4"], None, "it takes beam 1, not 4"),
    # Past the Transformer's position table: refused at once, as in a config, not at the first long sentence with an
    # error that named no setting ("sequence of 5001 positions exceeds model.max_positions 1024").
    ("translate-set-past-positions", ["translate", "--run", "{R}", "--set", "decode.max_input_tokens=65536", "hi"],
     None, "decode.max_input_tokens = 65536 exceeds model.max_positions 1024 (the Transformer's position table); "
           "lower it: the model was trained with 1024 positions"),
    ("evaluate-set-past-positions", ["evaluate", "--run", "{R}", "--set", "decode.max_len_b=65536"], None,
     "decode.max_len_a * max_input_tokens + max_len_b + 1 = 65921 exceeds model.max_positions 1024"),
]


@pytest.fixture(scope="module")
def toy_run_dir(tmp_path_factory, toy_data_dir) -> Path:
    TOY_DATA_DIR[:] = [toy_data_dir]
    tmp = tmp_path_factory.mktemp("bad-input-run")
    cfg = load_config(write_config(tmp, base=TOY_RUN, train={"max_steps": 10, "eval_every": 10}))
    train(cfg, tmp / "run", toy_data_dir, log=lambda *_: None)
    return tmp / "run"


def snapshot(*roots: Path) -> dict:
    """Every file's content hash and every folder, under the roots; a .lock holds only its last holder's pid."""
    state = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.name != ".lock"):
            state[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return state


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(case, tmp_path, toy_run_dir, toy_data_dir):
    _, args, plant, expected = case
    run = tmp_path / "R"
    shutil.copytree(toy_run_dir, run)
    case_dir = tmp_path / "T"
    case_dir.mkdir()
    if plant:
        _plant(plant, case_dir, run)
    args = [a.format(R=run, T=case_dir, D=toy_data_dir) for a in args]
    before = snapshot(tmp_path)
    result = nmt(*args, data_dir=toy_data_dir, cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stderr[-500:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    after = snapshot(tmp_path)
    assert after == before, {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                             if before.get(k) != after.get(k)}
    assert not Path("/tmp/escape").exists()


def test_table_size():
    assert len(CASES) >= 55


# --- inputs that must work, not fail -------------------------------------------------------------------------------

def test_a_non_utf8_argument_is_translated_like_stdin(toy_run_dir):
    import os

    argument = os.fsdecode(b"caf\xe9 .")  # what Python makes of a Latin-1 byte in argv: a surrogate escape
    result = nmt("translate", "--run", toy_run_dir, argument, "I have two cats.")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2


@pytest.mark.parametrize("environment", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0"},
                                         {"PYTHONIOENCODING": "latin-1"}], ids=["ascii", "c-locale", "latin-1"])
def test_output_is_utf8_whatever_the_locale(toy_run_dir, environment):
    # nmt reads UTF-8 whatever the locale; it wrote the locale's encoding: "É" was an internal UnicodeEncodeError
    # under ASCII, and Latin-1 bytes that nothing of nmt's reads back.
    import os

    done = subprocess.run([sys.executable, "-m", "nmt", "translate", "--run", str(toy_run_dir), "--prefix", "Élevé œuf",
                           "i am home ."], capture_output=True, env={**os.environ, **environment}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("utf-8").startswith("Élevé œuf")


@pytest.mark.parametrize("setting, said", [
    ("foo", "error: TORCH_LOGS='foo' is not a setting torch knows (TORCH_LOGS=help lists them; unset it to run nmt)"),
    ("help", "error: TORCH_LOGS Info"),
    ("", None),
], ids=["unknown", "help", "empty"])
def test_a_torch_logs_setting_torch_refuses_is_not_an_internal_error(toy_run_dir, setting, said):
    # torch's import raises a ValueError for a TORCH_LOGS it cannot read, its list of settings (TORCH_LOGS=help) as
    # one too, and an AttributeError for an empty one: each was "internal error" (exit 1) from whichever command.
    done = subprocess.run([sys.executable, "-m", "nmt", "translate", "--run", str(toy_run_dir), "I have two cats."],
                          capture_output=True, text=True, env={**os.environ, "TORCH_LOGS": setting}, timeout=300)
    if said is None:  # no logs, as unset
        assert done.returncode == 0 and len(done.stdout.splitlines()) == 1 and not done.stderr, done.stderr
        return
    assert done.returncode == 2 and done.stderr.startswith(said), done.stderr
    if setting == "help":  # torch's list, as asked
        assert "dynamo" in done.stderr and done.stderr.rstrip().endswith("unset it to run nmt)"), done.stderr
    else:
        assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize("setting, said", [
    (("TQDM_MININTERVAL", "abc"), "tqdm cannot read its settings from the environment (TQDM_MININTERVAL='abc'): "
                                  "could not convert string to float: 'abc'; correct or unset them"),
    (("TORCHINDUCTOR_COMPILE_THREADS", "abc"), "torch cannot read its settings from the environment "
     "(TORCHINDUCTOR_COMPILE_THREADS='abc'): invalid literal for int() with base 10: 'abc'; correct or unset them"),
], ids=["tqdm", "torch-inductor"])
def test_library_settings_a_library_cannot_read_are_named(tmp_path, toy_data_dir, setting, said):
    # tqdm and torch's compiler convert their settings as they are imported (training loads both): TQDM_MININTERVAL=abc
    # or TORCHINDUCTOR_COMPILE_THREADS=abc was an internal ValueError.
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 1, "warmup_steps": 1})
    environment = {name: value for name, value in os.environ.items() if not name.startswith(("TQDM_", "TORCH"))}
    done = subprocess.run([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                           str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], capture_output=True, text=True,
                          env={**environment, setting[0]: setting[1]}, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == f"error: {said}", done.stderr


def test_a_path_from_the_environment_that_fails_names_its_variable(tmp_path, toy_data_dir):
    # torch makes TORCHINDUCTOR_CACHE_DIR as training loads its compiler (compiling or not): a cache folder that
    # cannot be made was "error: Not a directory (PATH)", with nothing to say where PATH came from.
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / "a-file" / "cache"
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 1, "warmup_steps": 1})
    done = subprocess.run([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                           str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], capture_output=True, text=True,
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == f"error: Not a directory ({cache}, from TORCHINDUCTOR_CACHE_DIR)"


def test_plots_are_drawn_whatever_the_users_matplotlib_backend(toy_run_dir, tmp_path):
    # matplotlib's import validates MPLBACKEND: MPLBACKEND=abc (or a GUI backend's name mistyped) stopped `nmt plot`
    # at an internal ValueError before nmt could choose its headless Agg.
    command = [sys.executable, "-m", "nmt", "plot", "--run", str(toy_run_dir), "-o", str(tmp_path / "c.png")]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "abc"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("args,option", [
    (["train", "--config", "demo", "--run", ""], "--run"),
    (["prepare", "--config", "demo", "--data-dir="], "--data-dir"),
    (["evaluate", "--src", "in.txt", "--ref", "in.txt", "--ref", ""], "--ref"),
    (["plot", "-o", ""], "-o"),
], ids=["train-run", "prepare-data-dir", "evaluate-second-ref", "plot-short"])
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(args, option, tmp_path):
    # `--run "$RUN"` with RUN unset: Path("") is ".", and `nmt train` trained into the current directory.
    done = nmt(*args, cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (f"error: {option} is empty (an unset shell variable?): name a file or folder, or leave "
                           f"{option} out\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,said", [
    (["prepare", "--config", "https://example.org/c.yaml"], "--config takes a file or folder on this machine, not a "
     "URL (https://example.org/c.yaml): download it, name the copy"),
    (["evaluate", "--src=http://h/test.en", "--ref", "t.fr"], "--src takes a file or folder on this machine, not a URL "
     "(http://h/test.en): download it, name the copy"),
    (["translate", "--run", "file:///srv/runs/demo", "hi"],
     "--run takes a path, not a file:// URL: --run /srv/runs/demo"),
], ids=["config", "evaluate-src", "file-url"])
def test_a_url_given_for_a_path_is_named(args, said, tmp_path):
    # pathlib folded it into a path: "config file not found: https:/example.org/c.yaml".
    done = nmt(*args, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stderr == f"error: {said}\n"
    assert list(tmp_path.iterdir()) == []


def test_an_empty_sentence_after_an_option_name_is_still_a_sentence(toy_run_dir):
    # The value of --prefix here is "--run": the "" after it is a sentence to translate, not an empty --run.
    done = nmt("translate", "--run", toy_run_dir, "--prefix", "--run", "", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [""]


def test_names_that_are_not_utf8_are_read_evaluated_and_reported(toy_run_dir, toy_zip, tmp_path):
    # A Latin-1 file or folder name ("caf\xe9"): the report's write was an internal UnicodeEncodeError after the
    # hypotheses were written, a run so named could not load its SentencePiece model (TypeError), and preparing
    # into such a folder failed inside SentencePiece's trainer (TypeError).
    import json
    import os

    latin = os.fsdecode(b"caf\xe9")
    (tmp_path / f"{latin}.en").write_text("i am home .\n", encoding="utf-8")
    (tmp_path / f"{latin}.fr").write_text("je suis chez moi .\n", encoding="utf-8")
    run = tmp_path / f"run-{latin}"
    shutil.copytree(toy_run_dir, run)
    done = nmt("evaluate", "--run", run, "--src", tmp_path / f"{latin}.en", "--ref", tmp_path / f"{latin}.fr",
               timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads((run / "eval" / f"{latin}.beam2.report.json").read_text(encoding="utf-8"))
    assert report["origin"] == f"--src {tmp_path / latin}.en --ref {tmp_path / latin}.fr"
    assert report["checkpoint"].startswith(str(run))
    plotted = nmt("plot", "--run", run, timeout=300, text=False)  # its title was matplotlib's TypeError; it says
    # where the picture went with the name's own bytes, as `ls` does
    assert plotted.returncode == 0 and (run / "curves.png").is_file(), plotted.stderr
    if importlib.util.find_spec("ctranslate2"):  # its Translator took the name as a TypeError
        assert nmt("export", "--run", run, "-o", tmp_path / f"ct2-{latin}", timeout=300, text=False).returncode == 0
        exported = nmt("translate", "--engine", "ctranslate2", "--model", tmp_path / f"ct2-{latin}", "hi .",
                       timeout=300)
        assert exported.returncode == 2
        assert exported.stderr.startswith("error: CTranslate2 takes a model folder's name only as UTF-8: rename ")
    refused = nmt("prepare", "--config", toy_run_dir / "config.yaml", "--data-dir", tmp_path / f"data-{latin}",
                  "--url", toy_zip, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: SentencePiece cannot train with a path that is not UTF-8: b'")
    assert refused.stderr.count("\n") == 1


@pytest.mark.parametrize("closed,said", [("<&-", "reading the standard input"),
                                         (">&-", "writing the standard output")], ids=["stdin", "stdout"])
def test_a_closed_standard_stream_is_one_line(toy_run_dir, closed, said):
    # The shell's `<&-` or `>&-` leaves Python's sys.stdin or sys.stdout None: "internal error AttributeError:
    # 'NoneType' object has no attribute 'isatty'" (or 'write', and a traceback at exit).
    sentence = "" if closed == "<&-" else "'i am home .'"
    done = subprocess.run(["sh", "-c", f'"$0" -m nmt translate --run "$1" {sentence} {closed}', sys.executable,
                           str(toy_run_dir)], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stderr) == (2, f"error: Bad file descriptor ({said})\n")


def test_with_stderr_closed_errors_stay_out_of_the_output(tmp_path):
    # print(..., file=sys.stderr) with sys.stderr None prints to stdout: the error line landed among translations.
    done = subprocess.run(["sh", "-c", '"$0" -m nmt translate --run "$1" "hi ." 2>&-', sys.executable,
                           str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (2, "")


def test_training_with_its_standard_output_closed_trains(tmp_path, toy_data_dir):
    # Libraries ask sys.stdout for its encoding as they load (torch, with getattr and a default): a stand-in that
    # raised OSError there stopped training before its first step.
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 2, "eval_every": 2, "save_every": 2})
    done = subprocess.run(["sh", "-c", '"$0" -m nmt train --config "$1" --run-dir "$2" --data-dir "$3" >&-',
                           sys.executable, str(config), str(tmp_path / "run"), str(toy_data_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


def test_stdin_lines_end_only_at_line_feeds(toy_run_dir):
    import random

    result = nmt("translate", "--run", toy_run_dir, input="i am home .\rwe have two cats .\n", text=True)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 1, (result.stdout, result.stderr)
    # Unless no line feed comes and CRs end the lines (classic Mac OS text): then it is two lines, not one sentence.
    mac = nmt("translate", "--run", toy_run_dir, input="i am home .\rwe have two cats .\r", text=True)
    assert mac.returncode == 0 and mac.stdout.count("\n") == 2, (mac.stdout, mac.stderr)
    rng = random.Random(0)
    binary = bytes(rng.randrange(256) for _ in range(4000)).replace(b"\n", b"\r")  # CR, VT, FF, NEL... stay text
    binary = b"\n".join(binary[i:i + 250] for i in range(0, 4000, 250)) + b"\n"  # 16 lines of noise
    noisy = nmt("translate", "--run", toy_run_dir, input=binary, text=False)
    assert noisy.returncode == 0, noisy.stderr
    assert noisy.stdout.count(b"\n") == binary.count(b"\n") == 16


def test_input_in_the_target_language_is_translated_with_one_warning(toy_run_dir):
    """French piped into an en→fr run was translated into noise, with no word of why."""
    from tests_helpers import toy_parallel_corpus

    pairs = [line.split("\t") for line in toy_parallel_corpus().splitlines()[:60]]
    french = nmt("translate", "--run", toy_run_dir, input="".join(fr + "\n" for _, fr in pairs))
    assert french.returncode == 0 and len(french.stdout.splitlines()) == 60, french.stderr
    warnings = [line for line in french.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == ["warning: the input reads as fr (by its commonest words), but the run translates en→fr: the "
                        "other side's text, or a run of the other direction?"]
    english = nmt("translate", "--run", toy_run_dir, input="".join(en + "\n" for en, _ in pairs))
    assert english.returncode == 0 and "warning" not in english.stderr, english.stderr
    arguments = nmt("translate", "--run", toy_run_dir, *(fr for _, fr in pairs[:30]))
    assert "the input reads as fr" in arguments.stderr and len(arguments.stdout.splitlines()) == 30


@pytest.mark.parametrize("command", ["translate", "score"])
def test_compressed_stdin_is_refused_not_translated_as_text(toy_run_dir, command):
    """`nmt translate < test.en.gz` translated the gzip bytes line by line, a warning per line, into noise."""
    import bz2
    import gzip

    for compress, name, tool in ((gzip.compress, "gzip", "zcat"), (bz2.compress, "bzip2", "bzcat")):
        result = nmt(command, "--run", toy_run_dir, input=compress(b"i am home .\tje suis chez moi .\n" * 50),
                     text=False)
        lines = result.stderr.decode().strip().splitlines()
        assert result.returncode == 2 and result.stdout == b"", result.stderr
        assert lines == [f"error: stdin is {name}-compressed data, not text: decompress it first ({tool} FILE | "
                         "nmt ...)"]


def test_a_full_disk_during_training_is_one_line_and_keeps_last_pt(tmp_path, toy_run_dir, toy_data_dir):
    """RLIMIT_FSIZE makes writes past 2 MB fail with EFBIG (SIGXFSZ ignored), as a full disk does with ENOSPC."""
    import resource
    import signal

    run = tmp_path / "run"
    shutil.copytree(toy_run_dir, run)
    last = run / "checkpoints" / "last.pt"
    before = hashlib.sha256(last.read_bytes()).hexdigest()
    config = tmp_path / "c.yaml"
    shutil.copyfile(run / "config.yaml", config)

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    result = nmt("train", "--config", config, "--run-dir", run, "--set", "train.max_steps=12",
                 "--set", "train.save_every=11", data_dir=toy_data_dir, preexec_fn=small_files)
    assert result.returncode == 2, result.stderr[-800:]
    lines = [line for line in result.stderr.replace("\r", "\n").splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "cannot write checkpoint" in lines[0] and "Traceback" not in result.stderr
    assert hashlib.sha256(last.read_bytes()).hexdigest() == before
    assert not list((run / "checkpoints").glob(".*.tmp"))


# The CLI as a user runs it, with a probe at exit that reports whether torch or matplotlib was ever imported.
_TORCH_PROBE = """
import atexit, sys
atexit.register(lambda: print("heavy imports:", sorted({"torch", "matplotlib"} & set(sys.modules)), file=sys.stderr))
from nmt.cli import main
sys.argv = ["nmt", *sys.argv[1:]]
main()
"""


_FAILING_ALLOCATION = """
import sys
import nmt.inventory
def allocate(folder):
    {allocation}
nmt.inventory.find_runs = allocate
from nmt.cli import main
sys.argv = ["nmt", "runs", "."]
main()
"""


_STOPPED_MIDWAY = """
import os, signal, sys, time
import nmt.inventory
def stopped(folder):
    os.kill(os.getpid(), signal.{signal})
    time.sleep(60)
nmt.inventory.find_runs = stopped
from nmt.cli import main
sys.argv = ["nmt", "runs", "."]
main()
"""


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_stopped_command_says_it_was_interrupted(signal_name, tmp_path):
    # typer>=0.2x turns a KeyboardInterrupt into a silent exit 130, where older ones raised click's Abort: a
    # stopped `nmt prepare` (Ctrl-C, or a scheduler's SIGTERM) ended without a word.
    done = subprocess.run([sys.executable, "-c", _STOPPED_MIDWAY.format(signal=signal_name)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          preexec_fn=default_stop_signals)
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def test_a_library_that_cannot_be_mapped_is_the_machines_limit(tmp_path):
    # Under `ulimit -v 300000` torch's import failed with the loader's "failed to map segment from shared object":
    # "internal error ImportError", exit 1, a bug's code.
    raised = ("raise ImportError('libtorch_cpu.so: failed to map segment from shared object')")
    done = subprocess.run([sys.executable, "-c", _FAILING_ALLOCATION.format(allocation=raised)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stderr) == (2, "error: cannot load libtorch_cpu.so: no memory to map it into (an "
                                                 "address-space limit such as `ulimit -v`, or the machine's memory)\n")


@pytest.mark.parametrize("allocation,said", [
    ("import torch; torch.empty(2**50, dtype=torch.uint8)", "out of memory: tried to allocate 1,048,576.0 GiB"),
    ("bytearray(2**62)", "out of memory (MemoryError)"),
    ("import torch; raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
     "capacity of 79.1 GiB of which 3.2 GiB is free.')",
     "out of memory: CUDA out of memory. Tried to allocate 20.00 GiB"),
], ids=["cpu-allocator", "python", "cuda"])
def test_running_out_of_memory_is_named_not_an_internal_error(allocation, said, tmp_path):
    """What no estimate caught (nmt/memory.py checks the main terms first) was "internal error RuntimeError: [enforce
    fail at alloc_cpu.cpp:127] ..." with exit 1, a bug's code: it is the machine's limit, and says what to lower."""
    done = subprocess.run([sys.executable, "-c", _FAILING_ALLOCATION.format(allocation=allocation)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {said}"), lines
    assert lines[0].endswith("lower train.max_tokens or the model's size to train; decode.batch_size or the beam "
                             "to translate")


@pytest.mark.parametrize("command", [["translate", "hi"], ["evaluate"], ["plot"], ["average"], ["export", "-o", "x"],
                                     ["serve"]])
def test_a_missing_run_is_refused_before_torch_or_matplotlib_is_imported(command, tmp_path):
    """Finding the run comes first: a missing one is refused without waiting ~2 s for torch (or matplotlib)."""
    missing = tmp_path / "no-such-run"
    done = subprocess.run([sys.executable, "-c", _TORCH_PROBE, *command, "--run", str(missing)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert f"error: {missing} is not a run directory" in done.stderr
    assert "heavy imports: []" in done.stderr


@pytest.mark.parametrize("named", [True, False], ids=["named-checkpoint", "none-saved"])
@pytest.mark.parametrize("command", [["translate", "hi"], ["evaluate"], ["export", "-o", "x"], ["serve"]])
def test_a_missing_checkpoint_is_refused_before_torch_is_imported(command, named, tmp_path):
    """A run without the checkpoint named by --checkpoint, or without any: refused without waiting for torch."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("")
    (run / "env.json").write_text("{}")  # a run's start writes both; a config.yaml alone is no run
    missing = run / "checkpoints" / "step-5.pt"
    options = ["--checkpoint", str(missing)] if named else ["--run", str(run)]
    done = subprocess.run([sys.executable, "-c", _TORCH_PROBE, *command, *options], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert (f"error: checkpoint not found: {missing}" if named else
            f"error: no checkpoint in {run} yet; train it with `nmt train --config {run}/config.yaml --run-dir {run}`"
            ) in done.stderr
    assert "heavy imports: []" in done.stderr
