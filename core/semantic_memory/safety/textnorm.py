"""Text folding for pattern matching: match what a reader (or a model) sees, not the encoding.

Attackers hide a phrase from a regex with look-alike forms (fullwidth or mathematical letters,
Cyrillic or Greek letters that look Latin, accents on English words), invisible characters
inside words (zero-width space, soft hyphen, joiners, variation selectors, the combining
grapheme joiner, Hangul fillers, tag characters) and odd spacing or case; folding all of those
away first keeps the patterns themselves plain.
"""

from __future__ import annotations

import re
import unicodedata

# Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt, unchanged from
# 14.0 through 16.0): code points a renderer shows as nothing. Python's unicodedata does not
# expose the property, so the ranges are written out. Category Cf (format characters) is
# removed as well, whatever the list says, so a format character added in a later Unicode
# version is still dropped.
DEFAULT_IGNORABLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul choseong / jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors, vowel separator
    (0x200B, 0x200F),  # zero-width space, joiners, direction marks
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors 1-16
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # unassigned, reserved as ignorable
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical beam and phrase controls
    (0xE0000, 0xE0FFF),  # tag characters, variation selectors 17-256, reserved
)


def is_invisible(codepoint: int) -> bool:
    """Whether a code point is default-ignorable or a format character (category Cf)."""
    return (any(lo <= codepoint <= hi for lo, hi in DEFAULT_IGNORABLE_RANGES)
            or unicodedata.category(chr(codepoint)) == "Cf")


class _InvisibleChars(dict[int, int | None]):
    """A `str.translate` table deleting invisible characters, filled in as characters are met
    (a lookup per distinct character, not per occurrence)."""

    def __missing__(self, codepoint: int) -> int | None:
        kept = None if is_invisible(codepoint) else codepoint
        self[codepoint] = kept
        return kept


_INVISIBLE = _InvisibleChars()


class _VisibleForms(dict[int, str]):
    """A `str.translate` table giving what each character reads as: its NFKC form without
    invisible characters (filled in as characters are met)."""

    def __missing__(self, codepoint: int) -> str:
        shown = "".join(c for c in unicodedata.normalize("NFKC", chr(codepoint))
                        if not is_invisible(ord(c)))
        self[codepoint] = shown
        return shown


_VISIBLE = _VisibleForms()
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_CURLY_QUOTES = str.maketrans("\u2018\u2019\u201b\u201c\u201d\u201f", "'''\"\"\"")
_TOKEN_CHAR = r"[\w+/=.~-]"
_IGNORABLE = "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in DEFAULT_IGNORABLE_RANGES) + "]"
#: A default-ignorable character between two characters of a token: a reader sees one token
#: there, a regex two (it may end one: `AKIA…<U+200B>more`). The class comes first, so that
#: `re` skips ahead to one of its characters (6x faster than a lookbehind first).
INVISIBLE_IN_TOKEN = re.compile(
    f"{_IGNORABLE}(?<={_TOKEN_CHAR}{_IGNORABLE}){_IGNORABLE}*(?={_TOKEN_CHAR})")

# Letters that read as Latin ones and that NFKC leaves alone. Small capitals and other Latin
# variants are always folded; Cyrillic, Greek and Armenian ones only inside a word that also
# holds a Latin letter (`іgnоrе` with Cyrillic і, о, е), or when the whole word then spells one
# of LATIN_KEYWORDS: a Russian or Greek word stays as written for the patterns in its language.
_LATIN_VARIANTS = {
    "a": "\u1d00\u0251", "b": "\u0299", "c": "\u1d04", "d": "\u1d05", "e": "\u1d07",
    "g": "\u0261\u0262", "h": "\u029c", "i": "\u026a\u0131", "j": "\u1d0a", "k": "\u1d0b",
    "l": "\u029f", "m": "\u1d0d", "n": "\u0274", "o": "\u1d0f", "p": "\u1d18", "r": "\u0280",
    "s": "\ua731", "t": "\u1d1b", "u": "\u1d1c", "v": "\u1d20", "w": "\u1d21", "y": "\u028f",
    "z": "\u1d22",
}
_SCRIPT_LOOKALIKES = {
    "a": "\u0430\u03b1", "b": "\u0432\u03b2\u044c", "c": "\u0441\u03f2", "d": "\u0501",
    "e": "\u0435\u03b5\u0454", "g": "\u0581", "h": "\u04bb\u043d", "i": "\u0456\u03b9",
    "j": "\u0458\u03f3", "k": "\u043a\u03ba", "l": "\u04cf", "m": "\u043c", "n": "\u03b7\u0578",
    "o": "\u043e\u03bf\u0585", "p": "\u0440\u03c1", "q": "\u051b", "r": "\u0433", "s": "\u0455",
    "t": "\u0442\u03c4", "u": "\u03c5\u057d", "v": "\u03bd\u0475", "w": "\u051d\u03c9",
    "x": "\u0445\u03c7", "y": "\u0443\u03b3\u04af",
}
LATIN_VARIANTS = str.maketrans({c: latin for latin, cs in _LATIN_VARIANTS.items() for c in cs})
_LATIN_VARIANT_CHARS = re.compile("[" + "".join(_LATIN_VARIANTS.values()) + "]")
SCRIPT_LOOKALIKES = str.maketrans(
    {c: latin for latin, cs in _SCRIPT_LOOKALIKES.items() for c in cs})
#: Every look-alike letter folded to its Latin letter (for deciding what a tag name reads as).
LOOKALIKES = {**LATIN_VARIANTS, **SCRIPT_LOOKALIKES}
_SCRIPT_CHARS = re.compile("[" + "".join(c for cs in _SCRIPT_LOOKALIKES.values() for c in cs)
                           + "]")
# A whole word (the lookbehind keeps a long word from being rescanned from each letter).
_WORD = re.compile(r"(?<![^\W\d_])[^\W\d_]+")
_HAS_LATIN = re.compile("[a-zA-Z]")
#: The English words the injection rules key on (after casefolding): a word spelled wholly in
#: look-alikes, or with accents or other marks, that then spells one of them is folded to it;
#: other all-Cyrillic or all-Greek words, and other accented words, are left as written.
LATIN_KEYWORDS = frozenset({
    "system", "assistant", "user", "human", "developer", "admin", "ignore", "disregard",
    "forget", "override", "bypass", "previous", "prior", "above", "instructions", "rules",
    "prompt", "prompts", "secret", "secrets", "execute", "run", "send", "upload", "reveal",
    "you", "your", "are", "now", "model", "agent", "ai", "curl", "sh", "bash", "rm", "env",
    # added with the accent folding: the rest of the English rules' words
    "instruction", "rule", "directions", "directives", "guidelines", "guidance", "commands",
    "context", "earlier", "preceding", "original", "everything", "all", "any", "told", "given",
    "skip", "discard", "dismiss", "follow", "obey", "comply", "pretend", "act", "mode",
    "unrestricted", "jailbroken", "print", "show", "output", "display", "repeat", "delete",
    "remove", "wipe", "push", "force", "approve", "merge", "install", "disable", "must",
    "should", "always", "never", "silently", "secretly", "quietly", "immediately", "attention",
    "important", "urgent", "note", "message", "llm", "claude", "chatgpt", "copilot", "gemini",
    "assistants", "agents", "models", "reviewer", "reviewers", "reading", "reads", "this",
    "reply", "answer", "response", "contents", "credentials", "password", "passwords", "token",
    "tokens", "key", "keys", "post", "email", "share", "copy", "paste", "leak", "dump",
    "exfiltrate", "wget", "ssh", "hidden",
})
#: Accented words of the languages the rules read that spell a keyword without their accents:
#: left as written, so the French rules do not take "ignoré" (ignored) for "ignore".
NATIVE_WORDS = frozenset({"ignoré"})
#: Combining marks that sit on a Latin, Greek or Cyrillic letter: accents, strokes, overlays,
#: the stacks of "zalgo" text (the same blocks `injection.py` reads through in tag names).
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_STRIP_MARKS = str.maketrans({c: None for c in map(chr, (
    *range(0x0300, 0x0370), *range(0x1AB0, 0x1B00), *range(0x1DC0, 0x1E00),
    *range(0x20D0, 0x2100), *range(0xFE20, 0xFE30)))})


def _bare(char: str) -> str:
    return unicodedata.normalize("NFD", char).translate(_STRIP_MARKS)


# Letters that carry a mark over a letter that can spell a keyword (a Latin letter or a
# look-alike): `ó`, `É`, `ї`, Greek `ί`; not `й` or `ñ`, whose bare letter spells none.
_ACCENTED_LETTERS = "".join(
    c for c in map(chr, (*range(0x00C0, 0x0590), *range(0x1E00, 0x2000)))
    if c != _bare(c) and len(_bare(c)) == 1
    and (_bare(c).isascii() and _bare(c).isalpha() or ord(_bare(c)) in LOOKALIKES))
# A word with such a letter or a mark in it (the lookbehinds start it at a word's first
# letter, the lazy run stops at its first marked letter: one pass over each word).
_MARKED_WORD = re.compile(
    rf"(?<![^\W\d_])(?<![{_MARKS}])[^\W\d_]*?[{_ACCENTED_LETTERS}{_MARKS}]"
    rf"(?:[^\W\d_]|[{_MARKS}])*")
_MARKED = re.compile(f"[{_ACCENTED_LETTERS}{_MARKS}]")
# No keyword is longer than this once bare; a word with more marks than letters is still
# looked at up to 4 marks a letter.
_LONGEST_MARKED = 5 * max(map(len, LATIN_KEYWORDS))


def strip_format_chars(text: str) -> str:
    """`text` without invisible characters (default-ignorable code points and category Cf;
    none are ASCII)."""
    return text if text.isascii() else text.translate(_INVISIBLE)


def _fold_word(m: re.Match[str]) -> str:
    word = m.group()
    folded = word.translate(SCRIPT_LOOKALIKES)
    if folded != word and (_HAS_LATIN.search(word) or folded in LATIN_KEYWORDS):
        return folded
    return word


def fold_lookalikes(text: str) -> str:
    """Look-alike letters of `text` read as the Latin letters they resemble (see
    `_SCRIPT_LOOKALIKES` for when a Cyrillic or Greek letter is folded; the table holds lower
    case ones, so `text` is casefolded first where capitals count). One character for one."""
    if text.isascii():
        return text
    if _LATIN_VARIANT_CHARS.search(text):  # a scan in C; translate is a lookup per character
        text = text.translate(LATIN_VARIANTS)
    return _WORD.sub(_fold_word, text) if _SCRIPT_CHARS.search(text) else text


def visible(text: str) -> str:
    """What a reader sees of `text`, for finding what it says (a secret, a tag): NFKC,
    invisible characters removed, look-alike letters folded. Case stays, runs of whitespace
    too, and every character comes from one character of `text` (`visible_origins`), so a
    span found here can be cut out of `text` with any invisible characters inside it."""
    return text if text.isascii() else fold_lookalikes(text.translate(_VISIBLE))


def visible_origins(text: str) -> list[int]:
    """For each character of `visible(text)`, the index in `text` of the one it comes from."""
    origins: list[int] = []
    done = 0
    for m in _NON_ASCII.finditer(text):  # an ASCII character reads as itself
        at = m.start()
        origins += range(done, at)
        origins += [at] * len(_VISIBLE[ord(m.group())])
        done = at + 1
    origins += range(done, len(text))
    return origins


def _fold_marked_word(m: re.Match[str]) -> str:
    word = m.group()
    if len(word) > _LONGEST_MARKED or word in NATIVE_WORDS:
        return word
    bare = _bare(word).translate(LOOKALIKES)
    return bare if bare in LATIN_KEYWORDS else word


def fold_accents(text: str) -> str:
    """`text` (casefolded) with each word that spells one of LATIN_KEYWORDS once its accents
    and other combining marks are dropped, and its look-alike letters folded, written as that
    keyword: `ignóre`, `SYSTÉM`, `ïnstrüctïöns`, `i̶g̶n̶o̶r̶e̶`. Other words keep their accents,
    which the French, Spanish, German … rules read (`précédentes`, `règles`, `néglige`)."""
    if text.isascii() or not _MARKED.search(text):
        return text
    return _MARKED_WORD.sub(_fold_marked_word, text)


class _FoldedTokens(dict[str, str]):
    """`fold_accents` of each whitespace-free token, remembered for short ones: prose repeats
    its words, and a lookup per token stays in C (`map`) where a regex pass over the whole
    text tries each position in Python-visible steps (measured: 3x faster on accented
    prose). The table stops growing at 65,536 tokens."""

    def __missing__(self, token: str) -> str:
        folded = fold_accents(token)
        if len(token) <= 64 and len(self) < 65_536:
            self[token] = folded
        return folded


_FOLDED_TOKENS = _FoldedTokens()


def fold_lines(text: str) -> str:
    """NFKC, invisible characters removed, curly quotes straightened, casefolded, look-alike
    letters folded, accents dropped from English keywords (`fold_accents`); line breaks kept,
    each line's whitespace runs collapsed to one space."""
    text = strip_format_chars(unicodedata.normalize("NFKC", text)).translate(_CURLY_QUOTES)
    text = fold_lookalikes(text.casefold())
    if text.isascii() or not _MARKED.search(text):
        return "\n".join(" ".join(line.split()) for line in text.splitlines())
    fold = _FOLDED_TOKENS.__getitem__
    return "\n".join(" ".join(map(fold, line.split())) for line in text.splitlines())


def normalize_for_matching(text: str) -> str:
    """`fold_lines`, on one line: every whitespace run (line breaks too) is one space."""
    return " ".join(fold_lines(text).split())
