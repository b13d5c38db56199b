"""What the bigram channel's relevance bar weighs in a query's CJK runs: its content characters.

Weighing every query bigram, as search does, failed whole questions: 测试覆盖率要求是多少 cuts
into 9 bigrams, and those across a word boundary (率要, 求是) or spelling a question word (多少,
무슨, 나요) are in no memory, so they weighed the most of all; the memory that answers it held 4
of the 9 and missed the bar. Here, as porter sets `keywords.FUNCTION_WORDS` aside, function
words (question words, particles, endings; Japanese hiragana beside kanji or katakana) are set
aside (`aside`), with the bigrams touching them. `units` gives each content character with the
query bigrams it stands in; the channel weighs the bigrams that some memory holds, and each
character standing in none of them (a word no memory holds) as much as a bigram of one
memory. A bigram no memory holds between two held ones is a word boundary and weighs nothing.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: Chinese question words, sentence-final particles and the copula: in no memory's answer.
#: Single characters here are set aside wherever they stand (是 in 是否, 了 in 了解: their
#: neighbours keep the bigram they share with them).
_ZH = """什么 什么时候 甚么 怎么 怎样 怎么样 怎么办 为什么 为何 多少 多久 多大 多长 哪里 哪儿 哪个 哪些
         哪种 哪家 哪一 几个 几点 几时 几次 几天 是否 是不是 有没有 能不能 可不可以 可以 请问
         一下 应该 我们 你们 吗 呢 吧 啊 呀 么 的 了 是"""
#: Japanese question words and endings written in kana or kanji (何, 誰); hiragana besides is
#: set aside where the query has kanji or katakana (`_HIRAGANA`).
_JA = """何 誰 いつ どこ どちら どなた だれ なに なん どう どうして どうやって なぜ どの どれ
         どんな どのくらい どれくらい いくつ いくら ですか ますか でしょうか だっけ ください 教えて"""
#: Korean question words and whole-word endings (a run is a word: Korean is spaced).
_KO = """무슨 무엇 뭐 뭘 뭔 뭐야 뭐예요 뭐였지 어떻게 어떤 어디 어디서 어디에 어디로 언제 왜
         누가 누구 이렇게 그렇게 얼마 얼마나 얼마예요 몇 어느 하나요 해요 했나요 돼 돼요 되나요 인가요 있나요"""
FUNCTION_WORDS = frozenset(" ".join((_ZH, _JA, _KO)).split())
#: Korean particles and question endings at the end of a word (a run) whose stem keeps 2+
#: syllables: 배포는, 시간이, 필요한가요. Longest first.
KO_ENDINGS = tuple(sorted("""은 는 이 가 을 를 에 에서 의 도 로 으로 와 과 만 까지 부터 에게
    한테 요 야 나요 가요 까요 니까 습니까 어요 아요 해요 에요 예요 이에요 인가요 한가요 돼 돼요
    되나요 하나요 했나요 할까요""".split(), key=len, reverse=True))
_LONGEST = max(map(len, FUNCTION_WORDS))
_HIRAGANA = re.compile("[\u3041-\u309f]")
_KANJI_KANA = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u30a1-\u30fa\u30fc-\u30ff"
                         "\U00020000-\U0003ffff]")
_HANGUL = re.compile("[\uac00-\ud7af]")


class Unit(NamedTuple):
    """A content character of the query and the query's grams it stands in (bigrams, or the
    run itself when it is one character): those with no character set aside, or all of them
    where every one has one (目 of 目的, 的 being set aside)."""

    char: str
    grams: tuple[str, ...]


def aside(run: str, japanese: bool) -> list[bool]:
    """Per character of `run` (one CJK run, NFKC), whether the bar sets it aside: in a function
    word (longest match, left to right), in a Korean word's ending, or hiragana of a Japanese
    query (`japanese`: one with kanji or katakana, whose content words they write)."""
    out = [japanese and bool(_HIRAGANA.match(c)) for c in run]
    i = 0
    while i < len(run):
        size = next((n for n in range(min(_LONGEST, len(run) - i), 0, -1)
                     if run[i:i + n] in FUNCTION_WORDS), 0)
        for j in range(i, i + size):
            out[j] = True
        i += size or 1
    if _HANGUL.match(run[-1]):
        ending = next((e for e in KO_ENDINGS if run.endswith(e) and len(run) - len(e) >= 2), "")
        for j in range(len(run) - len(ending), len(run)):
            out[j] = True
    return out


def units(runs: list[str]) -> list[Unit]:
    """The content characters of a query's CJK `runs`, without duplicates (a character in the
    same bigrams twice counts once). None when every character is set aside: a query of
    function words alone ("什么?", "어떻게?") vouches for nothing, as porter's."""
    japanese = any(_KANJI_KANA.search(r) for r in runs) and any(_HIRAGANA.search(r) for r in runs)
    found: dict[Unit, None] = {}
    for run in runs:
        off = aside(run, japanese)
        if len(run) == 1:
            if not off[0]:
                found.setdefault(Unit(run, (run,)), None)
            continue
        for i, char in enumerate(run):
            if off[i]:
                continue
            at = [j for j in (i - 1, i) if 0 <= j < len(run) - 1]  # its bigrams run[j:j+2]
            clean = [run[j:j + 2] for j in at if not (off[j] or off[j + 1])]
            found.setdefault(Unit(char, tuple(clean or [run[j:j + 2] for j in at])), None)
    return list(found)
