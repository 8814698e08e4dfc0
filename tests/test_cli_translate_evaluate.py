"""`nmt translate` and `nmt evaluate` on a tiny trained run: outputs, bad input, reports, pictures."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.config import load_config
from nmt.train import train
from tests_helpers import nmt, write_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, real_data_dir, prepared):
    tmp = tmp_path_factory.mktemp("tiny-run")
    cfg = load_config(write_config(tmp, model={"arch": "bahdanau", "embed_dim": 32, "hidden_size": 32}))
    run = tmp / "run"
    train(cfg, run, real_data_dir, log=lambda *_: None)
    return run


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_translate_arguments_and_stdin_keep_alignment(run_dir):
    result = nmt("translate", "--run", run_dir, "i'm home .", "He's calm.")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
    lines = ["go .", "", "   ", "i lost .\x07", "東京は大きい 🙂", "word " * 400, "he's calm ."]
    piped = nmt("translate", "--run", run_dir, "--beam", "3", input="\n".join(lines) + "\n")
    assert piped.returncode == 0, piped.stderr
    out = piped.stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    assert out[1] == "" and out[2] == ""
    assert "truncated" in piped.stderr and "Traceback" not in piped.stderr


def test_a_dash_reads_stdin(run_dir):
    # `cat file | nmt translate -` translated the dash itself and left stdin unread.
    lines = "go .\ni'm home .\n"
    dash = nmt("translate", "--run", run_dir, "--beam", "1", "-", input=lines)
    assert dash.returncode == 0, dash.stderr
    assert dash.stdout == nmt("translate", "--run", run_dir, "--beam", "1", input=lines).stdout
    assert len(dash.stdout.splitlines()) == 2


def test_a_tsv_on_stdin_is_translated_whole_with_one_warning(run_dir):
    """`cat test.tsv | nmt translate` translated each source<TAB>target line whole, targets too, and said nothing."""
    piped = nmt("translate", "--run", run_dir, "--beam", "1", input="\ngo .\tva !\ni'm home .\tje suis chez moi .\n")
    assert piped.returncode == 0 and len(piped.stdout.split("\n")[:-1]) == 3, piped.stderr
    assert piped.stderr.count("holds a TAB") == 1
    assert ("warning: stdin line 2 holds a TAB, which is read as a space: a source<TAB>target file? Translate its "
            "first column: cut -f1 FILE | nmt translate") in piped.stderr
    assert "TAB" not in nmt("translate", "--run", run_dir, "--beam", "1", input="go .\n").stderr
    # A test set's XML piped in: its markup lines are translated as sentences, with one warning saying so.
    xml = nmt("translate", "--run", run_dir, "--beam", "1",
              input='<?xml version="1.0"?>\n<srcset>\n<seg id="1">go .</seg>\n</srcset>\n')
    assert xml.returncode == 0 and len(xml.stdout.splitlines()) == 4, xml.stderr
    assert xml.stderr.count("warning: stdin line 1 starts IWSLT's or WMT's tagged text") == 1


def test_truncation_warnings_stop_after_three_and_give_a_total(run_dir):
    # A file of over-long lines printed one warning per line, burying the rest of stderr.
    lines = [f"{n} " + "word " * 400 for n in range(10)] + ["go ."]
    piped = nmt("translate", "--run", run_dir, "--beam", "1", input="\n".join(lines) + "\n")
    assert piped.returncode == 0, piped.stderr
    assert len(piped.stdout.splitlines()) == len(lines)
    said = piped.stderr.splitlines()
    shown = [line for line in said if "truncated to" in line]
    assert len(shown) == 3
    for line, text in zip(shown, lines):
        assert re.fullmatch(r"warning: input of \d{3} pieces truncated to 255: " + re.escape(f"{text[:40]!r}..."), line)
    assert said[-2:] == ["warning: more truncated inputs: counted, no longer shown one by one",
                         "warning: 10 truncated inputs in all"]


def test_translate_into_a_reader_that_leaves_stops_quietly(run_dir, tmp_path):
    # `nmt translate < big.txt | head -1`: click made this a bare exit 1, nmt's code for an internal error.
    source = tmp_path / "big.txt"
    source.write_text("i'm home .\n" * 20_000, encoding="utf-8")
    with source.open("rb") as stdin:
        process = subprocess.Popen([sys.executable, "-m", "nmt", "translate", "--run", str(run_dir), "--beam", "1"],
                                   stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = process.stdout.readline()
        process.stdout.close()  # far more than a pipe holds is still to come
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=120) == 141  # 128 + SIGPIPE, what `yes | head` reports
    assert first.strip() and stderr == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_translate_into_a_full_disk_names_the_standard_output(run_dir):
    # `nmt translate < in.txt > /dev/full` said "error: No space left on device": which file, of the run's and
    # the output, was not said.
    with open("/dev/full", "w") as full:
        process = subprocess.run([sys.executable, "-m", "nmt", "translate", "--run", str(run_dir), "--beam", "1"],
                                 input="i'm home .\n", stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert process.returncode == 2
    assert process.stderr == "error: No space left on device (writing the standard output)\n"


def test_translate_attention_outputs(run_dir, tmp_path):
    heat = tmp_path / "heat.png"
    result = nmt("translate", "--run", run_dir, "--attention", heat, "--show-attention", "i'm home .")
    assert result.returncode == 0, result.stderr
    width, height = png_size(heat)
    assert width > 200 and height > 150
    assert "→" in result.stdout.splitlines()[1]
    # Sentences read from stdin get the same: a heatmap of the first, each line's strongest links (both were
    # dropped without a word before).
    piped_heat = tmp_path / "piped.png"
    piped = nmt("translate", "--run", run_dir, "--attention", piped_heat, "--show-attention",
                input="i'm home .\nhe's calm .\n")
    assert piped.returncode == 0, piped.stderr
    assert piped_heat.read_bytes() == heat.read_bytes()  # the first sentence's, as when given as an argument
    lines = piped.stdout.splitlines()
    assert len(lines) == 4 and lines[:2] == result.stdout.splitlines()[:2] and "→" in lines[3]
    assert f"attention heatmap written to {piped_heat}" in piped.stderr


def test_translate_n_best_lists_in_the_moses_format(run_dir):
    plain = nmt("translate", "--run", run_dir, "--beam", "4", input="i'm home .\n\nhe's calm .\n")
    listed = nmt("translate", "--run", run_dir, "--beam", "4", "--n-best", "3",
                 input="i'm home .\n\nhe's calm .\n")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split(" ||| ") for line in listed.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 2, 2, 2]
    assert rows[3] == ["1", "", "logprob= 0.0000", "0.0000"]  # the empty line keeps its place
    for index in (0, 2):
        ranked = [r for r in rows if r[0] == str(index)]
        assert ranked[0][1] == plain.stdout.splitlines()[index]  # the list starts with the translation
        assert len({r[1] for r in ranked}) == 3
        scores = [float(r[3]) for r in ranked]
        assert scores == sorted(scores, reverse=True) and all(float(r[2].split()[1]) < 0 for r in ranked)
    arguments = nmt("translate", "--run", run_dir, "--beam", "4", "--n-best", "2", "i'm home .")
    assert arguments.stdout.splitlines() == listed.stdout.splitlines()[:2]


def test_translate_samples_reproducibly_by_seed(run_dir):
    lines = "".join(f"{s}\n" for s in ["i'm home .", "he's calm .", "we lost .", "go away ."] * 5)
    first = nmt("translate", "--run", run_dir, "--sample-topk", "0", "--temperature", "1.5", "--seed", "4",
                input=lines)
    again = nmt("translate", "--run", run_dir, "--sample-topk", "0", "--temperature", "1.5", "--seed", "4",
                input=lines)
    other = nmt("translate", "--run", run_dir, "--sample-topk", "0", "--temperature", "1.5", "--seed", "5",
                input=lines)
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 20 and first.stdout == again.stdout != other.stdout
    # --beam 1 said outright: the early check once took top-k 0 (the whole vocabulary) for "no sampling" and refused
    draws = nmt("translate", "--run", run_dir, "--sample-topp", "0.95", "--beam", "1", "--n-best", "3", "i'm home .")
    assert draws.returncode == 0, draws.stderr
    assert [line.split(" ||| ")[0] for line in draws.stdout.splitlines()] == ["0", "0", "0"]


def test_translate_and_evaluate_take_no_repeat_ngram(run_dir, real_data_dir):
    """The option reaches the decode settings (the ban itself: tests/test_search.py; this tiny model never repeats a
    word, so its output cannot show it)."""
    free = nmt("translate", "--run", run_dir, "--beam", "3", "--no-repeat-ngram", "2", "we have two cats .", "go .")
    assert free.returncode == 0 and len(free.stdout.splitlines()) == 2, free.stderr
    report = nmt("evaluate", "--run", run_dir, "--split", "valid", "--beam", "1", "--no-repeat-ngram", "3",
                 data_dir=real_data_dir)
    assert report.returncode == 0, report.stderr
    saved = json.loads((run_dir / "eval" / "valid.beam1.report.json").read_text())
    assert saved["decode"]["no_repeat_ngram_size"] == 3


@pytest.mark.parametrize("args,fragment", [
    (["--n-best", "6"], "an n-best list of 6 needs a beam of 6 or more (the beam is"),  # the run's beam
    (["--n-best", "2", "--beam", "1"], "needs a beam of 2 or more (the beam is 1)"),
    (["--n-best", "2", "--show-attention"], "--show-attention adds lines of its own"),
    (["--sample-topk", "5", "--beam", "4"], "sampling (top-k 5) draws one continuation at a time: it takes beam 1"),
    (["--seed", "3"], "--seed seeds the sampler: add --sample-topk K"),
    (["--sample-topp", "0"], "top-p must be above 0"),
])
def test_translate_n_best_it_cannot_give_is_refused(run_dir, args, fragment):
    result = nmt("translate", "--run", run_dir, *args, "i'm home .")
    assert result.returncode == 2 and result.stdout == ""
    assert fragment in result.stderr and len(result.stderr.splitlines()) == 1


def test_decode_settings_from_the_command_line_leave_the_run_alone(run_dir, tmp_path):
    config = (run_dir / "config.yaml").read_text()
    free = nmt("translate", "--run", run_dir, "--beam", "1", "i'm home .")
    short = nmt("translate", "--run", run_dir, "--set", "decode.max_len_a=0", "--set", "decode.max_len_b=2",
                "--beam", "1", "i'm home .")
    assert short.returncode == 0, short.stderr
    assert len(short.stdout.split()) < len(free.stdout.split())  # a piece and EOS at most
    # Three sentences are enough for the settings; decoding a whole split is the report test's (below).
    (tmp_path / "settings.txt").write_text("go .\ni'm home .\nhe's calm .\n")
    (tmp_path / "settings.ref.txt").write_text("Va !\nJe suis chez moi.\nIl est calme.\n")
    result = nmt("evaluate", "--run", run_dir, "--src", tmp_path / "settings.txt", "--ref",
                 tmp_path / "settings.ref.txt", "--beam", "1", "--set", "decode.batch_size=7")
    assert result.returncode == 0, result.stderr
    report = json.loads((run_dir / "eval" / "settings.beam1.report.json").read_text())
    assert report["decode"]["batch_size"] == 7 and (run_dir / "config.yaml").read_text() == config


def test_translate_without_run_is_one_line_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "nmt", "translate", "hello"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: no trained run found under runs/; train one with `nmt train")
    assert len(result.stderr.splitlines()) == 1


def test_evaluate_writes_report_with_signatures_and_buckets(run_dir, real_data_dir):
    result = nmt("evaluate", "--run", run_dir, "--split", "valid", "--beam", "1", data_dir=real_data_dir)
    assert result.returncode == 0, result.stderr
    assert "BLEU signature: nrefs:var|bs:1000|seed:12345|case:mixed|eff:no|tok:13a" in result.stdout
    assert "TER signature: nrefs:var|case:lc|tok:tercom" in result.stdout
    report = json.loads((run_dir / "eval" / "valid.beam1.report.json").read_text())
    # The tiny model's BLEU is about 0 (an interval of 0 too); its chrF is not.
    assert 0 < report["chrf_ci95"] < 10 and f"95% CI ± {report['bleu_ci95']:.2f} BLEU" in result.stdout
    hyps = (run_dir / "eval" / "valid.beam1.hyp.txt").read_text().splitlines()
    assert len(hyps) == report["sentences"] > 1500
    assert [b["bucket"] for b in report["buckets"]] == ["1-5", "6-10", "11-15", "16+"]
    assert sum(b["sentences"] for b in report["buckets"]) == report["sentences"]
    assert report["decode"]["beam_size"] == 1 and report["sentences_per_s"] > 0


def test_evaluate_without_its_prepared_data_names_the_prepare_command(run_dir, real_data_dir, tmp_path):
    # It said "run `nmt prepare`", which prepares the default config's data, not this run's.
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "fra-eng").symlink_to(real_data_dir / "fra-eng")  # the corpus, nothing prepared
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("eval"))
    env = json.loads((copy / "env.json").read_text())
    (copy / "env.json").write_text(json.dumps({**env, "prepared_data": str(tmp_path / "gone")}))
    result = nmt("evaluate", "--run", copy, "--data-dir", tmp_path / "empty")
    assert result.returncode == 2
    assert (f"no prepared data for these settings under {tmp_path / 'empty'}; run `nmt prepare --config "
            f"{copy / 'config.yaml'} --data-dir {tmp_path / 'empty'}`") in result.stderr, result.stderr


def test_evaluate_on_data_an_older_nmt_prepared_says_so_and_how_to_rebuild_it(run_dir, real_data_dir, tmp_path):
    """Data prepared by an nmt of the first format (one .npz per split: ddabc86 and before) said "no prepared data
    for these settings ... (the run was trained on D, which no longer holds that data)", while D held it."""
    data = tmp_path / "data"
    (data / "prepared").mkdir(parents=True)
    (data / "fra-eng").symlink_to(real_data_dir / "fra-eng")
    env = json.loads((run_dir / "env.json").read_text())
    older = data / "prepared" / Path(env["prepared_data"]).name
    shutil.copytree(env["prepared_data"], older)
    manifest = json.loads((older / "manifest.json").read_text())
    (older / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("eval"))
    (copy / "env.json").write_text(json.dumps({**env, "prepared_data": str(older)}))
    result = nmt("evaluate", "--run", copy, "--data-dir", data)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr == (f"error: {older} holds these settings' data in an older nmt's format (1; this one reads "
                             f"2); run `nmt prepare --config {copy / 'config.yaml'} --data-dir {data}` to rebuild it "
                             "in place (the same split and token ids)\n")
    assert json.loads((older / "manifest.json").read_text())["format"] == 1  # evaluate prepares nothing


def test_evaluate_files_and_compare(run_dir, real_data_dir, tmp_path):
    src, ref1, ref2 = tmp_path / "src.txt", tmp_path / "ref1.txt", tmp_path / "ref2.txt"
    src.write_text("go .\ni'm home .\n")
    ref1.write_text("Va !\nJe suis chez moi.\n")
    ref2.write_text("Bouge !\n\n")
    result = nmt("evaluate", "--run", run_dir, "--src", src, "--ref", ref1, "--ref", ref2, "--beam", "2")
    assert result.returncode == 0, result.stderr
    report = json.loads((run_dir / "eval" / "src.beam2.report.json").read_text())
    assert report["origin"] == f"--src {src} --ref {ref1} --ref {ref2}"
    bad = nmt("evaluate", "--run", run_dir, "--src", src, "--ref", tmp_path / "missing.txt")
    assert bad.returncode == 2 and bad.stderr.startswith("error: file not found")
    bad = nmt("evaluate", "--run", run_dir, "--src", src, "--ref", tmp_path)
    assert bad.returncode == 2 and "is a directory" in bad.stderr, bad.stderr
    # Pipes, as `--src <(cut -f1 test.tsv) --ref <(cut -f2 test.tsv)` hands them over: the same scores as the files.
    fds = []
    for path in (src, ref1, ref2):
        read_end, write_end = os.pipe()
        os.write(write_end, path.read_bytes())
        os.close(write_end)
        fds.append(read_end)
    try:
        piped = nmt("evaluate", "--run", run_dir, "--src", f"/dev/fd/{fds[0]}", "--ref", f"/dev/fd/{fds[1]}",
                    "--ref", f"/dev/fd/{fds[2]}", "--beam", "2", pass_fds=fds)
    finally:
        for fd in fds:
            os.close(fd)
    assert piped.returncode == 0, piped.stderr
    piped_reports = list((run_dir / "eval").glob("piped-*.beam2.report.json"))  # named by the sources' hash
    assert len(piped_reports) == 1
    scores = [json.loads(report.read_text())["bleu"]
              for report in (run_dir / "eval" / "src.beam2.report.json", piped_reports[0])]
    assert scores[0] == scores[1]
    # `--src -` reads the sources from stdin (it was "file not found: -"): the same sources, the same report.
    dashed = nmt("evaluate", "--run", run_dir, "--src", "-", "--ref", ref1, "--ref", ref2, "--beam", "2",
                 input=src.read_text())
    assert dashed.returncode == 0, dashed.stderr
    assert json.loads(piped_reports[0].read_text())["origin"] == f"--src - --ref {ref1} --ref {ref2}"
    assert json.loads(piped_reports[0].read_text())["bleu"] == scores[0]
    table = nmt("evaluate", "--compare", run_dir, "--compare", run_dir, "--split", "valid", "--beam", "1",
                data_dir=real_data_dir)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.strip().splitlines()
    assert len(lines) == 4 and "(baseline)" in lines[1]
    # A run against itself: the same translations, no difference (sacrebleu's p for that is its smallest, 0.0010).
    assert lines[2].endswith("(identical)") and lines[2].split()[1] == lines[1].split()[1]
    assert lines[3].startswith("BLEU signature: nrefs:var|case:mixed|eff:no|tok:13a") and "1000 samples" in lines[3]
    # --run is the baseline of the --compare runs, and --src/--ref the shared test set (not the split).
    on_files = nmt("evaluate", "--run", run_dir, "--compare", run_dir, "--src", src, "--ref", ref1, "--ref", ref2,
                   "--beam", "2")
    assert on_files.returncode == 0, on_files.stderr
    rows = on_files.stdout.strip().splitlines()[1:-1]
    assert len(rows) == 2 and "(baseline)" in rows[0]
    assert float(rows[0].split()[1]) == pytest.approx(scores[0], abs=0.01)  # the files' BLEU, as scored above
    # Sources cut to decode.max_input_tokens are counted per run, as a report counts them ("i'm home ." is over 3).
    cut = nmt("evaluate", "--run", run_dir, "--compare", run_dir, "--src", src, "--ref", ref1, "--beam", "1",
              "--set", "decode.max_input_tokens=3")
    assert cut.returncode == 0, cut.stderr
    assert cut.stdout.strip().splitlines()[-2:] == [
        f"note: {run_dir} cut 1 of the 2 sources to its decode.max_input_tokens pieces: their translations miss "
        "the rest"] * 2


@pytest.fixture(scope="module")
def twin_run(run_dir, tmp_path_factory):
    """A copy of the run whose last.pt has a twin: an ensemble of a model and itself decodes as the model alone."""
    copy = tmp_path_factory.mktemp("twin") / "run"
    shutil.copytree(run_dir, copy)
    shutil.copyfile(copy / "checkpoints" / "last.pt", copy / "checkpoints" / "twin.pt")
    return copy


def test_an_ensemble_translates_evaluates_and_scores_through_every_command(twin_run, real_data_dir):
    last, twin = twin_run / "checkpoints" / "last.pt", twin_run / "checkpoints" / "twin.pt"
    sentences = ["i'm home .", "he's calm .", "we lost ."]
    alone = nmt("translate", "--checkpoint", last, "--beam", "3", *sentences)
    both = nmt("translate", "--checkpoint", last, "--ensemble", twin, "--beam", "3", *sentences)
    assert both.returncode == 0, both.stderr
    assert both.stdout == alone.stdout and len(both.stdout.splitlines()) == 3
    # With another checkpoint of the run (by its directory: the one it translates with), it still translates.
    mixed = nmt("translate", "--checkpoint", last, "--ensemble", twin_run, "--beam", "2", input="\n".join(sentences))
    assert mixed.returncode == 0 and len(mixed.stdout.splitlines()) == 3, mixed.stderr

    for args in ([], ["--ensemble", twin]):
        result = nmt("evaluate", "--checkpoint", last, *args, "--split", "valid", "--beam", "1",
                     data_dir=real_data_dir)
        assert result.returncode == 0, result.stderr
    # last.pt is not the run's default (best.pt): its reports are named for it.
    single = json.loads((twin_run / "eval" / "valid.last.beam1.report.json").read_text())
    ensemble = json.loads((twin_run / "eval" / "valid.last.ensemble2.beam1.report.json").read_text())
    assert ensemble["ensemble"] == [str(last), str(twin)] and "ensemble" not in single
    assert ensemble["chrf"] == pytest.approx(single["chrf"], abs=0.05)

    pairs = "i'm home .\tJe suis chez moi.\nhe's calm .\tIl est calme.\n"
    scored = [nmt("score", "--checkpoint", last, *args, input=pairs) for args in ([], ["--ensemble", twin])]
    assert scored[1].returncode == 0, scored[1].stderr
    for ours, theirs in zip(*(s.stdout.splitlines() for s in scored)):
        assert float(ours.split("\t")[0]) == pytest.approx(float(theirs.split("\t")[0]), abs=1e-3)


def test_an_ensemble_it_cannot_make_is_refused(twin_run, toy_transformer_run, tmp_path):
    last = twin_run / "checkpoints" / "last.pt"
    for args, fragment in [
        (["--ensemble", last], "is in the ensemble already"),
        (["--ensemble", toy_transformer_run], "was trained with another SentencePiece model than"),
        (["--ensemble", tmp_path / "nowhere"], "no such run directory or checkpoint"),
    ]:
        result = nmt("translate", "--checkpoint", last, *args, "i'm home .")
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert fragment in result.stderr and len(result.stderr.splitlines()) == 1
    compared = nmt("evaluate", "--compare", twin_run, "--compare", twin_run, "--ensemble", last)
    assert compared.returncode == 2 and "--ensemble does not apply" in compared.stderr


def test_plot_learning_curves(run_dir, tmp_path):
    out = tmp_path / "curves.png"
    result = nmt("plot", "--run", run_dir, "-o", out)
    assert result.returncode == 0, result.stderr
    width, height = png_size(out)
    assert width > 500 and height > 250


def test_evaluate_finds_the_data_the_run_was_trained_on_or_says_what_to_run(run_dir, real_data_dir, tmp_path):
    """A run trained with --data-dir elsewhere is scored without repeating it: its env.json names its prepared data.
    Once that is gone too, the error says what to run and where the run was trained."""
    trained_on = json.loads((run_dir / "env.json").read_text())["prepared_data"]
    found = nmt("evaluate", "--run", run_dir, "--data-dir", tmp_path / "empty", "--split", "valid", "--beam", "1",
                "--out-dir", tmp_path / "eval")
    assert found.returncode == 0, found.stderr
    assert f"using {trained_on}, where the run was trained" in found.stderr
    report = json.loads((tmp_path / "eval" / "valid.beam1.report.json").read_text())
    assert report["origin"] == os.path.join(trained_on, "valid.jsonl")  # the report says what it scored
    with open(report["origin"], encoding="utf-8") as valid:
        assert report["sentences"] == sum(1 for _ in valid)
    moved = tmp_path / "moved-run"
    os.makedirs(moved / "checkpoints")
    for name in ("config.yaml", "spm.model", "normalizer.json", "checkpoints/best.pt"):
        (moved / name).write_bytes((run_dir / name).read_bytes())
    (moved / "env.json").write_text(json.dumps({"prepared_data": str(tmp_path / "gone")}))
    missing = nmt("evaluate", "--run", moved, "--data-dir", tmp_path / "empty")
    assert missing.returncode == 2 and missing.stderr.startswith("error: corpus not found at"), missing.stderr
    assert f"(the run was trained on {tmp_path / 'gone'}, which no longer holds that data)" in missing.stderr
    other = nmt("evaluate", "--run", run_dir, "--data-dir", real_data_dir, "--split", "train")
    assert other.returncode == 2 and other.stderr.strip() == "error: --split must be test or valid, got 'train'"


def test_evaluate_where_the_run_cannot_take_files(run_dir, tmp_path):
    """A run on a disk that takes no files (read-only, or here a path through a file, which refuses root too) is
    refused before decoding, with the way out; --out-dir puts the hypotheses and the report elsewhere."""
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("go .\ni'm home .\n")
    ref.write_text("Va !\nJe suis chez moi.\n")
    (tmp_path / "a-file").write_text("")
    bad = nmt("evaluate", "--run", run_dir, "--src", src, "--ref", ref, "--out-dir", tmp_path / "a-file" / "eval")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert bad.stderr.startswith(f"error: cannot write the evaluation to {tmp_path / 'a-file' / 'eval'}: ")
    assert "--out-dir DIR" in bad.stderr and "using" not in bad.stderr  # refused before the model decoded anything
    elsewhere = tmp_path / "elsewhere"
    good = nmt("evaluate", "--run", run_dir, "--src", src, "--ref", ref, "--beam", "1", "--out-dir", elsewhere)
    assert good.returncode == 0, good.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["src.beam1.hyp.txt", "src.beam1.report.json"]
    assert not (run_dir / "eval" / "src.beam1.report.json").exists()


def test_plot_where_the_run_takes_no_files_points_to_another_file(run_dir, monkeypatch):
    """The default picture goes into the run; a run on a read-only disk (stood in for here: root writes anywhere
    else) is refused before plotting, with the way out."""
    from typer.testing import CliRunner

    import nmt.cli as cli
    from nmt.errors import NMTError

    before = (run_dir / "curves.png").exists()
    monkeypatch.setattr(cli, "unwritable_reason", lambda folder: "Read-only file system")
    result = CliRunner().invoke(cli.app, ["plot", "--run", str(run_dir)])
    assert isinstance(result.exception, NMTError)
    assert str(result.exception) == (f"cannot write {run_dir / 'curves.png'}: Read-only file system; choose another "
                                     "file with -o FILE")
    assert (run_dir / "curves.png").exists() == before
