"""TMX, the XML of OPUS's `en-fr.tmx.gz` and of every translation memory: read for its units' segments by language,
as data.corpus, as one file named for both sides (training and held-out), and as --src/--ref; refused, with what to
do, where it cannot be read so."""

import gzip
import io
import sys
import types
from pathlib import Path

import pytest

from nmt.config import Config, DataConfig
from nmt.data.bad_lines import BadLines
from nmt.data.prepare import prepare, read_manifest
from nmt.data.sources import corpus_spec, read_pairs
from nmt.errors import NMTError
from nmt.evaluate import load_test_set, read_lines
from tests_helpers import TOY_DATA, toy_parallel_corpus

# A translation memory as CAT tools write it: units over several lines, properties and notes beside the segments,
# regional codes, inline codes standing for the document's markup, a unit of a third language.
MEMORY = """<?xml version="1.0" encoding="UTF-8"?>
<!-- exported by a CAT tool -->
<!DOCTYPE tmx SYSTEM "tmx14.dtd">
<tmx version="1.4">
  <header creationtool="test" creationtoolversion="1" segtype="sentence" o-tmf="none" adminlang="en-US"
          srclang="en-US" datatype="rtf"/>
  <body>
    <tu tuid="1">
      <prop type="x-domain">chat</prop>
      <tuv xml:lang="EN-US">
        <seg>Tom &amp; Mary   are
          <bpt i="1">{\\b </bpt>here<ept i="1">}</ept>.</seg>
      </tuv>
      <tuv xml:lang="fr-FR">
        <note>checked</note>
        <seg>Tom et Mary sont <hi type="emphasis">ici</hi>.<ph x="1">&lt;br/&gt;</ph></seg>
      </tuv>
    </tu>
    <tu tuid="2"><tuv xml:lang="de-DE"><seg>Hallo.</seg></tuv><tuv xml:lang="en-US"><seg>Hello.</seg></tuv>
      <tuv xml:lang="fr-FR"><seg>Bonjour.</seg></tuv></tu>
    <tu><tuv xml:lang="fr-FR"><seg>Cours !</seg></tuv><tuv xml:lang="en-US"><seg>Run!</seg></tuv></tu>
  </body>
</tmx>
"""
PAIRS = [("Tom & Mary are here.", "Tom et Mary sont ici."), ("Hello.", "Bonjour."), ("Run!", "Cours !")]


def _pairs(tmp_path, log: list | None = None, bad: BadLines | None = None, **data) -> list[tuple[str, str]]:
    spec = corpus_spec(DataConfig(**data), tmp_path)
    return list(read_pairs(spec, log.append if log is not None else None, bad or BadLines()))


def test_a_translation_memory_is_read_for_its_segments_by_language(tmp_path):
    """Read before as XML, refused; each side is now the segment its language names, inline codes left out."""
    memory = tmp_path / "memory.tmx"
    memory.write_text(MEMORY, encoding="utf-8")
    log = []
    assert _pairs(tmp_path, log, corpus=str(memory), source_lang="en", target_lang="fr") == PAIRS
    assert log == [f"reading {memory} as TMX: each unit's en and fr segments"]
    # The languages pick the sides, whichever comes first in a unit: French → English, or the same by data.reverse.
    swapped = [(target, source) for source, target in PAIRS]
    assert _pairs(tmp_path, corpus=str(memory), source_lang="fr", target_lang="en") == swapped
    assert _pairs(tmp_path, corpus=str(memory), source_lang="en", target_lang="fr", reverse=True) == swapped
    # One file named for both sides is read as pairs, not as a test set's <seg> lines.
    assert _pairs(tmp_path, source_file=str(memory), target_file=str(memory), source_lang="en",
                  target_lang="fr") == PAIRS


def test_utf16_gzip_and_tmx_1_1s_lang_attribute(tmp_path):
    """The TMX standard's own encoding is UTF-16 (with its byte-order mark); OPUS gzips its files; TMX 1.1 names a
    language by `lang`, not `xml:lang`."""
    old = MEMORY.replace("xml:lang=", "lang=").replace('encoding="UTF-8"', 'encoding="UTF-16"')
    memory = tmp_path / "en-fr.tmx.gz"
    memory.write_bytes(gzip.compress(old.encode("utf-16")))
    assert _pairs(tmp_path, corpus=str(memory), source_lang="en", target_lang="fr") == PAIRS


def test_a_unit_without_a_side_is_a_bad_line_to_stop_at_or_skip(tmp_path):
    memory = tmp_path / "memory.tmx"
    memory.write_text(MEMORY.replace('<tuv xml:lang="fr-FR"><seg>Bonjour.</seg></tuv>', ""), encoding="utf-8")
    with pytest.raises(NMTError, match=r"memory.tmx line 19: a <tu> with no fr segment alone \(its languages: "
                                       r"de-DE, en-US\)"):
        _pairs(tmp_path, corpus=str(memory), source_lang="en", target_lang="fr")
    bad = BadLines(skip=True)
    assert _pairs(tmp_path, bad=bad, corpus=str(memory), source_lang="en", target_lang="fr") == \
        [PAIRS[0], ("", ""), PAIRS[2]]
    assert bad.count == 1


@pytest.mark.parametrize("change, message", [
    (lambda text: text, r"memory.tmx is TMX whose first units hold EN-US, fr-FR, de-DE, en-US segments "
                        r"\(xml:lang\), no it one alone: data.source_lang and data.target_lang name its languages"),
    (lambda text: text.replace("</tu>\n  </body>", "</tuv>\n  </body>"),
     r"memory.tmx line 21, column \d+: mismatched tag: not well-formed XML, as a TMX file is"),
    (lambda text: text.replace('"tmx14.dtd">', '"tmx14.dtd" [<!ENTITY lol "lol">]>'),
     r"memory.tmx line 3: declares an XML entity \(lol\), as no TMX does"),
])
def test_what_cannot_be_read_is_said_before_any_pair(tmp_path, change, message):
    memory = tmp_path / "memory.tmx"
    memory.write_text(change(MEMORY), encoding="utf-8")
    with pytest.raises(NMTError, match=message):
        _pairs(tmp_path, corpus=str(memory), source_lang="en", target_lang="it")


def test_a_tmx_is_never_one_side_of_two_files_nor_read_by_columns(tmp_path):
    """Named as one side of two aligned files, its <seg> lines were taken for a test set's: both languages' segments
    as one side."""
    memory, french = tmp_path / "memory.tmx", tmp_path / "train.fr"
    memory.write_text(MEMORY, encoding="utf-8")
    french.write_text("Bonjour.\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"memory.tmx line 4 starts TMX, which holds both sides of each pair: name "
                                       r"the file for both sides \(data.corpus, both data.source_file and"):
        _pairs(tmp_path, source_file=str(memory), target_file=str(french), source_lang="en", target_lang="fr")
    # Without its XML declaration, it read as plain text: each line of markup a sentence.
    memory.write_text(MEMORY[MEMORY.index("<tmx"):], encoding="utf-8")
    with pytest.raises(NMTError, match=r"memory.tmx line 1 starts TMX"):
        _pairs(tmp_path, source_file=str(french), target_file=str(memory), source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=r"memory.tmx is TMX, read by the languages .*: data.source_column and "
                                       r"data.target_column pick a TSV's columns"):
        _pairs(tmp_path, corpus=str(memory), source_lang="en", target_lang="fr", source_column=2, target_column=1)


def test_a_tmx_holds_out_and_is_scored_by_language(tmp_path):
    """A TMX as held-out files (named for both) and as --src and --ref: each reads the same units, aligned."""
    memory = tmp_path / "memory.tmx"
    memory.write_text(MEMORY, encoding="utf-8")
    train = tmp_path / "train.tsv"
    train.write_text(toy_parallel_corpus(), encoding="utf-8")
    data = dict(TOY_DATA, corpus=str(train), source_lang="en", target_lang="fr",
                test_source_file=str(memory), test_target_file=str(memory))
    prepared = prepare(DataConfig(**data), tmp_path / "data")
    assert read_manifest(prepared)["counts"]["test"]["pairs"] == 3
    test_set = load_test_set(Config(data=DataConfig(**data)), "test", memory, [memory], tmp_path / "data",
                             languages=("fr", "en"))
    assert test_set.sources == [target for _, target in PAIRS]
    assert test_set.references == [[source] for source, _ in PAIRS]


def test_a_piped_tmx_is_read_as_a_file_is(monkeypatch):
    """`--src <(zcat test.tmx.gz)` or stdin: the lines read whole, then its units, as a file's."""
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(gzip.compress(MEMORY.encode()))))
    assert read_lines(Path("-"), "fr", "en") == [target for _, target in PAIRS]
