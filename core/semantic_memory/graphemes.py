"""Where a cut of text may fall: a grapheme-cluster boundary, what a reader sees as one
character (`cluster_start`). Used by the injection block's budget cut (block and items).

What a reader sees as one character may be several code points; a cut between them shows a
different one (NFD 경 cut to 겨, Việt to Viẹ) or half of one (a flag's first letter). The
rules of Unicode's extended grapheme clusters (UAX #29) that text in a memory meets, without
a dependency: the `regex` module's grapheme pattern would add a compiled wheel to every install.
"""

from __future__ import annotations

import unicodedata

_ZWJ = "\u200d"
_EXTEND = frozenset("\u200c\u200d\uff9e\uff9f")  # joiners; halfwidth kana voicing marks


def _extends(char: str) -> bool:
    """Whether `char` joins the cluster before it (GB9, GB9a): a combining, enclosing or
    spacing mark (accents, variation selectors, keycaps, vowel signs), a joiner, an emoji
    skin tone, a tag character."""
    return (unicodedata.category(char)[0] == "M" or char in _EXTEND
            or "\U0001f3fb" <= char <= "\U0001f3ff" or "\U000e0020" <= char <= "\U000e007f")


def _jamo(char: str) -> str:
    """Hangul's part in a syllable block: L (leading consonant), V (vowel), T (trailing
    consonant), LV or LVT (a composed syllable), else ""."""
    code = ord(char)
    if 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C:
        return "L"
    if 0x1160 <= code <= 0x11A7 or 0xD7B0 <= code <= 0xD7C6:
        return "V"
    if 0x11A8 <= code <= 0x11FF or 0xD7CB <= code <= 0xD7FB:
        return "T"
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    return ""


#: Hangul pairs that make one syllable block (GB6-GB8).
_JAMO_JOINS = {"L": {"L", "V", "LV", "LVT"}, "V": {"V", "T"}, "LV": {"V", "T"},
               "T": {"T"}, "LVT": {"T"}}


def _regional(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def _joined(text: str, at: int) -> bool:
    """Whether text[at - 1] and text[at] are in one grapheme cluster."""
    before, char = text[at - 1], text[at]
    if _extends(char) or before == _ZWJ or (before, char) == ("\r", "\n"):
        return True  # after a joiner: the next emoji of a ZWJ sequence (GB11)
    if _jamo(char) in _JAMO_JOINS.get(_jamo(before), ()):
        return True
    if unicodedata.combining(before) == 9 and unicodedata.category(char) == "Lo":
        return True  # a virama joins two consonants into one conjunct (GB9c)
    if _regional(before) and _regional(char):  # flags are pairs: odd run so far, one flag open
        run = at - 1
        while run > 0 and _regional(text[run - 1]):
            run -= 1
        return (at - run) % 2 == 1
    return False


def cluster_start(text: str, end: int) -> int:
    """`end`, or the grapheme-cluster boundary before it: `text[:cluster_start(text, end)]`
    ends with a whole character as a reader sees it (never before a combining mark, a Hangul
    vowel or final consonant, a joined emoji, a variation selector, a flag's second letter)."""
    while 0 < end < len(text) and _joined(text, end):
        end -= 1
    return end
