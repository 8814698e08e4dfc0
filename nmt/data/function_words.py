"""Which of two languages that share a script a text reads as, by its commonest words, to catch a corpus whose sides
are the other way round than its languages say where their scripts cannot tell (nmt/data/writing_systems.py):
manythings.org's `deu-eng.zip`, `spa-eng.zip` or `fra-eng.zip` hold English first, and `source_lang: de` trained an
English → German model named German → English, and said nothing.

Each list holds a language's commonest short words (articles, pronouns, auxiliaries, prepositions). Two languages are
told apart by the words of each list that the other's lacks (`la` is French, Spanish and Italian alike, so it tells
none of them from another), counted over a side's text; a side reads as a language only where that language's words
outnumber the other's several times over, on enough words to be sure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from nmt.data.languages import base_language

_WORDS = {
    "en": "the a an is are was were be been i you he she it we they me my your his her our their this that these "
          "those what who how not no do does did don't can't have has had will would can could to of in on at for "
          "with from and but or there here very",
    "fr": "le la les un une des du de est sont était je tu il elle nous vous ils elles me te se mon ma mes ton ta tes "
          "son sa ses ce cette ces qui que quoi ne pas et ou mais avec pour dans sur chez très suis es sommes êtes "
          "ai as avons avez ont été",
    "de": "der die das den dem des ein eine einen einem ist sind war waren bin bist ich du er sie es wir ihr mich "
          "dich mir dir mein meine dein deine sein seine nicht kein keine und oder aber mit für auf zu von bei "
          "nach was wer wie hier sehr auch noch schon habe hast hat haben",
    "es": "el la los las un una unos unas es son era fue soy eres somos yo tú él ella nosotros ellos me te se mi "
          "mis tu tus su sus que qué no y o pero con para por en de del al muy está estoy estás están hay tengo "
          "tiene eso esto",
    "it": "il lo la i gli le un una uno è sono era ero sei siamo io tu lui lei noi voi loro mi ti si mio mia tuo "
          "tua suo sua che non e o ma con per di del della in su molto ho hai ha abbiamo questo questa quello",
    "pt": "o a os as um uma é são era foi sou eu você ele ela nós eles elas me te se meu minha seu sua que não e ou "
          "mas com para por em no na de do da muito está estou tenho tem isso isto",
    "nl": "de het een is zijn was waren ben bent ik jij je hij zij ze wij we mij me mijn jouw zijn haar niet geen "
          "en of maar met voor op aan van bij naar wat wie hoe hier heel ook nog al heb hebt heeft hebben",
    "sv": "en ett den det de är var jag du han hon vi ni mig dig min mitt din ditt sin inte och eller men med för "
          "på till av om vad vem hur här mycket också har hade kan vill",
    "pl": "i w z na do nie jest są był była jestem jesteś ja ty on ona my wy mnie mi cię ci mój moja twój twoja że "
          "to ten ta co kto jak tak ale czy bardzo już się mam masz ma",
    "tr": "bir bu şu o ve ben sen biz siz onlar beni seni benim senin onun ne kim nasıl değil var yok ile için gibi "
          "ama çok daha da de mi mı mu mü evet hayır",
    "da": "og i er var jeg du han hun vi de det den en et ikke at på med for til af har kan vil hvad hvem hvordan "
          "her meget også min mit din dit",
    "fi": "ja on ei se että minä sinä hän me te he olen olet oli ovat mitä mikä kuka miten tämä tuo niin kanssa "
          "mutta myös vielä jo hyvin en et sen minun sinun hänen",
    "hu": "a az egy és hogy nem is van vagyok vagy volt én te ő mi ti ők ez azt ezt mit ki hol de meg csak már még "
          "nagyon engem nekem",
    "cs": "a je jsem jsi jsou byl byla to ten ta že se si na v ve s z do já ty on ona my vy oni není ne co kdo jak "
          "ale velmi mám máš má",
    "ro": "și este sunt era al un o pe în la de cu că nu eu tu el ea noi voi ei ce cine cum foarte mai am ai are "
          "acest această meu mea",
    "id": "yang dan di ke dari ini itu saya aku kamu dia kami kita mereka tidak bukan ada adalah akan sudah apa "
          "siapa bagaimana dengan untuk sangat juga tapi",
    "ca": "el la els les un una és són era jo tu ell ella nosaltres no que i o però amb per en de del molt això "
          "aquest aquesta tinc té estic",
    "eo": "la estas estis mi vi li ŝi ni ili kaj ne de en al kun por kio kiu kiel tre ankaŭ havas ĉu sed",
}
_LISTS = {language: set(words.split()) for language, words in _WORDS.items()}
_WORD = re.compile(r"[^\W\d_]+(?:'t)?")  # letters, English's "don't" whole; French "c'est" gives "c" and "est"
CLEARLY = 3.0  # a side reads as a language where its words outnumber the other's this many times
ENOUGH = 30  # words of the two lists counted on a side before it can read as either


@dataclass
class WordTally:
    """The words of texts of one of two `languages` that only one of their lists holds, counted as texts come (a
    stream's lines), so that which language they read as can be asked at any point."""

    languages: tuple[str, str]
    counts: list[int] = field(default_factory=lambda: [0, 0])
    # Each language's words that the other's list lacks (`la` tells French from English, not from Spanish); None:
    # a language without a list, or one language twice.
    own: tuple[set[str], set[str]] | None = field(init=False, default=None)

    def __post_init__(self):
        bases = [base_language(language) for language in self.languages]
        if bases[0] != bases[1] and all(base in _LISTS for base in bases):
            self.own = (_LISTS[bases[0]] - _LISTS[bases[1]], _LISTS[bases[1]] - _LISTS[bases[0]])

    def add(self, text: str) -> None:
        if self.own:
            for word in _WORD.findall(text.lower().replace("\u2019", "'")):  # a typographic apostrophe: "don’t"
                self.counts[0] += word in self.own[0]
                self.counts[1] += word in self.own[1]

    def reads_as(self) -> str | None:
        """Which language the texts so far read as, or None: a language nmt has no list for, the same language
        twice, too few words, or no clear answer."""
        first, second = self.counts
        if not self.own or first + second < ENOUGH:
            return None
        return self.languages[0] if first >= CLEARLY * second else \
            self.languages[1] if second >= CLEARLY * first else None


def reads_as(texts: Iterable[str], languages: tuple[str, str]) -> str | None:
    """Which of two languages `texts` read as by their commonest words (`WordTally.reads_as`)."""
    tally = WordTally(languages)
    for text in texts:
        tally.add(text)
    return tally.reads_as()


def swapped_by_words(pairs: list[tuple[str, str]], languages: tuple[str, str]) -> bool:
    """Whether `pairs` read as (target, source) rather than (source, target) of `languages`, both sides clearly."""
    if not pairs:
        return False
    sources, targets = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    return reads_as(sources, languages) == languages[1] and reads_as(targets, languages) == languages[0]
