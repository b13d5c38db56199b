"""Text that is not English, or not ASCII: a stdout that cannot encode it (the CLI, the hooks),
function words of other languages at the relevance bar, decomposed (NFD) input, and the
injection block's cut at a grapheme-cluster boundary. Real CLI and hook subprocesses, a real
service, real SQLite files."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_support import hook_env, hook_log, run_hook
from test_service_support import Service, start_service

CJK = "连接池的大小是 20，配置在 config/db.yaml"


def cli(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """`memory-mcp ARGS` on the db file `db`, its output as bytes (decoded by the test)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), **env)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args],
                          capture_output=True, env=environment, timeout=60)


@pytest.fixture
def cjk_db(tmp_path: Path) -> Path:
    db = tmp_path / "cli.db"
    assert cli(db, "store", CJK, "--project", "web").returncode == 0
    return db


# --- 1. a stdout that cannot encode the text ----------------------------------------------------

@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "ascii"])
@pytest.mark.parametrize("args", [("recall", "连接池", "--project", "web", "--block", "800"),
                                  ("recall", "连接池", "--json"),
                                  ("list",),
                                  ("list", "--json")])
def test_the_cli_writes_utf8_to_a_pipe_its_encoding_cannot_fill(
        cjk_db: Path, encoding: str, args: tuple[str, ...]) -> None:
    """A Windows redirect (cp1252), PYTHONIOENCODING=latin-1: the answer comes out whole, as
    UTF-8, where a 38-line UnicodeEncodeError traceback came out before."""
    done = cli(cjk_db, *args, PYTHONIOENCODING=encoding, COLUMNS="200")
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    out = done.stdout.decode("utf-8")
    assert ("连接池" in out) and (CJK in out or args[0] == "list" and "--json" not in args)


def test_the_cli_writes_an_ellipsis_to_a_latin1_pipe(tmp_path: Path) -> None:
    """Even "…" alone (a cut item) failed on latin-1."""
    db = tmp_path / "cli.db"
    assert cli(db, "store", "Deploys wait for the smoke tests… then go out").returncode == 0
    done = cli(db, "list", PYTHONIOENCODING="latin-1", COLUMNS="200")
    assert done.returncode == 0 and "tests… then" in done.stdout.decode("utf-8")


def test_the_cli_shows_question_marks_on_a_terminal_that_cannot_show_the_text(
        cjk_db: Path) -> None:
    """A terminal displays its own encoding: UTF-8 bytes there would be garbage, so what it
    cannot show is written "?" and the rest as it is."""
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(cjk_db), PYTHONIOENCODING="latin-1")
    proc = subprocess.Popen([sys.executable, "-m", "semantic_memory", "recall", "连接池",
                             "--block", "800"], stdout=follower, stderr=subprocess.PIPE,
                            env=environment)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.wait(60) == 0 and b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    assert "??????? 20???? config/db.yaml" in shown.decode("latin-1")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_service(tmp_path_factory.mktemp("svc"))
    yield service
    service.stop()


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1"])
def test_a_hook_delivers_a_cjk_block_whatever_stdout_encodes(
        service: Service, tmp_path: Path, encoding: str) -> None:
    """The Claude Code hook logged `injected` and printed nothing: every non-Latin injection
    was lost on a cp1252 stdout. Its answer is UTF-8 JSON, as the harness reads it."""
    project = tmp_path / "shop"
    project.mkdir()
    with service.client() as http:
        assert http.post("/ingest", json={"content": CJK, "project": "shop"}).status_code == 200
    run = run_hook("claude-code", "UserPromptSubmit",
                   {"session_id": encoding, "prompt": "连接池的大小是多少", "cwd": str(project)},
                   hook_env(tmp_path, service.url, PYTHONIOENCODING=encoding))
    assert run.returncode == 0
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "injected" and "warning" not in entry, entry
    assert CJK in run.json()["hookSpecificOutput"]["additionalContext"]


# --- 2. other languages' function words at the relevance bar ------------------------------------

#: (language, memory, a natural question it answers, a question it does not answer)
QUESTIONS = [
    ("de", "Der Staging-Server wird mit systemctl restart api-staging neu gestartet",
     "Wie starten wir den Staging-Server neu?", "Wie ändern wir die Farbe des Logos?"),
    ("fr", "Le serveur de staging se redémarre avec systemctl restart api-staging",
     "Comment est-ce qu'on redémarre le serveur de staging ?",
     "Comment est-ce qu'on change la couleur du logo ?"),
    ("ru", "Сервер staging перезапускается командой systemctl restart api-staging",
     "Как перезапустить сервер staging?", "Как поменять цвет логотипа?"),
    ("es", "El servidor de staging se reinicia con systemctl restart api-staging",
     "¿Cómo se reinicia el servidor de staging?", "¿Cómo se cambia el color del logo?"),
    ("pt", "O servidor de staging é reiniciado com systemctl restart api-staging",
     "Como é que o servidor de staging é reiniciado?", "Como é que a cor do logo é mudada?"),
    ("it", "Il server di staging si riavvia con systemctl restart api-staging",
     "Come si riavvia il server di staging?", "Come si cambia il colore del logo?"),
    ("en", "The staging server is restarted with systemctl restart api-staging",
     "How do we restart the staging server?", "How do we change the logo colour?"),
]


def recall(service: Service, query: str, project: str, relevant_only: bool) -> list[dict]:
    with service.client() as http:
        answer = http.post("/recall", json={"query": query, "project": project, "k": 3,
                                            "with_global": False,
                                            "relevant_only": relevant_only})
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]


@pytest.fixture(scope="module")
def translated(service: Service) -> Service:
    """The service holding each language's memory in its own project: as in a real store,
    the words they share (staging, systemctl, restart) are common, so weigh little."""
    with service.client() as http:
        for lang, memory, _, _ in QUESTIONS:
            assert http.post("/ingest", json={"content": memory, "project": f"bar-{lang}"}
                             ).status_code == 200
    return service


@pytest.mark.parametrize(("lang", "memory", "question", "unrelated"), QUESTIONS,
                         ids=[q[0] for q in QUESTIONS])
def test_a_natural_question_clears_the_bar_in_its_own_language(
        translated: Service, lang: str, memory: str, question: str, unrelated: str) -> None:
    """"Wie starten wir den Staging-Server neu?" was recalled but not injected: its function
    words, which no memory holds, weighed most of all. They are set aside now, and the bar
    still refuses a question the memory does not answer."""
    service, project = translated, f"bar-{lang}"
    assert recall(service, question, project, relevant_only=False)
    assert [i["content"] for i in recall(service, question, project, True)] == [memory]
    assert recall(service, unrelated, project, relevant_only=True) == []


def test_an_english_word_is_set_aside_only_in_a_query_of_that_language() -> None:
    """"die", "den", "comment", "con" are English words too: an English query keeps them."""
    from semantic_memory.keywords import content_words, words

    assert content_words(words("why does the worker die on the den host?")) == [
        "worker", "die", "den", "host"]
    assert content_words(words("Add a comment about the con of retries")) == [
        "add", "comment", "con", "retries"]
    assert content_words(words("C plus Rust: requests per host on the nas, ha proxy at 9am est")
                         ) == ["c", "plus", "rust", "requests", "per", "host", "nas", "ha",
                               "proxy", "9am", "est"]
    assert content_words(words("Wie starten wir die Pipeline neu?")) == [
        "starten", "pipeline", "neu"]
    assert content_words(words("Comment est-ce qu'on lance les tests ?")) == ["lance", "tests"]
    # one function word of its own beside two that are English words too
    assert content_words(words("Où est la configuration des tests ?")) == [
        "configuration", "tests"]
    assert content_words(words("the son of the car in la")) == ["son", "car", "la"]


# --- 3. decomposed (NFD) text -------------------------------------------------------------------

#: (language, memory, a query of its words)
DECOMPOSED = [
    ("de", "Die Größe der Änderungsübersicht ist begrenzt", "Größe Änderungsübersicht"),
    ("vi", "Tài liệu tiếng Việt nằm trong thư mục docs/vi", "tiếng Việt"),
    ("ko", "배포 스크립트 경로는 deploy/run.sh 이다", "배포 스크립트 경로"),
    ("ja", "データベースのバックアップはジョブで行う", "データベース"),
]


@pytest.fixture(scope="module")
def core_channels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service with the keyword channels that ship with core (no bigram channel, which
    composes CJK text itself)."""
    service = start_service(tmp_path_factory.mktemp("core"),
                            MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    yield service
    service.stop()


def test_words_composes_what_it_is_given() -> None:
    from semantic_memory.keywords import trigram_terms, words

    assert words(unicodedata.normalize("NFD", "Die Größe, tiếng Việt")) == [
        "die", "größe", "tiếng", "việt"]
    assert trigram_terms(unicodedata.normalize("NFD", "배포 스크립트")) == ["스크립", "크립트"]


@pytest.mark.parametrize(("lang", "memory", "query"), DECOMPOSED, ids=[d[0] for d in DECOMPOSED])
def test_a_decomposed_query_finds_and_injects_what_its_composed_form_does(
        core_channels: Service, lang: str, memory: str, query: str) -> None:
    """"Größe" typed as o + U+0308 was cut in two: found, but not injected (German,
    Vietnamese), or not found at all (Korean, Japanese kana with a voicing mark)."""
    project = f"nfd-{lang}"
    with core_channels.client() as http:
        assert http.post("/ingest", json={"content": memory, "project": project}
                         ).status_code == 200
    decomposed = unicodedata.normalize("NFD", query)
    assert decomposed != query
    assert [i["content"] for i in recall(core_channels, decomposed, project, True)] == [memory]


@pytest.mark.parametrize(("lang", "memory", "query"), DECOMPOSED[:2], ids=["de", "vi"])
def test_a_decomposed_latin_memory_is_found_and_injected_by_either_form(
        core_channels: Service, lang: str, memory: str, query: str) -> None:
    """The index folds accents (unicode61 remove_diacritics 2) whether they come composed or
    as combining marks: an NFD memory matches an NFC query and an NFD one."""
    project = f"nfd-memory-{lang}"
    stored = unicodedata.normalize("NFD", memory)
    with core_channels.client() as http:
        assert http.post("/ingest", json={"content": stored, "project": project}
                         ).status_code == 200
    for form in ("NFC", "NFD"):
        found = recall(core_channels, unicodedata.normalize(form, query), project, True)
        assert [i["content"] for i in found] == [stored], form


# --- 4. the block's cut at a grapheme-cluster boundary ------------------------------------------

#: (project, memory): text whose characters, as a reader sees them, are several code points.
CLUSTERS = [
    ("cut-flags", "flagtest " + "🇯🇵🇰🇷🇩🇪🇫🇷" * 60),
    ("cut-vietnamese", "combtest " + unicodedata.normalize("NFD", "Tiếng Việt ") * 60),
    ("cut-hangul", "hangultest " + unicodedata.normalize("NFD", "배포 스크립트 경로는 ") * 60),
    ("cut-skin-tones", "tonetest " + "👍🏽👋🏿 " * 100),
    ("cut-devanagari", "hinditest " + "नमस्ते दुनिया " * 40),
]


def split_cluster(text: str, at: int) -> str | None:
    """Why a cut of `text` at `at` splits what a reader sees as one character, else None."""
    if at >= len(text) or text[at].isspace():
        return None
    before, after = text[at - 1], text[at]
    if unicodedata.category(after)[0] == "M" or "\U0001f3fb" <= after <= "\U0001f3ff":
        return f"ends before the mark or modifier {after!r}"
    if "\u1160" <= after <= "\u11ff" or "\u1100" <= before <= "\u115f":
        return f"splits a Hangul syllable ({before!r}, {after!r})"
    if unicodedata.combining(before) == 9:
        return "ends on a virama, half a conjunct"
    flags = len(text[:at]) - len(text[:at].rstrip(
        "".join(chr(c) for c in range(0x1F1E6, 0x1F200))))
    if flags % 2:
        return "ends on a flag's first letter"
    return None


@pytest.mark.parametrize(("project", "memory"), CLUSTERS, ids=[c[0] for c in CLUSTERS])
def test_the_budget_cut_keeps_whole_characters(service: Service, project: str,
                                               memory: str) -> None:
    """NFD 경 was cut to 겨…, Việt to Viẹ…, a flag pair to a lone 🇰…: the block and the items
    are cut where a character as a reader sees it ends, within the budget still."""
    with service.client() as http:
        assert http.post("/ingest", json={"content": memory, "project": project}
                         ).status_code == 200
        for budget in range(330, 420):
            answer = http.post("/recall", json={"query": memory.split()[0], "project": project,
                                                "with_global": False, "budget_chars": budget}
                               ).json()
            block, item = answer["block"], answer["items"][0]["content"]
            assert len(block) <= budget and len(item) <= budget
            shown = block.split('">\n', 1)[1].split("\n</memory>", 1)[0]
            for cut in (shown, item):
                assert cut.endswith("…") and memory.startswith(cut[:-1]), (budget, cut)
                assert split_cluster(memory, len(cut) - 1) is None, (
                    budget, split_cluster(memory, len(cut) - 1), cut[-4:])


def test_a_cut_keeps_zwj_sequences_keycaps_and_variation_selectors_whole() -> None:
    """What the block's sanitizing drops (joiners, variation selectors) is kept whole by the cut
    itself too: `cluster_start` is the cut of every budget (block, items)."""
    from semantic_memory.graphemes import cluster_start

    for text in ("👨\u200d👩\u200d👧\u200d👦", "❤\ufe0f", "1\ufe0f\u20e3", "🏴\U000e0067\U000e0062"
                 "\U000e0065\U000e006e\U000e0067\U000e007f", unicodedata.normalize("NFD", "각")):
        for end in range(1, len(text)):
            assert cluster_start(text + " x", end) == 0, (text, end)
        assert cluster_start(text + " x", len(text)) == len(text)
