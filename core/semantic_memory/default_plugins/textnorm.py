"""Text folding for pattern matching: match what a reader (or a model) sees, not the encoding.

Attackers hide a phrase from a regex with look-alike forms (fullwidth or mathematical letters),
invisible format characters inside words (zero-width space, soft hyphen, joiners) and odd
spacing or case; folding all of those away first keeps the patterns themselves plain.
"""

from __future__ import annotations

import unicodedata


class _FormatChars(dict[int, int | None]):
    """A `str.translate` table deleting Unicode category Cf, filled in as characters are met
    (so it follows the running Python's Unicode version without a table to maintain)."""

    def __missing__(self, codepoint: int) -> int | None:
        kept = None if unicodedata.category(chr(codepoint)) == "Cf" else codepoint
        self[codepoint] = kept
        return kept


_FORMAT_CHARS = _FormatChars()
_CURLY_QUOTES = str.maketrans("\u2018\u2019\u201b\u201c\u201d\u201f", "'''\"\"\"")


def strip_format_chars(text: str) -> str:
    """`text` without invisible format characters (category Cf; none are ASCII)."""
    return text if text.isascii() else text.translate(_FORMAT_CHARS)


def normalize_for_matching(text: str) -> str:
    """NFKC, format characters removed, curly quotes straightened, whitespace runs collapsed to
    one space, casefolded."""
    text = strip_format_chars(unicodedata.normalize("NFKC", text)).translate(_CURLY_QUOTES)
    return " ".join(text.split()).casefold()
