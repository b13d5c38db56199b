"""Text folding for pattern matching: match what a reader (or a model) sees, not the encoding.

Attackers hide a phrase from a regex with look-alike forms (fullwidth or mathematical letters,
Cyrillic or Greek letters that look Latin), invisible characters inside words (zero-width
space, soft hyphen, joiners, variation selectors, the combining grapheme joiner, Hangul
fillers, tag characters) and odd spacing or case; folding all of those away first keeps the
patterns themselves plain.
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
#: Words an attacker may spell wholly in look-alikes (after casefolding); other all-Cyrillic or
#: all-Greek words are left as written.
LATIN_KEYWORDS = frozenset({
    "system", "assistant", "user", "human", "developer", "admin", "ignore", "disregard",
    "forget", "override", "bypass", "previous", "prior", "above", "instructions", "rules",
    "prompt", "prompts", "secret", "secrets", "execute", "run", "send", "upload", "reveal",
    "you", "your", "are", "now", "model", "agent", "ai", "curl", "sh", "bash", "rm", "env",
})


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


def fold_lines(text: str) -> str:
    """NFKC, invisible characters removed, curly quotes straightened, casefolded, look-alike
    letters folded; line breaks kept, each line's whitespace runs collapsed to one space."""
    text = strip_format_chars(unicodedata.normalize("NFKC", text)).translate(_CURLY_QUOTES)
    text = fold_lookalikes(text.casefold())
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def normalize_for_matching(text: str) -> str:
    """`fold_lines`, on one line: every whitespace run (line breaks too) is one space."""
    return " ".join(fold_lines(text).split())
