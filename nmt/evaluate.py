"""`nmt evaluate`: sacrebleu BLEU/chrF with all references, per-length buckets, reports, run comparison."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
import time
import unicodedata
from pathlib import Path

from nmt.config import Config
from nmt.data.dataset import load_references
from nmt.data.function_words import swapped_by_words
from nmt.data.languages import base_language
from nmt.data.prepare import find_prepared
from nmt.data.tagged_text import READ_AS, tagged_sentences, tagging
from nmt.data.text_files import piped_lines, text_lines
from nmt.data.tmx import holds_tmx, tmx_pairs
from nmt.data.writing_systems import SAMPLE, swapped_sides
from nmt.engines import Engine, tab_separated_phrases
from nmt.errors import NMTError, counted, warn
from nmt.metrics import (UNSPACED, bleu_metric, bootstrap_seed, corpus_bleu, corpus_scores, paired_bootstrap,
                         reference_streams)
from nmt.atomic import unwritable_reason, write_text_atomic
from nmt.translator import Translator

BUCKETS = ((1, 5), (6, 10), (11, 15), (16, None))  # source words
# A Chinese, Japanese or Korean source has no spaces to count words by: its characters instead (~2 a word).
CHARACTER_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, None))


# sacrebleu's CLI default for --confidence: 1,000 resamples of the test sentences (0.5 s for 2,051 sentences).
BOOTSTRAP_SAMPLES = 1000


def bucket_name(low: int, high: int | None) -> str:
    return f"{low}-{high}" if high is not None else f"{low}+"


def length_unit(source_lang: str) -> str:
    return "characters" if base_language(source_lang) in UNSPACED else "words"


def source_length(sentence: str, unit: str) -> int:
    return len(sentence.replace(" ", "")) if unit == "characters" else len(sentence.split())


def length_buckets(sources: list[str], hypotheses: list[str], references: list[list[str]],
                   target_lang: str = "", source_lang: str = "") -> list[dict]:
    """BLEU per source-length bucket (words, or characters for an unspaced source), with its sentence count."""
    unit = length_unit(source_lang)
    lengths = [source_length(s, unit) for s in sources]
    rows = []
    for low, high in CHARACTER_BUCKETS if unit == "characters" else BUCKETS:
        idx = [i for i, n in enumerate(lengths) if low <= n and (high is None or n <= high)]
        row = {"bucket": bucket_name(low, high), "sentences": len(idx), "bleu": None}
        if idx:
            row["bleu"] = corpus_bleu([hypotheses[i] for i in idx], [references[i] for i in idx], target_lang)
        rows.append(row)
    return rows


def check_readable(path: Path) -> None:
    """A --src/--ref/--tgt file that cannot be read as one: said before anything is read or loaded."""
    if str(path) != "-" and not Path(path).exists():
        raise NMTError(f"file not found: {path}")
    if str(path) != "-" and Path(path).is_dir():
        raise NMTError(f"{path} is a directory, not a file of sentences")


def read_lines(path: Path, language: str = "", partner: str = "") -> list[str]:
    """A --src/--ref file's lines, read as a corpus's file is (gzip, bzip2, xz, an archive of one file, UTF-16 told
    by its BOM; nmt/data/text_files.py), or an IWSLT or WMT test set's XML or SGML: its segments (`language`'s,
    of WMT's XML of a source and its references together), or a TMX's `language` segments of the units that hold
    `partner`'s too (the same file as --src and --ref: both read the same units, aligned); a pipe
    (`--ref <(cut -f2 test.tsv)`) is read whole, and `-` is stdin."""
    check_readable(path)
    stdin = str(path) == "-"
    if not stdin and Path(path).is_file():
        lines = [line for _, line in text_lines(Path(path))]
    else:
        try:
            data = sys.stdin.buffer.read() if stdin else Path(path).read_bytes()
        except OSError as err:
            raise NMTError(f"cannot read {path}: {err.strerror}") from None
        lines = piped_lines(data, str(path))
    if holds_tmx(lines):
        sentences = [sentence for sentence, _ in tmx_pairs(path, (language, partner), lines=enumerate(lines, 1))]
        if not sentences:
            raise NMTError(f"{path} holds no translation unit: nothing to score")
        return sentences
    # An IWSLT or WMT test set's XML or SGML gives its segments; plain text, every line.
    sentences = [sentence for _, sentence in tagged_sentences(enumerate(lines, 1), path, language)]
    if not sentences:
        raise NMTError(f"{path} is empty: nothing to score" if not lines else
                       f"{path} holds no sentence, read as {READ_AS[tagging(next(filter(str.strip, lines)))]}: "
                       "nothing to score")  # only tagged text can hold lines and no sentence
    return sentences


def _refuse_pairs_file(path: Path, lines: list[str]) -> None:
    """A --src or --ref file every line of which holds a TAB is a TSV of pairs: given as --src, each line was
    translated whole (its target too); as --ref, the sources were scored as part of the references."""
    written = [line for line in lines if line.strip()]
    if written and all("\t" in line for line in written):
        raise NMTError(f"every line of {path} holds a TAB: a file of source<TAB>target pairs? Give each side as its "
                       f"own file: --src <(cut -f1 {path}) --ref <(cut -f2 {path})")


def references_from_files(paths: list[Path], count: int, language: str = "",
                          partner: str = "") -> list[list[str]]:
    """Parallel reference files (one per reference set), each aligned with the sources; empty lines = missing.
    `language`: the references', which a WMT XML of a source and its references together is read for (and a TMX,
    in its units that hold `partner`'s, the sources' language, too). A file given twice is refused: BLEU and chrF
    take a reference set once however often it comes, so the second was a typo for another."""
    seen = set()
    for path in paths:
        if Path(path).is_file():
            identity = Path(path).resolve()
            if identity in seen:
                raise NMTError(f"--ref {path} is given twice: name each reference set once")
            seen.add(identity)
    columns = [read_lines(p, language, partner) for p in paths]
    for path, column in zip(paths, columns):
        _refuse_pairs_file(path, column)
        if len(column) != count:
            raise NMTError(f"{path} has {counted(len(column), 'line')} but the source has {count}")
    return [[c[i] for c in columns if c[i].strip()] for i in range(count)]


def references_not_nfc(references: list[list[str]]) -> list[int]:
    """The sentences (counted from 1) with a reference not in Unicode NFC: a decomposed é (e + U+0301) is no
    match for a translation's é, and sacrebleu compares the text as it comes."""
    return [number for number, refs in enumerate(references, 1)
            if any(not unicodedata.is_normalized("NFC", reference) for reference in refs)]


def source_label(path: Path, sources: list[str]) -> str:
    """What a --src file's report is named after: its stem; for a pipe (named /dev/fd/63 whatever it carries), the
    sources' own hash, so that two piped evaluations do not overwrite each other's report."""
    if path.is_file():
        return path.stem
    return "piped-" + hashlib.sha256("\n".join(sources).encode("utf-8")).hexdigest()[:10]


@dataclasses.dataclass(frozen=True)
class EvaluationSet:
    sources: list[str]
    references: list[list[str]]  # every reference of each source
    label: str  # what names the report: the split, the --src file's stem, or piped-<hash of the sources>
    origin: str  # where it was read (the report keeps it): the prepared split's file, or the --src/--ref files
    # A prepared split's references went through the run's target normalization (its lowercasing included); files
    # given with --ref are scored as they are.
    normalized_references: bool = False
    # --constraints: per source, the target phrases its translation must hold (lexical constraints; [] for none).
    constraints: list[list[str]] | None = None
    constraints_origin: str = ""

    def __post_init__(self):
        """A source with no reference has nothing to be scored against (its line empty in every --ref file): named by
        its number (its line's in plain text, its segment's in a test set's XML), before any decoding; an empty
        source too, as a blank line at the end of every file, is told to be removed."""
        missing = [number for number, refs in enumerate(self.references, 1) if not refs]
        if missing:
            first = missing[0]
            also = "; so is the source: remove its line from every file" if not self.sources[first - 1].strip() else ""
            raise NMTError(f"sentence {first} of {self.origin} has no reference (every reference of it is empty"
                           f"{also}): every source sentence needs at least one ({counted(len(missing), 'sentence')} "
                           f"{'has' if len(missing) == 1 else 'have'} none)")


def load_test_set(cfg: Config, split: str, src: Path | None, refs: list[Path] | None, data_dir: Path,
                  trained_on: Path | None = None, config_file: Path | None = None,
                  languages: tuple[str, str] = ("", "")) -> EvaluationSet:
    """A split of the run's prepared data (under `data_dir`, else `trained_on`, where the run was trained), or
    --src/--ref files (`languages`, the run's source and target: the sides a WMT XML of a source and its references
    together is read for). `config_file`: the run's, named by the error when its data is not prepared."""
    if src is not None:
        if not refs:
            raise NMTError("--src needs at least one --ref file")
        sources = read_lines(src, *languages)
        _refuse_pairs_file(src, sources)
        return EvaluationSet(sources, references_from_files(list(refs), len(sources), languages[1], languages[0]),
                             source_label(Path(src), sources),
                             " ".join(["--src", str(src), *(f"--ref {ref}" for ref in refs)]))
    if split not in ("test", "valid"):
        raise NMTError(f"--split must be test or valid, got {split!r}")
    prepared = find_prepared(cfg.data, data_dir, trained_on, warn, config_file)
    sources, references = load_references(prepared, split)
    return EvaluationSet(sources, references, split, str(Path(prepared).resolve() / f"{split}.jsonl"),
                         normalized_references=True)


def with_constraints(test_set: EvaluationSet, path: Path) -> EvaluationSet:
    """`test_set` held to the phrases of `path`: a line per source, its phrases separated by TABs (an empty line:
    none), read as --src is (compressed, a pipe, `-`), as fairseq-interactive and Sockeye take constraints."""
    lines = read_lines(path)
    if len(lines) != len(test_set.sources):
        raise NMTError(f"--constraints {path} has {counted(len(lines), 'line')} but the test set "
                       f"{counted(len(test_set.sources), 'source sentence')}: one line per source (empty for none)")
    return dataclasses.replace(test_set, constraints=[tab_separated_phrases(line) for line in lines],
                               constraints_origin=str(path))


def phrases_held(hypotheses: list[str], constraints: list[list[str]], target_lang: str) -> dict:
    """How many of the phrases the translations hold, each as words of its own (not inside a longer word; in a
    language written without spaces, anywhere): WMT's terminology task's exact-match term use. A phrase given n
    times for a sentence is held as many times as it stands there, up to n (the search asks for n)."""
    unspaced = base_language(target_lang) in UNSPACED

    def standing(phrase: str, hypothesis: str) -> int:
        return (hypothesis.count(phrase) if unspaced
                else len(re.findall(rf"(?<!\w){re.escape(phrase)}(?!\w)", hypothesis)))

    asked = sum(map(len, constraints))
    held = sum(min(phrases.count(p), standing(p, h)) for h, phrases in zip(hypotheses, constraints)
               for p in set(phrases))
    return {"sentences": sum(map(bool, constraints)), "phrases": asked, "held": held,
            "held_share": round(held / asked, 4) if asked else None}


def refuse_swapped_files(test_set: EvaluationSet, source_lang: str, target_lang: str) -> None:
    """--src and --ref files given the other way round (a test set's .fr as --src of an en→fr run) were translated
    and scored, BLEU near zero with no word of why. A prepared split was checked when it was prepared."""
    if not test_set.normalized_references:
        refuse_swapped(test_set.sources, [refs[0] for refs in test_set.references], (source_lang, target_lang))


def refuse_swapped(sources: list[str], targets: list[str], languages: tuple[str, str],
                   options: tuple[str, str] = ("--src", "--ref")) -> None:
    """Files of sources and targets (`options` name them) the other way round than the run's `languages`: refused
    where the first sentences' scripts or commonest words tell, as a corpus's sides are (nmt/data/sources.py)."""
    pairs = list(zip(sources[:SAMPLE], targets[:SAMPLE]))
    if swapped_sides(pairs, languages) or swapped_by_words(pairs, languages):
        raise NMTError(f"the {options[0]} sentences read as {languages[1]} and the {options[1]} ones as "
                       f"{languages[0]}, but the run translates {languages[0]}→{languages[1]}: {options[0]} and "
                       f"{options[1]} the other way round?")


def check_writable(out_dir: Path) -> Path:
    """`out_dir` once it is known to take files (nothing is created here): checked before decoding, so that a run on
    a read-only disk (a colleague's, a container's) fails at once instead of after the whole test set."""
    reason = unwritable_reason(out_dir)
    if reason:
        raise NMTError(f"cannot write the evaluation to {out_dir}: {reason}; choose another place with --out-dir DIR")
    return Path(out_dir)


def report_json(report: dict) -> str:
    """The report as UTF-8 JSON text. A file or folder name that is not UTF-8 (a Latin-1 "caf\\xe9.en") is held
    by Python with surrogate escapes, which no UTF-8 file takes: written as JSON's \\udcXX escapes, the name reads
    back as it came (it was an internal UnicodeEncodeError after the hypotheses were written)."""
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")  # escapes can only sit inside JSON strings


def report_name(test_set: EvaluationSet, engine: Engine) -> str:
    """`<label>[.<checkpoint>][.<engine>][.ensemble<N>].beam<N>` (`.sampled` when the decode settings sample): what
    the hypotheses and the report of one evaluation are called (the engine is named unless it is nmt's own, so that
    an export's scores sit beside the run's; so is a checkpoint other than the run's default, and an ensemble of N
    models)."""
    checkpoint_part = f".{engine.checkpoint_label}" if engine.checkpoint_label else ""
    engine_part = f".{engine.name}" if engine.name != "nmt" else ""
    members = engine.describe().get("ensemble")
    ensemble_part = f".ensemble{len(members)}" if members else ""
    search = "sampled" if engine.decode.samples else f"beam{engine.decode.beam_size}"
    constrained = ".constrained" if test_set.constraints is not None else ""
    return f"{test_set.label}{checkpoint_part}{engine_part}{ensemble_part}{constrained}.{search}"


def evaluate(engine: Engine, test_set: EvaluationSet, out_dir: Path) -> dict:
    """Translate with the engine's decode settings, score, and write `<name>.hyp.txt` and `<name>.report.json`
    (`report_name`) into `out_dir`; the report records every decode setting the engine used, the engine itself, and
    the set's origin, where the sentences and references were read."""
    sources, references, label = test_set.sources, test_set.references, report_name(test_set, engine)
    refuse_swapped_files(test_set, engine.source_lang, engine.target_lang)
    check_writable(out_dir)
    bootstrap_seed()  # a bad SACREBLEU_SEED stops here, not once every sentence is translated
    decomposed = [] if test_set.normalized_references or not engine.normalizer.unicode_nfc else \
        references_not_nfc(references)
    if decomposed:
        warn(f"{counted(len(decomposed), 'sentence')} of {len(references):,} "
             f"{'has' if len(decomposed) == 1 else 'have'} a reference not in Unicode NFC (the first: sentence "
             f"{decomposed[0]}), while the translations are (the run's data.unicode_nfc): scored as given, a "
             "decomposed é matches no é of theirs; normalize the --ref files to NFC (Python: "
             "unicodedata.normalize('NFC', text); ICU: uconv -x any-nfc)")
    started = time.perf_counter()
    translations = engine.translate(sources, constraints=test_set.constraints)
    elapsed = time.perf_counter() - started
    hypotheses = [t.text for t in translations]
    held = {} if test_set.constraints is None else {"constraints": {
        "origin": test_set.constraints_origin, **phrases_held(hypotheses, test_set.constraints, engine.target_lang)}}
    lowercased = test_set.normalized_references and engine.normalizer.lowercase_target
    report = {"label": label, "origin": test_set.origin, "references_lowercased": lowercased,
              "references_not_nfc": len(decomposed), **engine.describe(),
              "sentences": len(sources), "sources_cut": sum(t.source_cut for t in translations),
              **corpus_scores(hypotheses, references, with_ter=True, target_lang=engine.target_lang,
                              n_bootstrap=BOOTSTRAP_SAMPLES),
              "buckets": length_buckets(sources, hypotheses, references, engine.target_lang, engine.source_lang),
              "bucket_unit": length_unit(engine.source_lang),
              "decode": dataclasses.asdict(engine.decode),
              "elapsed_s": round(elapsed, 2), "sentences_per_s": round(len(sources) / max(elapsed, 1e-9), 1), **held}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out_dir / f"{label}.hyp.txt", "".join(h + "\n" for h in hypotheses))
        write_text_atomic(out_dir / f"{label}.report.json", report_json(report))
    except OSError as err:  # e.g. the disk filled up while decoding: the scores are not lost with the files
        raise NMTError(f"cannot write the evaluation to {out_dir}: {err.strerror} (scored: BLEU {report['bleu']:.2f} "
                       f"chrF {report['chrf']:.2f} TER {report['ter']:.2f}, {report['bleu_signature']})") from None
    return report


def format_report(report: dict) -> str:
    decode = report["decode"]
    search = f"beam {decode['beam_size']}"
    if decode.get("sampling_topk", 1) != 1:  # older reports have no sampling fields
        search = (f"sampled: top-k {decode['sampling_topk']}, top-p {decode['sampling_topp']}, temperature "
                  f"{decode['sampling_temperature']}, seed {decode['sampling_seed']}")
    lines = [f"BLEU {report['bleu']:.2f}  chrF {report['chrf']:.2f}  TER {report['ter']:.2f}  "
             f"({report['sentences']} sentences, {search}, "
             f"{report['sentences_per_s']} sent/s)",
             f"  {report['bleu_detail']}", f"  BLEU signature: {report['bleu_signature']}",
             f"  chrF signature: {report['chrf_signature']}", f"  TER signature: {report['ter_signature']}",
             f"  BLEU by source length ({report.get('bucket_unit', 'words')}):"]
    if "bleu_ci95" in report:  # reports written before confidence intervals have none
        lines.insert(1, f"  95% CI ± {report['bleu_ci95']:.2f} BLEU, ± {report['chrf_ci95']:.2f} chrF "
                        f"({report['bootstrap_samples']} bootstrap samples of the sentences)")
    for row in report["buckets"]:
        bleu = "-" if row["bleu"] is None else f"{row['bleu']:.2f}"
        lines.append(f"    {row['bucket']:>6}: {bleu:>6}  ({counted(row['sentences'], 'sentence')})")
    if "constraints" in report:
        held = report["constraints"]
        lines.append(f"  constraints: {held['held']} of {counted(held['phrases'], 'phrase')} held as words "
                     f"({counted(held['sentences'], 'sentence')} constrained; {held['origin']})")
    if report.get("sources_cut"):  # older reports have no count
        lines.append(f"  note: {report['sources_cut']} of the {report['sentences']} sources were cut to "
                     f"decode.max_input_tokens {report['decode']['max_input_tokens']} pieces (EOS included): their "
                     "translations miss the rest")
    if report.get("references_lowercased"):  # "case:mixed" in the signature, yet no reference has a capital
        lines.append("  note: the references are lowercased (the run's target normalization, as the built-in "
                     "corpus does for English): these scores do not count case")
    return "\n".join(lines)


def compare_runs(runs: list[Path], split: str, src: Path | None, refs: list[Path] | None, decode_overrides: dict,
                 device: str, data_dir: Path) -> Comparison:
    """Translate one shared test set (a split of the runs' data, or --src/--ref files) with every run, then
    `compare` them (the first is the baseline). Runs of another direction or another split are refused."""
    bootstrap_seed()  # as in `evaluate`: before any run translates
    systems, shared, first, cut = [], None, None, []
    for run in runs:
        translator = Translator.from_run(run, None, device, decode_overrides)
        direction = f"{translator.source_lang}→{translator.target_lang}"
        if first is None:
            first = (run, direction)
        elif direction != first[1]:
            raise NMTError(f"{run} translates {direction} but {first[0]} {first[1]}: runs are not comparable")
        if shared is None or src is None:  # --src/--ref are read once (they may be pipes); a split is each run's own
            loaded = load_test_set(translator.config, split, src, refs, data_dir, translator.trained_on,
                                   translator.run.config_path, (translator.source_lang, translator.target_lang))
            if shared is not None and loaded.references != shared.references:
                raise NMTError(f"{run} was trained on other data than {first[0]}: their {split} splits differ; "
                               "compare them on one test set with --src FILE --ref FILE (sentences that none of them "
                               "trained on)")
            shared = loaded
        translations = translator.translate(shared.sources)
        systems.append((str(translator.run.directory), [t.text for t in translations]))
        cut.append(sum(t.source_cut for t in translations))
    compared = compare(systems, shared.references, target_lang=translator.target_lang)
    return dataclasses.replace(compared, rows=[{**row, "sources_cut": n} for row, n in zip(compared.rows, cut)],
                               sentences=len(shared.sources))


@dataclasses.dataclass(frozen=True)
class Comparison:
    # Per system: BLEU, bootstrap mean and 95% CI, p-value against the first (None for it), and where counted, the
    # sources it read only in part (over its decode.max_input_tokens).
    rows: list[dict]
    signature: str  # sacrebleu's BLEU signature: what makes the scores reproducible
    samples: int
    sentences: int = 0  # in the shared test set (what a row's sources_cut is out of)


def compare(named_hypotheses: list[tuple[str, list[str]]], references: list[list[str]],
            samples: int = 1000, target_lang: str = "") -> Comparison:
    """BLEU of each system with sacrebleu's paired bootstrap resampling against the first (the baseline)."""
    metric = bleu_metric(target_lang)
    results = paired_bootstrap(metric, [hypotheses for _, hypotheses in named_hypotheses],
                               reference_streams(references), samples)
    baseline = named_hypotheses[0][1]
    rows = []
    for i, ((name, hypotheses), result) in enumerate(zip(named_hypotheses, results)):
        # sacrebleu counts resampled differences strictly above the real one, so a system identical to the baseline
        # (every difference 0) gets its smallest p, 1/(samples+1), as if significant: no evidence of a difference.
        identical = i > 0 and hypotheses == baseline
        rows.append({"system": name, "bleu": round(result.score, 2), "mean": round(result.mean, 2),
                     "ci95": round(result.ci, 2), "p_value": 1.0 if identical else result.p_value,
                     "identical": identical})
    return Comparison(rows, str(metric.get_signature()), samples)


def format_comparison(comparison: Comparison) -> str:
    lines = [f"{'system':40} {'BLEU':>7} {'mean ± 95% CI':>16} {'p vs baseline':>14}"]
    for row in comparison.rows:
        p = "(baseline)" if row["p_value"] is None else "(identical)" if row["identical"] else f"{row['p_value']:.4f}"
        lines.append(f"{row['system'][:40]:40} {row['bleu']:7.2f} {row['mean']:8.2f} ± {row['ci95']:5.2f} {p:>14}")
    lines.append(f"BLEU signature: {comparison.signature} (paired bootstrap, {comparison.samples} samples)")
    for row in comparison.rows:
        if row.get("sources_cut"):
            lines.append(f"note: {row['system']} cut {row['sources_cut']} of the {comparison.sentences} sources to "
                         "its decode.max_input_tokens pieces: their translations miss the rest")
    return "\n".join(lines)
