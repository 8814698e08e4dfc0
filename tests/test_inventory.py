"""`nmt runs`: a row per run under a folder, read from its files alone."""

import json
import os
import shutil
import subprocess
import sys

from nmt.inventory import find_runs, format_runs, summarize
from nmt.lock import DirectoryLock
from nmt.run_dir import Run
from tests_helpers import nmt


def test_every_run_gets_its_row_damaged_or_training_ones_too(toy_transformer_run, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(toy_transformer_run, root / "a")
    shutil.copytree(toy_transformer_run, root / "b")
    shutil.rmtree(root / "a" / "eval", ignore_errors=True)  # the shared toy run may have been evaluated already
    (root / "a" / "eval").mkdir()
    for name, bleu in (("test.beam5", 31.5), ("valid.beam1", 12.25), ("test.ensemble2.beam5", 33.0)):
        (root / "a" / "eval" / f"{name}.report.json").write_text(json.dumps({"bleu": bleu}))
    (root / "a" / "eval" / "torn.report.json").write_text("{")  # a report being written is passed over
    (root / "b" / "config.yaml").write_text("model: [")
    with open(root / "b" / "metrics.jsonl", "a") as handle:  # a hand-edited log: `nmt runs` stopped at it
        handle.write('{"type": "train", "step": "151"}\n{"type": "valid", "step": 150, "dev_bleu": null}\n')
    (root / "not-a-run").mkdir()

    runs = find_runs(root)
    assert [r.directory.name for r in runs] == ["a", "b"]
    with DirectoryLock(root / "a"):  # as a training of run a holds it
        a = summarize(runs[0])
    b = summarize(runs[1])
    assert a.training and not b.training and not summarize(runs[0]).training
    assert a.model == "transformer 2x32" and a.pair == "en→fr"
    steps = max(r["step"] for r in Run(root / "a").metrics.records())
    assert a.steps == steps == 150 and a.best_dev_bleu is not None
    assert a.evaluations == [("test.ensemble2.beam5", 33.0), ("test.beam5", 31.5), ("valid.beam1", 12.25)]
    assert b.model == "unreadable config.yaml" and b.steps == steps
    table = format_runs([a, b]).splitlines()
    # The reason, whole, under the table: in the model cell it was cut to "unreadable config (b/config.yaml: in".
    assert table[-1] == (f"note: {root / 'b' / 'config.yaml'} line 1, column 9: invalid YAML: expected the node "
                         "content, but found '<stream end>' (while parsing a flow node)")
    assert table[0].split() == ["run", "model", "pair", "steps", "dev", "BLEU", "evaluations", "(BLEU)"]
    assert "(training)" in table[1] and "test.ensemble2.beam5 33.00, test.beam5 31.50 (+1 more)" in table[1]


def test_a_run_this_user_may_not_read_gets_its_row_and_the_others_theirs(toy_transformer_run, tmp_path,
                                                                        monkeypatch):
    """A colleague's private run on a shared disk (its metrics.jsonl mode 600) stopped the whole listing with
    "error: Permission denied (.../metrics.jsonl)". Root reads every file, so the refusal is made here."""
    import errno

    root = tmp_path / "runs"
    shutil.copytree(toy_transformer_run, root / "mine")
    shutil.copytree(toy_transformer_run, root / "private")
    metrics_log = type(Run(root / "mine").metrics)
    readable = metrics_log.records

    def records(self):
        if "private" in str(self.path):
            raise PermissionError(errno.EACCES, "Permission denied", str(self.path))
        return readable(self)

    monkeypatch.setattr(metrics_log, "records", records)
    mine, private = (summarize(run) for run in find_runs(root))
    assert mine.steps == 150 and mine.problem is None
    assert private.model == "transformer 2x32" and private.steps is None
    assert format_runs([mine, private]).splitlines()[-1] == \
        f"note: cannot read {root / 'private' / 'metrics.jsonl'}: Permission denied"


def test_cli_lists_runs_or_says_where_there_are_none(toy_transformer_run, tmp_path):
    shutil.copytree(toy_transformer_run, tmp_path / "runs" / "toy")
    listed = nmt("runs", "--root", tmp_path / "runs")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 2 and "transformer 2x32" in listed.stdout
    # A run directory as the root lists that run (it said "no runs under runs/toy/").
    alone = nmt("runs", "--root", tmp_path / "runs" / "toy")
    assert alone.returncode == 0 and alone.stdout.splitlines()[1:] == listed.stdout.splitlines()[1:], alone.stderr
    empty = nmt("runs", "--root", tmp_path / "nothing")
    # The folder as an argument, as `ls` takes one; two different folders are refused.
    positional = nmt("runs", tmp_path / "runs")
    assert positional.returncode == 0 and positional.stdout == listed.stdout, positional.stderr
    both = nmt("runs", tmp_path / "runs", "--root", tmp_path / "nothing")
    assert both.returncode != 0 and "two folders named" in both.stderr and len(both.stderr.splitlines()) == 1
    assert empty.returncode == 2 and "no runs under" in empty.stderr and len(empty.stderr.splitlines()) == 1
    # The folder was named, as an argument or --root: the hint names the argument, not "name the folder with --root".
    assert "nmt runs DIR" in empty.stderr


def test_an_evaluation_is_listed_whatever_the_locale(toy_transformer_run, tmp_path):
    # Reports are UTF-8 ("±" in the BLEU's confidence); `nmt runs` read them in the locale's encoding, and under
    # LC_ALL=C without Python's UTF-8 mode the evaluation dropped out of its row without a word.
    shutil.copytree(toy_transformer_run, tmp_path / "runs" / "toy")
    shutil.rmtree(tmp_path / "runs" / "toy" / "eval", ignore_errors=True)
    (tmp_path / "runs" / "toy" / "eval").mkdir()
    report = {"bleu": 31.5, "bleu_ci": "31.5 ± 1.2", "signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"}
    (tmp_path / "runs" / "toy" / "eval" / "test.beam5.report.json").write_text(
        json.dumps(report, ensure_ascii=False), encoding="utf-8")
    listed = subprocess.run([sys.executable, "-m", "nmt", "runs", str(tmp_path / "runs")], capture_output=True,
                            text=True, encoding="utf-8", env={**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"},
                            timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert "test.beam5 31.50" in listed.stdout.splitlines()[1]
