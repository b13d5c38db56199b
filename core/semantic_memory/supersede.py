"""Deterministic supersession: does a new memory restate an older one with changed details?

No model is asked. A text is split into *volatile* tokens (numbers, versions, identifiers,
paths, handles, quoted values, capitalised names: the details that change when a fact is
updated) and *stable* words (everything else, less function words and update markers such as
"now" or "instead"). A newer memory supersedes an older one of the same project and kind
(fact, preference or decision) when

- their stable words agree: Jaccard overlap >= `min_overlap` and at most `max_stable_diff`
  stable words on either side that the other lacks (a different subject, "staging" against
  "production", shows up here);
- their volatile tokens differ (a restatement keeps them: the near-duplicate step handles it);
- and, when both sides carry two or more volatile tokens, they share at least one (two
  different services' ports share none: "Redis … 6379" against "Memcached … 11211").

When an embedder is active, a cosine below `min_cosine` vetoes a match (`cosine` argument;
the figures in docs/supersession.md are measured without one). Thresholds were tuned on
bench/data/supersession/pairs.jsonl by bench/supersession.py.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .sources import UNTRUSTED_SOURCES
from .keywords import FUNCTION_WORDS, foreign_function_words

#: Kinds whose memories can be superseded: statements of a current state.
SUPERSEDABLE_KINDS = ("fact", "preference", "decision")

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(
    r"`[^`]{1,80}`|\"[^\"]{1,80}\""  # quoted values
    rf"|[{_CJK}]+"  # a run of CJK characters
    r"|[#@$]?[^\W_][\w./:%+\\@-]*"  # words (any script), numbers, paths, identifiers, handles
)
_WORD = re.compile(r"[^\W\d_]+")
_DIGIT = re.compile(r"\d")
#: Function words and update markers: they carry neither the subject nor the value.
STOPWORDS = frozenset("""
a an the is are was were be been being am of to in on at for by with from as and or but not no
it its this that these those there here our we us you your they their i my me he she his her
will would shall should can could may might must do does did has have had so than then into onto
now currently instead anymore longer no-longer moved changed switched updated new old newer
since from-now going forward today actually again also still just set use uses used using
""".split())
#: Words after which a bare number is a value ("is 3", "on port 6543", "every 6 hours",
#: "version 14"); after any other plain word it is a label: "writer 5", "step 2" and "note 4"
#: name members of a series, not one thing updated.
VALUE_CUES = frozenset("""
is are was were be been to on at from has have had uses use using set of by every after under
for in within per each into
below above than over about roughly around approximately now port ports version edition level id
size limit count timeout ttl max min minimum maximum width length dimension retries threshold
beträgt lautet größe versión tamaño límite puerto porta porto versão tamanho limite versione
dimensione taille délai vaut порт порту порта версия версии размер лимит таймаут составляет
равен равна равно θύρα θύρας έκδοση μέγεθος όριο
""".split())
#: Units of measure: a bare number before one is a quantity, not a series label, whatever word
#: comes before it ("размер файла 10 МБ", where Russian has no "is"; "retry after 30 seconds").
UNITS = frozenset("""
b kb mb gb tb kib mib gib tib byte bytes ms s sec secs second seconds min mins minute minutes
h hr hrs hour hours d day days % px em rem pt dpi fps rpm hz khz mhz ghz cores threads
кб мб гб тб байт байта мс сек секунд секунды секунду мин минут минуты минуту час часа часов
дней дня день ядер ядра потоков
""".split())
#: Update markers of the languages `keywords.FUNCTION_WORDS` knows ("jetzt" is one of its
#: German function words already).
FOREIGN_MARKERS = frozenset("""
maintenant désormais dorénavant ahora agora ora adesso теперь сейчас отныне τώρα πλέον
""".split())
_BARE_INT = re.compile(r"\d+")
#: An identifier that can label a member of a series: letters then digits, joined by no dot,
#: slash or colon ("web-01", "JIRA-101", "w5"); not a version ("v2").
_IDENT = re.compile(r"(?!v\d+$)[A-Za-z][A-Za-z_-]*\d[\w-]*")
_SENTENCE_END = re.compile(r"[.!?:]\s*$|[.!?:]\s")
#: Stopwords that carry a setting's polarity ("caching is on" / "off", "use npm" / "avoid
#: npm"): kept when two near-duplicates are checked for a swapped word (`swapped`).
POLAR_STOPWORDS = frozenset({"on", "use", "uses", "used", "using"})
_INFLECTION = re.compile(r"(?:ing|ed|es|s|e)$")
#: CJK update markers (removed before the text is cut into character pairs).
CJK_MARKERS = ("现在", "已经", "改为", "改用", "不再", "目前", "使用", "今は", "現在", "もう", "変更")


@dataclass(frozen=True)
class Signals:
    """What the rule measures on a pair of texts."""

    overlap: float  # Jaccard of the stable words
    stable_diff: int  # stable words on one side only (the larger side)
    volatile_old: frozenset[str]
    volatile_new: frozenset[str]
    #: A stable word on one side only sits in the first half of its text's stable words: the
    #: subject differs ("staging database" against "production database").
    subject_diff: bool = False
    #: One stable word against one other, both in the second half: a value named by a plain
    #: word changed ("shell is zsh" -> "shell is fish").
    word_swap: bool = False
    #: Enumeration labels ("step 2") differ: two members of a series.
    labels_differ: bool = False
    shared_words: int = 0  # stable words and volatile tokens both texts have

    @property
    def volatile_changed(self) -> bool:
        return bool(self.volatile_old or self.volatile_new) and \
            self.volatile_old != self.volatile_new

    @property
    def volatile_shared(self) -> bool:
        return bool(self.volatile_old & self.volatile_new)


@dataclass(frozen=True)
class Rule:
    """The decision thresholds (defaults: tuned on the labelled set)."""

    min_overlap: float = 0.6
    max_stable_diff: int = 1
    require_shared_volatile: bool = True  # when both sides have >= 2 volatile tokens
    subject_guard: bool = True  # reject when a differing stable word is in the subject half
    allow_word_swap: bool = True  # a plain word in the value half changed, nothing volatile
    #: Words (stable, or volatile names such as "Python") both texts must share: "durable 3"
    #: and "durable 4", "rare0 thing" and "rare1 thing" say too little to be one fact.
    min_shared_words: int = 2
    min_cosine: float = 0.75  # only consulted when a cosine is given

    def supersedes(self, s: Signals, cosine: float | None = None) -> bool:
        """True when the newer text (the second of `signals`) supersedes the older one."""
        swapped = self.allow_word_swap and s.word_swap and s.volatile_old == s.volatile_new
        if not (s.volatile_changed or swapped):
            return False
        if s.labels_differ:
            return False
        if s.shared_words < self.min_shared_words:
            return False
        if s.overlap < self.min_overlap or s.stable_diff > self.max_stable_diff:
            return False
        if self.subject_guard and s.subject_diff:
            return False
        if (self.require_shared_volatile and len(s.volatile_old) >= 2
                and len(s.volatile_new) >= 2 and not s.volatile_shared):
            return False
        return cosine is None or cosine >= self.min_cosine


DEFAULT_RULE = Rule()


@dataclass(frozen=True)
class _Reading:
    """How one text's words are read: which are function words (English STOPWORDS, and those
    of the other languages `keywords` knows that the text is written in), and whether a
    capital marks a name (not in German, which capitalises every noun)."""

    aside: frozenset[str]
    capitals_name: bool

    @classmethod
    def of(cls, text: str) -> _Reading:
        present = {w.lower() for w in _WORD.findall(text)}
        plain, english = FUNCTION_WORDS["de"]
        german = bool(present & plain) and len(present & (plain | english)) >= 2
        return cls(STOPWORDS | foreign_function_words(present) | FOREIGN_MARKERS, not german)


def _is_volatile(token: str, first: bool, reading: _Reading) -> bool:
    if token[0] in "`\"#@$" or _DIGIT.search(token):
        return True
    if any(c in token for c in "/\\_:") or ("." in token.strip(".")):
        return True
    # a capitalised name (Postgres, Maria, GraphQL), but not a sentence's first word, nor a
    # German noun (a capital inside the word still makes a name there: GraphQL, API)
    named = token[0].isupper() if reading.capitals_name else not token[1:].islower()
    return not first and named and token.lower() not in reading.aside


def _labels(text: str, reading: _Reading | None = None) -> frozenset[str]:
    """The enumeration labels of a text: what names one member of a series, not a value. A
    bare number or an identifier (`_IDENT`) that opens the text, follows a plain lower-case
    word that is neither a stopword nor one of VALUE_CUES, or follows another label ("writer 5
    item 3" -> {"writer 5", "item 3"}; "term w5 r2 i7" -> {"term w5", "w5 r2", "r2 i7"}); an
    identifier also after a sentence's capitalised first word ("Host web-01", "Ticket
    JIRA-101"). A number after a name ("Node 18"), a colon or CJK text is a value, and so is
    anything after a cue ("is web-02", "to web-02", "port 6543"); that a number after a plain
    lower-case word is a label costs updates such as "pnpm 8" -> "pnpm 9"."""
    reading = reading or _Reading.of(text)
    labels: set[str] = set()
    previous, labelled, previous_first, end = "", True, False, 0
    matches = list(_TOKEN.finditer(text))
    for i, match in enumerate(matches):
        raw = match.group(0)
        first = end == 0 or bool(_SENTENCE_END.search(text[end - 1:match.start()]))
        end = match.end()
        token = raw.rstrip(".,;:")
        if not token:
            continue
        ident = bool(_IDENT.fullmatch(token))
        number = bool(_BARE_INT.fullmatch(token)) and not _before_unit(matches[i + 1:i + 2])
        labelled = (ident or number) and not previous.endswith(":") \
            and (labelled or _names_series(previous, previous_first and ident, reading))
        if labelled:
            labels.add(f"{previous.lower()} {token}")
        previous, previous_first = (raw if raw.endswith(":") else token), first
    return frozenset(labels)


def _before_unit(following: list[re.Match[str]]) -> bool:
    """Whether the token after a number (none, or one match) is a unit of measure."""
    return bool(following) and following[0].group(0).rstrip(".,;:").lower() in UNITS


def _names_series(word: str, sentence_start: bool, reading: _Reading) -> bool:
    """Whether a label can follow `word` ("writer", "host"): a plain lower-case word, neither
    a stopword nor a value cue, or (`sentence_start`) a sentence's capitalised first word."""
    return bool(word) and word not in VALUE_CUES and word.lower() not in reading.aside \
        and not _is_volatile(word, sentence_start, reading) \
        and (sentence_start or not word[0].isupper()) and not re.match(rf"[{_CJK}]", word)


def split(text: str, keep: frozenset[str] = frozenset(),
          reading: _Reading | None = None) -> tuple[list[str], frozenset[str]]:
    """(stable words in order, volatile tokens) of a text, lower-cased. Enumeration labels
    (`_labels`) are left out of both, and stopwords from the stable words unless in `keep`."""
    for marker in CJK_MARKERS:
        text = text.replace(marker, "")
    reading = reading or _Reading.of(text)
    stable: list[str] = []
    volatile: set[str] = set()
    labels = {label.rsplit(" ", 1)[1] for label in _labels(text, reading)}
    end = 0
    for match in _TOKEN.finditer(text):
        # a sentence's (or a "Speaker:" turn's) first word is capitalised, not a name
        first = end == 0 or bool(_SENTENCE_END.search(text[end - 1:match.start()]))
        end = match.end()
        token = match.group(0).rstrip(".,;:")
        if not token or token in labels:
            continue
        if re.match(rf"[{_CJK}]", token):
            stable.extend(token[i:i + 2] for i in range(max(len(token) - 1, 1)))
        elif match.start() == 0 and _SETTING.fullmatch(token):
            # a setting's name opening the text is its subject, not a value: its words
            stable.extend(part for part in token.lower().split("_") if part)
        elif _is_volatile(token, first, reading):
            volatile.add(token.strip("`\"").lower())
        elif token.lower() not in reading.aside or token.lower() in keep:
            stable.append(token.lower().strip("-"))
    return stable, frozenset(volatile)


_CJK_RUN = re.compile(rf"[{_CJK}]+")
#: A setting's name in snake or screaming case (`MEMORY_HOOK_BUDGET_S`, `database_url`).
_SETTING = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


#: How many words of a text `probe_words` gives: one missed an update that adds a longer word
#: than its older text holds ("… port 7777 permanently" never found "… port 6543").
PROBE_WORDS = 3


def probe_words(text: str) -> list[str]:
    """Pieces of `text` that a memory it restates most likely holds too, for a substring
    search of candidates: its PROBE_WORDS longest stable words of 3+ characters (first seen
    first among equals), then the opening 3 characters of its longest CJK run (a CJK text's
    stable words are character pairs, too short for a trigram index; its subject comes
    first)."""
    words = sorted(dict.fromkeys(w for w in split(text)[0] if len(w) >= 3), key=len,
                   reverse=True)
    runs = sorted(_CJK_RUN.findall(text), key=len, reverse=True)
    if runs and len(runs[0]) >= 3 and runs[0][:3] not in words:
        words.append(runs[0][:3])
    return words[:PROBE_WORDS]


def _in_subject(word: str, words: list[str]) -> bool:
    return words.index(word) < len(words) / 2


def signals(old: str, new: str) -> Signals:
    """The rule's measurements on an older and a newer text."""
    # both read alike: "Die … auf Port 6543" and "Die … jetzt auf Port 6544" are German
    # together, though only the second holds two German function words
    reading = _Reading.of(f"{old}\n{new}")
    words_old, volatile_old = split(old, reading=reading)
    words_new, volatile_new = split(new, reading=reading)
    # a word capitalised on one side only ("API" / "api") is the same word
    words_old += [w for w in volatile_old if w in words_new]
    words_new += [w for w in volatile_new if w in words_old]
    volatile_old = volatile_old - set(words_new)
    volatile_new = volatile_new - set(words_old)
    stable_old, stable_new = set(words_old), set(words_new)
    union = stable_old | stable_new
    # no stable word on either side ("w1 r2 i3"): nothing says which thing the values are of
    overlap = len(stable_old & stable_new) / len(union) if union else 0.0
    only_old, only_new = stable_old - stable_new, stable_new - stable_old
    subject = any(_in_subject(w, words_old) for w in only_old) or \
        any(_in_subject(w, words_new) for w in only_new)
    swap = len(only_old) == 1 == len(only_new) and not subject
    return Signals(overlap, max(len(only_old), len(only_new)), volatile_old, volatile_new,
                   subject, swap, _labels(old, reading) != _labels(new, reading),
                   len(stable_old & stable_new) + len(volatile_old & volatile_new))


#: A negation ("not", "never", "don't", 不, 没, ない, ...), and where its reach ends: a clause
#: break. A CJK character that only sometimes negates (不同, "different") can only keep two
#: texts apart, never merge them.
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|nor|neither|without|cannot)\b|n't\b"
                       r"|[不没沒别別未勿]|ない|ません", re.IGNORECASE)
_CLAUSE = re.compile(r"[,;.!?:]\s|[,;.!?:]$|[，。；！？：、]|\bbut\b", re.IGNORECASE)


def negated(text: str) -> list[tuple[str, ...]]:
    """What each negation of a text denies: the words after it, to the end of its clause.
    "Do not use npm; use pnpm" -> [("npm",)], "Use npm; do not use pnpm" -> [("pnpm",)]."""
    scopes: list[tuple[str, ...]] = []
    for clause in _CLAUSE.split(text):
        for match in _NEGATION.finditer(clause):
            stable, volatile = split(clause[match.end():])
            scopes.append((*stable, *sorted(volatile)))
    return scopes


def same_details(old: str, new: str) -> bool:
    """Whether two texts close in meaning say the same thing: the same volatile details
    (numbers, versions, paths, identifiers, names, enumeration labels), the same negations of
    the same words, and their shared words in the same order. An embedding puts "The cache TTL
    is 300 seconds" within 0.99 of "... 600 seconds", "Use pnpm, not npm" of "Use npm, not
    pnpm" and "Do not use npm; use pnpm" of "Use npm; do not use pnpm": near in meaning, they
    are an update and reversals, never duplicates to merge. Nor is one word swapped for
    another (`swapped`)."""
    s = signals(old, new)
    if s.volatile_old != s.volatile_new or s.labels_differ or negated(old) != negated(new):
        return False
    reading = _Reading.of(f"{old}\n{new}")
    words_old, words_new = split(old, reading=reading)[0], split(new, reading=reading)[0]
    shared = set(words_old) & set(words_new)
    if [w for w in words_old if w in shared] != [w for w in words_new if w in shared]:
        return False
    return not swapped(split(old, POLAR_STOPWORDS, reading)[0],
                       split(new, POLAR_STOPWORDS, reading)[0])


def swapped(words_old: list[str], words_new: list[str]) -> bool:
    """Whether, word sequences aligned, a word of one stands where the other has a different
    one. One word swapped in an otherwise equal sentence is how a setting is changed or a
    decision reversed ("Enable strict mode in tsconfig" / "Disable ...", "... is true" /
    "... is false", "on" / "off", "before" / "after"), and all-MiniLM-L6-v2 puts the first two
    pairs at 0.981 and 0.984: over the near-duplicate bar, they had been merged and the newer
    statement lost. A near-duplicate may add or drop words and inflect one ("deploy" /
    "deploys", "use" / "using", "app" / "application"), never swap one."""
    matcher = difflib.SequenceMatcher(None, words_old, words_new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace" and (i2 - i1 != j2 - j1 or not all(
                _inflected(a, b) for a, b in zip(words_old[i1:i2], words_new[j1:j2]))):
            return True
    return False


def _inflected(a: str, b: str) -> bool:
    """Whether two words are forms of one: equal once an English inflection is cut, or one a
    prefix (of 3 or more letters) of the other."""
    a, b = (_INFLECTION.sub("", w) if len(w) >= 3 else w for w in (a, b))
    short, long = sorted((a, b), key=len)
    return a == b or (len(short) >= 3 and long.startswith(short))


def supersedes(old: str, new: str, *, cosine: float | None = None,
               rule: Rule = DEFAULT_RULE) -> bool:
    """Does `new` restate `old` with changed details? (Kind and project are the caller's.)"""
    return rule.supersedes(signals(old, new), cosine)


def cross_project(uid: str, replaced: str | None, new: str | None) -> str | None:
    """Why a memory of project `new` may not replace memory `uid` of project `replaced` (None:
    global), in one short line (a proxy passes on 200 characters of an error) saying what to
    do instead; None when both are of one project, or both global. A replacement filed
    elsewhere hides the memory from its own project's recall (a global one from every
    project's) while only the new project recalls the correction: `replaces`, like the rule,
    links memories of one project only."""
    if replaced == new:
        return None
    there = "as a global memory" if replaced is None else f"in project {replaced!r}"
    return (f"replaces: memory {uid} is {'global' if replaced is None else there}, not "
            f"{'global' if new is None else repr(new)}: store the new text {there} instead, "
            f"or forget {uid}")


def may_replace(newer: str, older: str) -> bool:
    """Whether a memory from source `newer` may supersede one from source `older` by the rule
    (or by restating a replaced value): content from outside the conversation
    (UNTRUSTED_SOURCES: a tool's output, a file, a web page) never replaces what the user said
    or an agent stored for them, it is stored beside it. A README the agent read could
    otherwise restate the user's fact with the attacker's host and silently take its place in
    recall. Untrusted content may update untrusted content; trusted may update anything."""
    return not untrusted(newer) or untrusted(older)


def untrusted(source: str) -> bool:
    """Whether `source` is content from outside the conversation, as the ingest filter reads
    it (case aside: `TOOL` is checked there too)."""
    return source.lower() in UNTRUSTED_SOURCES
