"""Conversation turns read from a harness's transcript, cleaned and cut into memories.

A compaction flush stores what the harness is about to summarise away. Each memory is one
exchange (a user message and the replies to it), so it can be recalled on its own; a long
exchange is split at paragraph, line, sentence or word boundaries, each later piece headed by
the question it answers (by the service, after its secret redaction: a flush sends such an
exchange whole, `flush_items`). Chunking is deterministic, so a second compaction of the same
turns produces the same memories and the store's hash dedup refreshes them instead of adding
copies. Each exchange is dated by its first user turn (`Turn.at`, the transcript's own time);
an exchange that only acknowledges (`acknowledges`) is not stored, and each message is cut to
MESSAGE_CHARS, head and tail, before any of this.
"""

from __future__ import annotations

import time

from ..limits import MAX_FUTURE_S
from ..lite import loads_input
from ..sources import PIECE_HEAD

# No re, typing, dataclasses or pathlib at import: a hook process imports this module, and
# most prompts need none of the patterns below (each is compiled on first use, behind a
# test that its match is possible at all).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path
    from re import Pattern
    from typing import Any

#: Longest memory a flush writes, in characters (an exchange, or one piece of a long one).
CHUNK_CHARS = 1_200
#: Exchanges with less text than this ("User: ok / Assistant: Done.") are not worth a memory.
MIN_CHUNK_CHARS = 40
#: The question heading the later pieces of a long exchange.
HEAD_CHARS = 160
#: Longest message (one user message, one reply) a flush keeps whole, in characters; a longer
#: one keeps its head and tail, half of this each, around `[… N characters left out …]`.
#: About 8,000 tokens: a long write-up of the agent's stays whole, while past it the message
#: is a pasted log or file, whose head (what was run) and tail (where it failed) are what is
#: worth recalling; a 7 MB paste made ~6,000 memories of log noise, and over the service's
#: MEMORY_MAX_BODY_BYTES (4 MiB) its whole exchange was refused. An exchange is then at most
#: ~55 pieces, and a flush request of FLUSH_BATCH (500) pieces stays far under that limit.
MESSAGE_CHARS = 32_000
#: A reply of at most this many words (`str.split`) to a user message that only acknowledges
#: ("ok", "thanks!", "lgtm") is not worth a memory: "You're welcome! Let me know if you need
#: anything else." is 10, "Great, I'll proceed with the next step then." 8. A reply with
#: something in it ("Continuing: the 14 call sites of UserService now use AccountService, and
#: the tests pass.") is longer, and a question of any length keeps its answer.
ACK_REPLY_WORDS = 12

# Blocks a harness or this project put into the conversation that are not the conversation:
# injected memories (never store them again), reminders, slash-command wrappers, hook output,
# environment and instruction preambles.
_NOT_CONVERSATION = (
    r"<(semantic-memory|system-reminder|command-name|command-message|command-args|"
    r"local-command-stdout|local-command-stderr|local-command-caveat|hook_result|"
    r"environment_context|user_instructions|skills_instructions)\b[^>]*>"
    r".*?</\1\s*>",
    "SI",
)


#: A prompt asking to store something: "remember …", "Remember: …", "remember that …",
#: "REMEMBER — …", "remember：…", or the same word in German, French, Spanish, Portuguese,
#: Italian, Russian, Chinese, Japanese or Korean ("merk dir, dass …", "记住：…", "覚えておいて：…",
#: "запомни, что …"). A Chinese, Japanese or Korean word needs a space or separator after it:
#: "记住了" (got it), "覚えてない" (I don't remember) and "기억해야" (must remember) are not asks.
#: What follows is the fact (`remembered`: when it is one).
_REMEMBER = (r"^\s*(?:(?:remember|merke?\s+dir|retiens|souviens-toi|recuerda|lembre-se|lembra-te"
             r"|ricorda|запомни)\b|(?:记住|記住|覚えて(?:おいて|おけ|ください)?"
             r"|기억해(?:\s*(?:줘|둬|주세요|두세요))?)(?=[\s:,.\u2013\u2014\uff1a\uff0c\u3001-]))"
             r"[\s:,.\u2013\u2014\uff1a\uff0c\u3001-]*"
             r"(?:(?:that|que|dass|che|что)(?:[\s:,.\u2013\u2014\uff1a\uff0c\u3001-]+|\Z))?"
             r"(?P<rest>.*)$", "IS")
#: How each of those words starts (casefolded): a prompt that starts otherwise is not looked at.
_REMEMBER_HEADS = ("remember", "merk", "retiens", "souviens", "recuerda", "lembr", "ricorda",
                   "запомни", "记住", "記住", "覚えて", "기억해")
#: A reply to a "remember" prompt with at most this many words that are not the fact's is only
#: its acknowledgement ("Noted.", "Got it: the freeze starts Fridays at noon."): not stored.
ACK_WORDS = 20

#: What a user message that only acknowledges, greets or waves the agent on says (its words
#: lowercased, punctuation and emoji aside): one of these, or several in a row ("ok thanks",
#: "lgtm, continue!"). Not a confirmation ("yes", "go ahead", "do it"): its short reply is
#: what was done ("Dropped the users table and re-ran the migration."). transcript.ts
#: ACKNOWLEDGEMENTS is the same list.
ACKNOWLEDGEMENTS = frozenset((
    "ok", "okay", "okey", "k", "kk", "thanks", "thank you", "thank you very much",
    "thanks a lot", "thanks so much", "thanks very much", "many thanks", "thx", "ty", "tysm",
    "cheers", "continue", "go on", "carry on", "keep going", "lgtm",
    "looks good", "sounds good", "all good", "great", "nice", "cool", "perfect", "good",
    "awesome", "excellent", "fine", "alright", "all right", "got it", "works for me",
    "that works", "makes sense", "nice work", "good job", "great job", "well done",
    "no problem", "np", "done", "hi", "hello", "hey",
    "danke", "danke schön", "merci", "merci beaucoup", "gracias", "grazie", "obrigado",
    "obrigada", "спасибо", "谢谢", "好的", "ありがとう", "ありがとうございます", "了解",
    "감사합니다"))
#: The longest acknowledgement phrase, in words.
_ACK_PHRASE_WORDS = max(len(phrase.split()) for phrase in ACKNOWLEDGEMENTS)
#: An acknowledgement with no words at all ("👍", "🙏🎉").
_ACK_EMOJI = ("\U0001f44d", "\U0001f44c", "\U0001f64f", "\u2705", "\U0001f389", "\U0001f4af",
              "\U0001f680", "\U0001f64c", "\U0001f44f")
#: Longer user text is never looked at as an acknowledgement.
_ACK_CHARS = 80

# A whole text in double quotes: how `opencode run` passes an argument holding a space
# (`"` + the argument with each `"` written `\"` + `"`), or quotes a user typed around it
# (curly double quotes, or single quotes, ASCII or curly, with none of their kind inside).
_WRAPPED = (
    r'\s*(?:"(?P<escaped>(?:[^"\\]|\\.)*)"|\u201c(?P<curly>[^\u201c\u201d]*)\u201d'
    r"|'(?P<single>[^']*)'|\u2018(?P<curly_single>[^\u2018\u2019]*)\u2019)\s*", "S")
_OPENING_QUOTES = ('"', "\u201c", "'", "\u2018")
_QUOTES_AND_ESCAPES = "".join(_OPENING_QUOTES) + "\\"
_WORD = (r"[^\W_]+", "")
#: The first sentence of a text: up to `.` `!` `?` before a space or the end, or a CJK stop.
_FIRST_SENTENCE = (r".*?(?:[.!?](?=\s|\Z)|[\u3002\uff01\uff1f]|\Z)", "S")
#: Words a "remember" prompt's rest that asks opens with ("remember which port we chose.").
_ASKING_WORDS = ("what", "which", "whether")
_COMPILED: dict[tuple[str, str], Pattern[str]] = {}


def _pattern(spec: tuple[str, str]) -> Pattern[str]:
    """The compiled pattern of (source, flag letters), compiled on first use. Never from a
    signal handler (the hook's watchdog): the first use imports `re`, and an alarm that
    interrupted that import in the run would meet the module half-imported there."""
    found = _COMPILED.get(spec)
    if found is None:
        import re

        flags = 0
        for letter in spec[1]:
            flags |= getattr(re, letter)
        found = _COMPILED[spec] = re.compile(spec[0], flags)
    return found


def __getattr__(name: str) -> Any:
    """`REMEMBER`, the compiled pattern, for code that used it."""
    if name == "REMEMBER":
        return _pattern(_REMEMBER)
    raise AttributeError(name)


class Turn:
    """One conversation turn: `role` ("user" or "assistant"), `text`, and `at`, when the
    harness wrote it (unix seconds, from the transcript: `transcript_time`; None when it says
    none). Immutable."""

    __slots__ = ("role", "text", "at")

    def __init__(self, role: str, text: str, at: float | None = None) -> None:
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "at", at)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.role, self.text, self.at) == (
            other.role, other.text, other.at)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.role, self.text, self.at))

    def __repr__(self) -> str:
        return f"Turn(role={self.role!r}, text={self.text!r}, at={self.at!r})"


def transcript_time(value: Any) -> float | None:
    """A transcript line's time as unix seconds: an ISO 8601 string (Claude Code's and Codex's
    `timestamp`, UTC unless it has an offset) or milliseconds since the epoch (Kimi Code's
    `time`, opencode's `time.created`). None when it is neither, before 1970, or more than a
    day ahead of this machine's clock (MAX_FUTURE_S): the service refuses such a memory
    (422), so its exchange is dated when it is stored instead."""
    if isinstance(value, str):
        from datetime import UTC, datetime

        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = value / 1000
        except OverflowError:  # an integer past any float
            return None
    else:
        return None
    # NaN fails both comparisons.
    return seconds if 0 <= seconds <= time.time() + MAX_FUTURE_S else None


def clean(text: str) -> str:
    """The conversation text without injected or harness-generated blocks."""
    if "<" not in text:  # every block starts with one
        return text.strip()
    return _pattern(_NOT_CONVERSATION).sub("", text).strip()


def unquote(text: str) -> str:
    """`text` without the quotes wrapped around all of it (any number of times: `opencode run
    '"remember that …"'` wraps the typed quotes once more); anything else as it is. Double
    quotes (`\\"` inside is a quote), curly double quotes, and single quotes, ASCII or curly,
    with no quote of their kind inside (so `'x' and 'y'` stays). The quotes are not the
    prompt: "remember" detection and recall see the words inside."""
    # The pattern's first character past any whitespace is an opening quote.
    while text.lstrip()[:1] in _OPENING_QUOTES and \
            (found := _pattern(_WRAPPED).fullmatch(text)) is not None:
        escaped, *others = found.group("escaped", "curly", "single", "curly_single")
        inner = escaped.replace('\\"', '"') if escaped is not None else \
            "".join(other for other in others if other is not None)
        if not inner.strip():
            break
        text = inner
    return text


def may_remember(prompt: str) -> bool:
    """Whether `prompt` may be a "remember" (`remembered` is None for every prompt this is
    False for): it starts with one of the words, past any spaces, opening quotes and the
    backslashes of escaped ones (`unquote`). No pattern, no import: a hook tells a recall
    from a possible "remember" with it at once, and even where it may not import (its
    watchdog, the last steps of a stopped run)."""
    text = prompt
    while True:
        rest = text.lstrip().lstrip(_QUOTES_AND_ESCAPES)
        if rest == text:
            return text[:8].lower().startswith(_REMEMBER_HEADS)
        text = rest


def remembered(prompt: str) -> str | None:
    """What a "remember …" prompt asks to store; None for any other prompt, and for one with
    nothing to store (`remember:`, `remember that`: no letter or digit after the word) or
    that asks (`_asks`: `remember the port we picked? put it in config.yaml`), which are
    ordinary prompts: recalled for, not stored."""
    if not may_remember(prompt):  # before any regex, `unquote`'s included
        return None
    prompt = unquote(prompt)
    if not prompt.lstrip()[:8].lower().startswith(_REMEMBER_HEADS):  # before any regex
        return None
    found = _pattern(_REMEMBER).match(prompt)
    if found is None:
        return None
    fact = unquote(found.group("rest")).strip()
    if _pattern(_WORD).search(fact) is None or _asks(fact):
        return None
    return fact


def _asks(rest: str) -> bool:
    """Whether the rest of a "remember" prompt asks what was remembered rather than tells
    something to remember: its first sentence is a question (`remember the port we picked?
    put it in config.yaml`: stored, the question hid the answer from the agent and came
    back ahead of it in later recalls), or it opens with what, which or whether and has no
    `:` (`remember which port we chose.`; `remember what we decided: use pnpm` tells)."""
    first = _pattern(_FIRST_SENTENCE).match(rest)
    if first is not None and first.group().rstrip()[-1:] in ("?", "\uff1f"):
        return True
    opening = _words(rest[:40])[:1]
    return bool(opening) and opening[0] in _ASKING_WORDS and ":" not in rest \
        and "\uff1a" not in rest


def _words(text: str) -> list[str]:
    """Lowercased runs of letters and digits."""
    return _pattern(_WORD).findall(text.lower())


def read_jsonl(path: str | Path, start: int = 0) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file from byte offset `start`; bad lines are skipped."""
    with open(path, "rb") as handle:
        handle.seek(start)
        for line in handle:
            item = _object(line)
            if item is not None:
                yield item


def read_jsonl_reversed(path: str | Path, block: int = 1 << 16, end: int | None = None
                        ) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, last first, reading only as far back as the
    caller iterates (a session's last message is near the end of a long transcript); with
    `end`, those of the lines before that byte offset (a line's start)."""
    with open(path, "rb") as handle:
        position = handle.seek(0, 2) if end is None else end
        rest = b""
        while position > 0:
            step = min(block, position)
            position -= step
            handle.seek(position)
            lines = (handle.read(step) + rest).split(b"\n")
            rest = lines.pop(0)  # may continue in the block before
            for line in reversed(lines):
                item = _object(line)
                if item is not None:
                    yield item
        item = _object(rest)
        if item is not None:
            yield item


def last_line_offset(path: str | Path, marker: bytes, block: int = 1 << 16) -> int:
    """Byte offset of the start of the last line containing `marker` (0 when none): where the
    turns since a transcript's last compaction begin."""
    with open(path, "rb") as handle:
        end = handle.seek(0, 2)
        position, tail = end, b""
        while position > 0:
            step = min(block, position)
            position -= step
            handle.seek(position)
            data = handle.read(step) + tail
            found = data.rfind(marker)
            if found >= 0:
                return _line_start(handle, position + found, block)
            tail = data[: len(marker) - 1]
    return 0


def _line_start(handle: Any, offset: int, block: int) -> int:
    """Offset just after the last newline before `offset` (0 at the start of the file)."""
    while offset > 0:
        step = min(block, offset)
        handle.seek(offset - step)
        newline = handle.read(step).rfind(b"\n")
        if newline >= 0:
            return offset - step + newline + 1
        offset -= step
    return 0


def _object(line: bytes) -> dict[str, Any] | None:
    """A transcript line's object, as valid Unicode (`lite.loads_input`); None for others."""
    item = loads_input(line, None)
    return item if isinstance(item, dict) else None


def count_in_file(path: str | Path | None, pattern: bytes) -> int:
    """Occurrences of `pattern` in a file (0 when there is none): counting compaction markers
    in a transcript without parsing it."""
    if not path:
        return 0
    count, tail = 0, b""
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                data = tail + chunk
                count += data.count(pattern)
                tail = data[-(len(pattern) - 1):] if len(pattern) > 1 else b""
                count -= tail.count(pattern)  # counted again with the next chunk
    except OSError:
        return 0
    return count


def text_of(content: Any, part_types: tuple[str, ...] = ("text",)) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"] for part in content
            if isinstance(part, dict) and part.get("type") in part_types
            and isinstance(part.get("text"), str))
    return ""


def last_user_text(turns: Iterable[Turn]) -> str | None:
    """The latest user message with conversation text in it (a session-start query)."""
    found = None
    for turn in turns:
        if turn.role == "user" and clean(turn.text):
            found = turn.text
    return found


def exchanges(turns: Iterable[Turn]) -> list[tuple[str, str, float | None]]:
    """(user text, assistant text, time) per exchange; assistant text before any user message
    forms an exchange of its own. The time is its first user turn's (`Turn.at`; without a user
    text, its first reply's). A prompt's wrapping quotes go (`unquote`); each message is cut to
    MESSAGE_CHARS (`capped`). A "remember …" prompt was stored as a fact when it was made: it
    is left out, and so are the replies that only acknowledge it (`ACK_WORDS`); a longer reply
    to it is an exchange of its own. An exchange whose user text only acknowledges and whose
    reply is short (`trivial`: "thanks!" / "You're welcome!") is left out."""
    out: list[tuple[str, str, float | None]] = []
    user: list[str] = []
    reply: list[str] = []
    at: float | None = None
    fact: set[str] | None = None  # the words of the latest prompt's fact, if it was one

    def close() -> None:
        asked, answer = "\n\n".join(user), "\n\n".join(reply)
        if not trivial(asked, answer):
            out.append((asked, answer, at))

    for turn in turns:
        text = clean(turn.text)
        if not text:
            continue
        if turn.role == "user":
            if reply:
                close()
                user, reply = [], []
            asked = remembered(text)
            fact = None if asked is None else set(_words(asked))
            if fact is None:
                if not user:
                    at = turn.at
                user.append(capped(unquote(text).strip()))
            continue
        text = capped(text)
        if fact is None or len(set(_words(text)) - fact) > ACK_WORDS:
            if not user and not reply:
                at = turn.at
            reply.append(text)
    if user or reply:
        close()
    return out


def capped(text: str) -> str:
    """A message as a flush keeps it: whole up to MESSAGE_CHARS, else its head and tail, half
    of that each, around `[… N characters left out …]` (N: how much longer it was), as a
    tool's capture record keeps a long output (adapter.py `capture_record`)."""
    if len(text) <= MESSAGE_CHARS:
        return text
    half = MESSAGE_CHARS // 2
    return f"{text[:half].rstrip()}\n[… {len(text) - MESSAGE_CHARS} characters left out …]\n" \
           f"{text[-half:].lstrip()}"


def trivial(user: str, reply: str) -> bool:
    """Whether an exchange is not worth a memory: its user text only acknowledges
    (`acknowledges`) and its reply has at most ACK_REPLY_WORDS words ("ok" / "Great, I'll
    proceed with the next step then."). A short question keeps its short answer."""
    return acknowledges(user) and len(reply.split(None, ACK_REPLY_WORDS)) <= ACK_REPLY_WORDS


def acknowledges(text: str) -> bool:
    """Whether a user message only acknowledges or waves the agent on: its words, lowercased,
    are ACKNOWLEDGEMENTS phrases one after another ("ok", "Thanks!", "yes, go ahead", "LGTM
    👍"), or it has no words and an acknowledging emoji ("👍"). Punctuation and emoji aside;
    a `?` makes it a question, never an acknowledgement."""
    if len(text) > _ACK_CHARS or "?" in text or "\uff1f" in text:
        return False
    words = _words(text)
    if not words:
        return any(emoji in text for emoji in _ACK_EMOJI)
    ends = {0}  # how many words a run of phrases can cover
    for start in range(len(words)):
        if start in ends:
            ends.update(start + size for size in range(1, _ACK_PHRASE_WORDS + 1)
                        if " ".join(words[start : start + size]) in ACKNOWLEDGEMENTS
                        and start + size <= len(words))
    return len(words) in ends


def chunk_turns(turns: Iterable[Turn], max_chars: int = CHUNK_CHARS) -> list[str]:
    """The memories a flush stores for these turns, oldest first, without repeats (and
    without what "remember" prompts stored already: `exchanges`), before any redaction."""
    return flush_chunks(turns, max_chars=max_chars)[0]


def flush_items(turns: Iterable[Turn], newest: int | None = None,
                max_chars: int = CHUNK_CHARS) -> tuple[list[tuple[dict[str, Any], int]], int]:
    """The /ingest batch items a flush sends for these turns, oldest first, each with how
    many memories it makes, and how many memories of older exchanges `newest` left out.

    An exchange cut into several pieces goes whole (`{"exchange": {"user", "reply"}}`): the
    service redacts it before it cuts it as `exchange_chunks` does, since a cut through a
    secret (a private key's lines, "the password is" | "Hunter2…") leaves halves that each
    pass its redaction of one memory. Any other exchange is its memory (`{"content": …}`),
    each once (`_worth`: a question and its answer however short, else MIN_CHUNK_CHARS), dated
    by its first user turn (`created_at`; none when the transcript gave no time, and the
    service dates it when it stores it). The newest exchanges whose memories make up
    `newest` at most are kept; one the limit cuts through goes whole. Counts are of the cut
    before the service's redaction (which can shift a cut). What the opencode plugin sends
    (transcript.ts `flushItems`), item for item."""
    # Counted, not cut: an exchange of many pieces goes whole, and the service cuts it.
    pairs = [(user, reply, at, _piece_count(user, reply, max_chars))
             for user, reply, at in exchanges(turns)]
    first = 0
    if newest is not None:  # the newest exchanges whose memories make up `newest`
        first, count = len(pairs), 0
        while first and count < newest:
            first -= 1
            count += pairs[first][3]
    items: list[tuple[dict[str, Any], int]] = []
    seen: set[str] = set()
    for user, reply, at, pieces in pairs[first:]:
        dated = {} if at is None else {"created_at": at}  # else the service's clock
        if pieces > 1:
            items.append(({"exchange": {"user": user, "reply": reply}, **dated}, pieces))
        elif _worth(user, reply, memory := _exchange_text(user, reply)) and memory not in seen:
            seen.add(memory)
            items.append(({"content": memory, **dated}, 1))
    older = dict.fromkeys(chunk for user, reply, _, pieces in pairs[:first]
                          for chunk in _memories(user, reply, pieces, max_chars))
    return items, len(older)


def _worth(user: str, reply: str, memory: str) -> bool:
    """Whether a whole exchange is a memory: one with a question and its answer is, however
    short ("which port?" / "5432"; `trivial` took out those that only acknowledge); one with
    either alone when it has MIN_CHUNK_CHARS ("Assistant: Done." is not)."""
    return bool(user and reply) or len(memory) >= MIN_CHUNK_CHARS


def _memories(user: str, reply: str, pieces: int, max_chars: int) -> list[str]:
    """The memories of one exchange of `pieces` pieces, before any redaction."""
    if pieces > 1:
        return _unique(_chunk_exchange(user, reply, max_chars))
    memory = _exchange_text(user, reply)
    return [memory] if _worth(user, reply, memory) else []


def flush_chunks(turns: Iterable[Turn], newest: int | None = None,
                 redact: Callable[[str], str] | None = None,
                 max_chars: int = CHUNK_CHARS) -> tuple[list[str], int]:
    """The memories the service stores for a flush of these turns (`flush_items`: each
    exchange item cut as `exchange_chunks` cuts it, after `redact`, the service's redaction;
    without one, as it stands), and how many older ones `newest` left out."""
    items, left_out = flush_items(turns, newest, max_chars)
    chunks = dict.fromkeys(
        chunk for item, _ in items
        for chunk in ([item["content"]] if "content" in item else _unique(_chunk_exchange(
            item["exchange"]["user"], item["exchange"]["reply"], max_chars, redact))))
    return list(chunks), left_out


def memories_of(item: dict[str, Any], max_chars: int = CHUNK_CHARS) -> int:
    """How many memories an /ingest batch item makes, as a flush cuts it before the
    service's redaction: an exchange (`flush_items`) its pieces, any other item one."""
    exchange = item.get("exchange")
    if not isinstance(exchange, dict):
        return 1
    user, reply = exchange.get("user"), exchange.get("reply")
    if not isinstance(user, str) or not isinstance(reply, str):
        return 1
    return _piece_count(user, reply, max_chars)


def exchange_chunks(user: str, reply: str, redact: Callable[[str], str],
                    max_chars: int = CHUNK_CHARS) -> list[str]:
    """The memories of one exchange, redacted with `redact` first when it is cut. The
    service cuts an exchange sent whole (`/ingest`'s `exchange` items, `flush_items`) with
    this."""
    return _unique(_chunk_exchange(user, reply, max_chars, redact))


def _unique(chunks: Iterable[str]) -> list[str]:
    """`chunks` in order, each once, without those too short to be worth a memory."""
    return list(dict.fromkeys(chunk for chunk in chunks if len(chunk) >= MIN_CHUNK_CHARS))


def _exchange_text(user: str, reply: str) -> str:
    return "\n".join(([f"User: {user}"] if user else []) +
                     ([f"Assistant: {reply}"] if reply else []))


def _chunk_exchange(user: str, reply: str, max_chars: int,
                    redact: Callable[[str], str] | None = None) -> list[str]:
    """An exchange as one memory, or cut into pieces of at most `max_chars` (each later one
    headed by its question), redacted with `redact` first when it is cut."""
    whole = _exchange_text(user, reply)
    if len(whole) <= max_chars:
        return [whole]
    if redact is not None:
        whole = redact(whole)
        if len(whole) <= max_chars:
            return [whole]
        if user:  # the question that heads the pieces, as redacted
            user = whole.removeprefix("User: ").split("\nAssistant: ", 1)[0]
    head = _head(user)
    pieces = split_text(whole, max_chars - len(head))
    return [pieces[0], *(head + p for p in pieces[1:])]


def _piece_count(user: str, reply: str, max_chars: int) -> int:
    """How many pieces `_chunk_exchange` cuts an exchange into before any redaction, without
    copying one: a flush counts every exchange, and cuts none it sends whole."""
    whole = _exchange_text(user, reply)
    if len(whole) <= max_chars:
        return 1
    return sum(1 for _ in _spans(whole.strip(), max_chars - len(_head(user))))


def _head(user: str) -> str:
    """The line heading every piece of a long exchange after its first: its question."""
    if not user:
        return ""
    # Only as much of the question as the head needs, its words joined by single spaces:
    # a start's words are the whole's (the last maybe cut short), so they begin the same.
    # Splitting the whole of a pasted log into words took half a second.
    size = 4 * HEAD_CHARS
    while True:
        question = " ".join(user[:size].split())
        if len(question) > HEAD_CHARS or size >= len(user):
            break
        size *= 4
    if len(question) > HEAD_CHARS:
        question = question[: HEAD_CHARS - 1].rstrip() + "…"
    return f"{PIECE_HEAD}{question})\n"


#: Where a piece may end, coarsest level first; within a level the latest stop wins. Chinese
#: and Japanese end a sentence with `。` `！` `？` and no space: without them a long reply in
#: either was cut mid-word (部|署).
_BOUNDARIES = (("\n\n",), ("\n",), (". ", "\u3002", "\uff01", "\uff1f"), (" ",))


def split_text(text: str, limit: int) -> list[str]:
    """Cut text into pieces of at most `limit` characters at the coarsest boundary that
    fits (paragraph, line, sentence, word; a hard cut as the last resort)."""
    text = text.strip()
    return [text[start:stop] for start, stop in _spans(text, limit)]


def _spans(text: str, limit: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of each piece `split_text` cuts a stripped `text` into, copying none of
    it: a walk along the text, so a pasted log of megabytes costs time in proportion to its
    length (re-slicing the rest after every piece took 4 s for 7 MB, past a hook's budget).
    Each piece is stripped and starts past the whitespace the cut before it ended in."""
    limit = max(limit, 1)
    start, end = 0, len(text)
    while end - start > limit:
        stop = start + limit + 1  # the window: the piece's most, and one character to cut at
        cut = -1
        for level in _BOUNDARIES:
            found, boundary = max((text.rfind(stop_at, start, stop), stop_at)
                                  for stop_at in level)
            cut = found - start if found >= 0 else -1
            if cut > limit // 3:
                cut += len(boundary.rstrip()) if boundary.strip() else 0
                break
            cut = -1
        if cut <= 0:
            cut = limit
        piece_end = _strip_end(text, start, start + cut)
        if piece_end > start:
            yield start, piece_end
        start = _strip_start(text, start + cut, end)
    if start < end:
        yield start, end


def _strip_start(text: str, start: int, end: int) -> int:
    """The first index from `start` (before `end`) that is not whitespace, as `str.strip`
    reads it; `end` when there is none. Looked at a block at a time, each twice the one
    before: a run of spaces can be long, and a Python loop per character is slow."""
    size = 16
    while start < end:
        block = text[start : min(start + size, end)]
        stripped = block.lstrip()
        start += len(block) - len(stripped)
        if stripped:
            break
        size *= 2
    return start


def _strip_end(text: str, start: int, stop: int) -> int:
    """`stop` moved back past the whitespace before it, no further than `start`."""
    return start + len(text[start:stop].rstrip())
