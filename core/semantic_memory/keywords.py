"""Keyword arithmetic shared by every store's keyword channels: tokens, stopwords, the
substring terms of a trigram search, BM25's IDF and the work bound of an OR query. No SQL here:
the SQLite FTS5 engine is `stores/fts5.py`, PostgreSQL's lives with its store."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping

_WORD = re.compile(r"\w+", re.UNICODE)

#: Short English function words: matching them says nothing about relevance.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don ll re ve d m
    o y isn aren wasn weren hasn haven hadn doesn didn won wouldn shan shouldn mustn couldn""".split()
)

#: Function words of German, French, Spanish, Portuguese, Italian and Russian, for the
#: relevance bar only (`content_words`): search keeps every word, so its ranking and the
#: benchmarks are as they were. Per language: (words that are no English word, always set
#: aside; words that are English words too, set aside only where the query holds two or more
#: of the first kind, so is evidently in that language). The second kind, English words, most
#: of them common in a coding agent's text: de die den bin dir du es hat man mit war; fr c
#: car comment des du en est la ma par plus sa sans ses son ton; es al con del en era es hay
#: la sin son su todo; pt com dos em era eu nas os sim; it ai al chi ci come con del di dove
#: ha io la lo ma non per su uno vi. Left out altogether, being
#: content words in either reading: es/it "solo", es "tan", "hacer", de "neu". English's own
#: function words (a, in, no, so, was, will) are STOPWORDS already.
_FUNCTION_WORDS: dict[str, tuple[str, str]] = {
    "de": ("""der das dem des ein eine einen einem einer eines und oder aber nicht kein keine
              keinen ist sind wird werden wurde wurden haben hatte kann können muss müssen soll
              sollen wollen ich er sie wir ihr mich mir dich uns euch sich mein meine dein sein
              seine unser ihre ihren wie wo wann warum wer wen wem welche welcher welches von zu
              zum zur bei beim nach aus auf für über unter vor vom durch gegen ohne um im ins als
              auch also noch schon nur sehr dann denn doch ja nein dass ob wenn weil hier dort da
              diese dieser dieses diesen jetzt mal bitte gibt""",
           "die den bin dir du es hat man mit war"),
    "fr": ("""le les l un une de d au aux et ou mais donc ni que qu qui quoi quel quelle
              quels quelles pourquoi où quand combien sont être été était ont avons avez
              je j tu il elle nous vous ils elles me te se moi toi lui leur leurs mon mes ta
              tes notre nos votre vos ce cet cette ces ça cela ceci dans sur sous pour
              avec chez entre vers pas ne n très aussi déjà bien si faut peut doit""",
           "c car comment des du en est la ma par plus sa sans ses son ton"),
    "es": ("""el los las un una unos unas de y o por para sobre entre hasta desde que
              qué como cómo donde dónde cuando cuándo cual cuál cuáles quien quién porque está
              esta están este esto estos estas ese esa eso fue ser se lo le les te nos mi mis tu
              tus sus nuestro nuestra yo él ella ellos ellas nosotros usted ustedes muy más ya
              también pero si ni cada""",
           "al con del en era es hay la sin son su todo"),
    "pt": ("""o a as um uma uns umas de do da das no na nos ao aos à às pelo pela pelos
              pelas por para sem que quê como onde quando qual quais quem porque porquê é são
              está estão ser foi há tem têm se tu ele ela nós você vocês eles elas meu minha seu
              sua nosso nossa isso isto este esta esse essa aquele aquela muito mais já também
              mas ou nem não lhe me te""",
           "com dos em era eu nas os sim"),
    "it": ("""il i gli le un una dei delle della dello degli da dal dalla in nel nella
              nei sul sulla tra fra che quando quale quali perché perche cosa è e
              sono sta stato essere hanno ho abbiamo si ne mi ti tu lui lei noi voi loro
              mio mia tuo tua suo sua nostro nostra questo questa quello quella molto più già
              anche o sì alla agli allo""",
           "ai al chi ci come con del di dove ha io la lo ma non per su uno vi"),
    "ru": ("""и в во не на я он она оно они мы вы ты что как где когда почему зачем кто какой
              какая какие какое это этот эта эти тот та те то с со к ко по из за от до для о об
              у же ли бы но а или да нет так уже ещё еще только очень тоже также его её ее их
              мой моя мои наш наша наши ваш ваша свой себя мне меня нас вас нам вам ему ей им
              был была были было быть есть будет можно нужно надо чтобы если при над под без
              через между ни""",
           ""),
}
#: Per language (its function words that are no English word, those that are). English
#: STOPWORDS among the first ("a", "do", "no" in Portuguese) are taken out: they are set aside
#: anyway, and an English query must not read as Portuguese for holding them.
FUNCTION_WORDS = {lang: (frozenset(plain.split()) - STOPWORDS, frozenset(english.split()))
                  for lang, (plain, english) in _FUNCTION_WORDS.items()}
#: The other languages' function words that are no English word: set aside whatever the
#: text's language (with English STOPWORDS, `content_words`).
_FOREIGN_ASIDE = frozenset().union(*(plain for plain, _ in FUNCTION_WORDS.values()))


def content_words(terms: list[str]) -> list[str]:
    """`terms` (`words` of a query) without function words, for judging whether a memory
    answers it: English STOPWORDS and the function words of de, fr, es, pt, it and ru.
    A function word no memory holds weighs most of all, so "Wie starten wir den Server neu?"
    missed the bar its content words cleared."""
    aside = STOPWORDS | foreign_function_words(set(terms))
    return [t for t in terms if t not in aside]


#: What pasted tool output says about where, not what: a hex address (`0x7f8e2c1d0b70`), a
#: line number (and column) after a file name (`app.py:57`, `src/a.ts:12:5`; not a URL's port)
#: or after "line" (`line 346`). No memory holds them, or one holds them by chance (a diff
#: stat's "57"), so each weighed like the rarest term.
_WHERE = re.compile(
    r"\b(0x[0-9a-f]{6,})\b"
    r"|(?<!://)(?<![\w./:-])[\w./-]*\w\.[a-z][a-z0-9]{0,4}:(\d+)(?::(\d+))?\b"
    r"|\bline (\d+)\b",
    re.IGNORECASE)


def where_words(text: str) -> set[str]:
    """The words of `text` (as `words` gives them) that say where, not what (`_WHERE`)."""
    return {w.lower() for match in _WHERE.finditer(text) for w in match.groups() if w}


#: Extensions of the files a coding agent talks about (`file_names`). Listed rather than
#: guessed from the shape `name.ext`, which dotted code shares (`os.path`, `Path.resolve`,
#: `process.env`, `console.log`).
FILE_EXTENSIONS = frozenset("""py pyi pyx ipynb rs go rb java kt kts scala swift c h cc cpp cxx
    hpp hh cs fs php js jsx mjs cjs ts tsx mts cts vue svelte astro html htm css scss sass less
    json jsonc json5 yaml yml toml ini cfg conf properties xml md mdx rst txt csv tsv sql
    graphql gql proto sh bash zsh fish ps1 bat tf tfvars hcl nix lua dart ex exs erl hrl hs
    elm clj cljs jl zig sol lock tpl j2 gradle cmake mk""".split())
#: `name.ext`, any path before it; not a call (`res.json()`) nor the middle of a longer dotted
#: name or word. Groups: the word before the extension, the extension.
_FILE_NAME = re.compile(r"(?<![\w-])(?:[\w-]+\.)*?([\w-]*\w)\.([a-z0-9]+)(?![\w(-]|\.\w)",
                        re.IGNORECASE)


def file_names(text: str) -> dict[str, set[str]]:
    """Per extension (FILE_EXTENSIONS) that ends a file name in `text`, the last words of
    those names before it, all as `words` gives them: `users.py` {"py": {"users"}},
    `next.config.js` {"js": {"config"}}."""
    found: dict[str, set[str]] = {}
    for match in _FILE_NAME.finditer(text):
        ext = match.group(2).lower()
        if ext in FILE_EXTENSIONS and (name := words(match.group(1))):
            found.setdefault(ext, set()).add(name[-1])
    return found


def hold_extensions_with_names(query: str, position: Mapping[str, int],
                               matched: list[set[int]]) -> None:
    """For the relevance bar, in place: a file name's extension is held only by the texts
    that hold its name too (`matched[position[word]]`: the ids of the texts holding a query
    word). `users.py` is the words "users" and "py", and on a code store "py" (in every memory
    naming a Python file) weighed as much as "users" (stemmed "user"*, in userId and
    user-agent too), so a memory naming deps.py cleared the bar of 0.5 on "py" alone. An
    extension still weighs (a memory holding `tsconfig.json` covers "tsconfig" and "json")."""
    for ext, names in file_names(query).items():
        needed = [matched[position[n]] for n in names if n in position and n != ext]
        if ext in position and needed:
            matched[position[ext]] &= set().union(*needed)


#: A query with this many content words besides its numbers is judged without the numbers:
#: in a longer question a number is mostly a date no memory's text holds ("What did Maria
#: donate in December 2023?") or a version or count held by chance, and it weighed like the
#: rarest word. LoCoMo dev at the 0.5 bar, r5 / injects / off-topic: 45.7 / 68.8 / 11.8 with
#: every number, 48.5 / 73.0 / 12.5 from 4 words on, 48.2 / 72.4 / 12.0 from 5, 47.5 / 71.4 /
#: 11.8 from 6 (docs/harnesses.md#the-relevance-bar). A short question keeps its number:
#: "which service listens on 5432?", "pytest -n 2".
NUMBERS_ASIDE_FROM = 5


#: A query of one content word ("fix it", "run it again", "what's next?") vouches only for a
#: word of at least this BM25 IDF (in at most about 1 in 7 memories), or one that a single
#: memory holds (on a store of ten memories or fewer no word reaches it): every memory holding
#: its word covers all of it, so on a code store a common word vouched for five memories.
#: Coding set dev, 70 generic prompts in its 9 repositories (bench/data/generic_prompts.json):
#: 50.8% of the pairs injected something with no floor, 46.5 at 1.5, 33.2 at 2.0, 28.3 at 2.5;
#: its questions (r5 56.9, injects 77.4) and LoCoMo dev at the 0.5 bar (48.3 / 72.5 / 12.0)
#: moved at none of these but 2.5 (LoCoMo r5 48.2). docs/harnesses.md#the-relevance-bar.
ONE_WORD_MIN_IDF = 2.0


def bar_terms(query: str) -> list[str]:
    """What the relevance bar weighs: the query's content words (`content_words`) less what
    pasted output says about where (`where_words`), and less its numbers when
    NUMBERS_ASIDE_FROM other words are left. A query of nothing else ("0x7f8e2c1d0b70")
    keeps them."""
    content = content_words(words(query))
    where = where_words(query)
    terms = [t for t in content if t not in where] or content
    if sum(not t.isdigit() for t in terms) >= NUMBERS_ASIDE_FROM:
        return [t for t in terms if not t.isdigit()]
    return terms


def foreign_function_words(present: set[str]) -> frozenset[str]:
    """The function words of de, fr, es, pt, it and ru to set aside in a text holding the
    lower-cased words `present`: those that are no English word always; those that are
    English words too ("die", "comment", "est") only in a text of that language: one holding
    two of its other function words, or one of them beside two such English-looking ones
    ("Où est la configuration des tests ?")."""
    aside = _FOREIGN_ASIDE
    for plain, english in FUNCTION_WORDS.values():
        own = len(present & plain)
        if english and (own >= 2 or (own and len(present & english) >= 2)):
            aside |= english
    return aside


#: Bounds the work a pathological (10 kB, emoji-laden) query can cause.
MAX_QUERY_TERMS = 64


def words(text: str) -> list[str]:
    """Unicode word tokens, lowercased and composed (NFC), in order of appearance, without
    duplicates. Composed first: `\\w` takes no combining mark, so a decomposed "Größe" (o and
    U+0308, as macOS and some Vietnamese input methods write it) was cut in two, and an NFD
    query missed the relevance bar that its NFC form cleared. Widths folded too (`fold_width`):
    full-width Latin letters and digits, as a Chinese or Japanese input method types them
    (`Ｅ１０２４`, `ｐａｒｓｅ＿ｃｏｎｆｉｇ`), are the ASCII words a memory holds.

    Leading and trailing underscores are no part of a word, and a run of them alone is none:
    pytest's `____ test_x ____` separators were query words no memory matches (the porter
    index holds no underscore), so they weighed as the rarest terms and pushed the right memory
    under the relevance bar. `__init__` is the word `init`, as the porter index holds it."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(fold_width(unicodedata.normalize("NFC", text.lower()))):
        if word := match.group().strip("_"):
            seen.setdefault(word, None)
    return list(seen)


#: The Halfwidth and Fullwidth Forms block and the ideographic space: what `fold_width` folds.
_WIDTH = re.compile("[\u3000\uff01-\uffee]+")


def fold_width(text: str) -> str:
    """`text` with its full-width ASCII (`Ｅ１０２４` -> `E1024`), halfwidth katakana and hangul,
    and ideographic spaces in their usual forms (NFKC of those characters alone: NFKC of all
    text would also take apart Thai and Lao SARA AM, which the index holds whole)."""
    return _WIDTH.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)


def typed_forms(text: str) -> dict[str, str]:
    """Per word of `text` (as `words` gives it) that `fold_width` changed, the word as
    typed (composed, lower-cased): "e1024" -> "ｅ１０２４". The porter and trigram indexes hold
    a memory's text as written (FTS5 folds no width), so a search also looks for the word as
    typed: a full-width query still finds a memory written in full width."""
    found: dict[str, str] = {}
    for chunk in unicodedata.normalize("NFC", text.lower()).split():
        # the chunk whole first: a full-width low line (`ＵＳＥ＿ＣＡＣＨＥ`) is no `\w`
        for typed in (_EDGES.sub("", chunk), *(m.group() for m in _WORD.finditer(chunk))):
            folded = words(typed)
            if len(folded) == 1 and folded[0] != typed:
                found.setdefault(folded[0], typed)
    return found


_EDGES = re.compile(r"^\W+|\W+$")


#: A command-line flag of two or more words (`--no-verify`, `--dry-run-report`): its words
#: say one thing together and another apart (`--no-verify` is no advice to verify, and "no"
#: alone is a stopword), so the keyword channels keep it whole (`flags`).
_FLAG = re.compile(r"(?<![\w-])--([^\W_]+(?:-[^\W_]+)+)(?![\w-])")


def flags(text: str) -> list[str]:
    """The multi-word flags of `text` without their dashes in front, lower-cased, without
    duplicates: `git commit --no-verify` -> ["no-verify"]."""
    return list(dict.fromkeys(m.group(1).lower() for m in _FLAG.finditer(text)))


def without_flags(text: str) -> str:
    """`text` with its multi-word flags (`flags`) blanked out."""
    return _FLAG.sub(" ", text)


def part_starts(terms: list[str], texts: dict[int, str], min_chars: int) -> list[set[int]]:
    """For each term (lower-cased, as `words` gives it) of `min_chars`+ characters, the ids of
    the texts holding it where a word or a part of an identifier starts (`starts_a_part`)."""
    lowered = {i: text.lower() for i, text in texts.items()}
    return [{i for i, text in texts.items() if term in lowered[i] and starts_a_part(term, text)}
            if len(term) >= min_chars else set() for term in terms]


def starts_a_part(term: str, text: str) -> bool:
    """Whether `text` holds `term` where a word or a part of an identifier starts, ignoring
    case: after anything but a letter or digit (_, -, ., /), after a lower-case letter that an
    upper-case one follows (getUser|AccountBalance), between a letter and a digit
    (utf8|Decoder), or at an acronym's last capital that starts a word (MCP|Server). The
    porter index holds `getUserAccountBalance` as one word, so "AccountBalance" is no word of
    it; inside a word of English ("port" in "import", "data" in "metadata") there is no such
    place, so a common substring vouches for nothing."""
    for match in re.finditer(re.escape(term), text, re.IGNORECASE):
        i = match.start()
        if i == 0:
            return True
        before, first = text[i - 1], text[i]
        if (not before.isalnum() or (before.islower() and first.isupper())
                or before.isdigit() != first.isdigit()
                or (before.isupper() and first.isupper() and text[i + 1:i + 2].islower())):
            return True
    return False


def identifier_parts(text: str) -> dict[str, tuple[str, ...]]:
    """The words of `text` (lower-cased, as `words` gives them) that are identifiers of two or
    more parts, with their parts: a snake_case word cut at its underscores (`lazy_mcp`: lazy,
    mcp), a camelCase or PascalCase one where its case changes (`maxBodyBytes`: max, body,
    bytes; `LazyMCP`: lazy, mcp; `DataLoaderV2`: data, loader, v2; `MCPServer`: mcp, server)."""
    found: dict[str, tuple[str, ...]] = {}
    for match in _WORD.finditer(fold_width(unicodedata.normalize("NFC", text))):
        word = match.group().strip("_")
        parts = [p.lower() for piece in word.split("_") if piece for p in _camel_parts(piece)]
        if len(parts) >= 2:
            found.setdefault(word.lower(), tuple(parts))
    return found


def _camel_parts(piece: str) -> list[str]:
    """`piece` cut before each capital that follows a lower-case letter or a digit, and before
    an acronym's last capital when a lower-case letter follows it (MCP|Server); whole when
    neither is in it (`HTTP`, `0x7F8E2C`, `Config`)."""
    if not any((a.islower() and b.isupper()) or (a.isupper() and b.isupper() and c.islower())
               for a, b, c in zip(piece, piece[1:], piece[2:] + " ")):
        return [piece]
    parts, start = [], 0
    for i in range(1, len(piece)):
        before, here, after = piece[i - 1], piece[i], piece[i + 1:i + 2]
        if here.isupper() and (before.islower() or before.isdigit()
                               or (before.isupper() and after.islower())):
            parts.append(piece[start:i])
            start = i
    parts.append(piece[start:])
    return parts


#: Scripts written without spaces between words: Han, Hiragana, Katakana, Hangul, Thai, Lao,
#: Khmer, Myanmar. Hangul's jamo too (U+1100-U+11FF): a decomposed (NFD) query spells its
#: syllables with them.
UNSPACED = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


def trigram_terms(query: str) -> list[str]:
    """Substrings a substring channel looks for, without duplicates: a multi-word flag whole
    (`flags`: `no-verify`, not `verify`), words of 3+ characters (no stopwords); a run of an
    unspaced script is cut into its overlapping 3-character pieces, so a partial overlap
    between query and memory still matches."""
    terms: dict[str, None] = dict.fromkeys(flags(query))
    for word in words(without_flags(query)):
        if word in STOPWORDS or len(word) < 3:
            continue
        if UNSPACED.search(word) and len(word) > 3:
            for i in range(len(word) - 2):
                terms.setdefault(word[i : i + 3], None)
        else:
            terms.setdefault(word, None)
    return list(terms)


#: A query word no memory holds may be a compound typed otherwise than the memory spells it:
#: two words run together ("healthcheck" for "health check", "precommit" for `pre-commit`) or
#: one word typed apart ("auto scaler" for `Autoscaler`). Each part of at least
#: COMPOUND_PART_MIN letters, the whole of at most COMPOUND_MAX (so at most
#: COMPOUND_MAX - 2 * COMPOUND_PART_MIN + 3 readings to look up per word).
COMPOUND_PART_MIN = 3
COMPOUND_MAX = 20


def compound_readings(word: str, query_words: list[str]) -> list[str]:
    """`word` (a query word, lower-cased as `words` gives it) read as a compound typed
    otherwise, in the order to try them: as two words run together (`two_word_readings`:
    "healthcheck" -> "health check"), then as part of one word typed apart, run together with
    the word before it or after it in the query (`query_words`: `words` of the query; "scaler"
    in "auto scaler" -> "autoscaler")."""
    readings = two_word_readings(word)
    if compound_part(word) and word in query_words:
        at = query_words.index(word)
        pairs = ([(query_words[at - 1], word)] if at else []) + (
            [(word, query_words[at + 1])] if at + 1 < len(query_words) else [])
        readings += [a + b for a, b in pairs
                     if compound_part(a) and compound_part(b) and len(a + b) <= COMPOUND_MAX]
    return readings


def two_word_readings(word: str) -> list[str]:
    """`word` (lower-cased, as `words` gives it) read as two words run together, each reading
    a phrase of two words, the most even cut first: "darkmode" -> "dark mode", "dar kmode",
    "darkm ode". None for a word that is not all letters of a spaced script, or is shorter
    than two parts or longer than COMPOUND_MAX; no reading with a stopword for a part
    ("rollout" is no "roll out": PostgreSQL's full text drops "out", so could not match it)."""
    if not compound_part(word) or not 2 * COMPOUND_PART_MIN <= len(word) <= COMPOUND_MAX:
        return []
    cuts = sorted(range(COMPOUND_PART_MIN, len(word) - COMPOUND_PART_MIN + 1),
                  key=lambda i: (abs(len(word) - 2 * i), i))
    return [f"{word[:i]} {word[i:]}" for i in cuts
            if word[:i] not in STOPWORDS and word[i:] not in STOPWORDS]


def compound_part(word: str) -> bool:
    """Whether `word` can be part of a compound, so has `compound_readings` where the query
    allows: COMPOUND_PART_MIN+ letters of a spaced script, no stopword."""
    return (len(word) >= COMPOUND_PART_MIN and word.isalpha() and word not in STOPWORDS
            and not UNSPACED.search(word))


#: How git names a commit in short (`git log --oneline`, most commit messages): its first
#: SHORT_HASH hex digits.
SHORT_HASH = 7
#: A hex word longer than a short hash, with a digit and a letter in it (no plain number, no
#: word like "deadbeef" or "facade").
_LONG_HEX = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,64}")


def short_hash(word: str) -> str | None:
    """The short form of a hash typed in full (`7c3e9a1f0b2d` -> `7c3e9a1`), where a memory
    names it as git's short form (`Commit 7c3e9a1 introduced ...`); None for any other word.
    The reverse, a short hash where the memory holds the full one, is a prefix match already."""
    return word[:SHORT_HASH] if _LONG_HEX.fullmatch(word) else None


#: Work bound of an OR query, in matching rows. BM25 scores every memory that contains any
#: query term, so on a big store one common term ("project", a speaker's name) costs more than
#: all the others together. When the terms' document frequencies add up to more than this,
#: terms are kept rarest first while they fit and the commoner rest, whose IDF is lowest, is
#: left out (the "common terms" cut of Lucene); when even the rarest term matches more, its
#: newest matches up to the budget are ranked. A query is exact whenever its terms match at
#: most this many memories, so always on a store of up to that size.
MATCH_BUDGET = 2_000
#: A cut query whose hits a narrow filter thins out below k/4 is run once more, with the
#: budget the share of matches that passed asks for, up to this multiple of MATCH_BUDGET.
MATCH_BUDGET_MAX_FACTOR = 16


def bm25_idf(docs: int, df: int) -> float:
    """BM25's IDF of a term found in `df` of `docs` documents (Lucene's form: never negative)."""
    return math.log((docs - df + 0.5) / (df + 0.5) + 1.0)


def coverages(weights: list[float], matched: list[set[int]], doc_ids: list[int]
              ) -> dict[int, float]:
    """Per document, the share of the weights of the phrases it matched (`matched[i]`: the
    documents phrase i matched)."""
    total = sum(weights)
    return {d: (sum(w for w, m in zip(weights, matched, strict=False) if d in m) / total
                if total > 0 else 0.0) for d in doc_ids}
