"""A store URL's secrets never shown: `redact_url` (stats, /health, the start-up log) and
`scrub_secrets` (a driver's error message) mask the password and every `*password*` parameter
(`sslpassword`: a client key's passphrase), and mask them only where the driver quotes them, so
that a short password is never given away by the words it was cut out of."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pg
from test_service_support import memory_mcp_command, service_env

from semantic_memory.stores import redact_url, scrub_secrets

REFUSED = ('connection failed: connection to server at "127.0.0.1", port 1 failed: Connection '
           "refused Is the server running on that host and accepting TCP/IP connections?")


def cli(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], capture_output=True, text=True,
                          env=service_env(tmp_path, MEMORY_DB_URL=url), timeout=60)


def test_a_short_password_is_not_cut_out_of_words() -> None:
    """`on` was masked in `connection`, `running` and `on`: `c***necti*** failed`."""
    for password in ("on", "TCP", "IP", "host", "to"):
        url = f"postgresql://app:{password}@127.0.0.1:1/db"
        assert scrub_secrets(REFUSED, url) == REFUSED, password


def test_a_password_is_masked_where_the_driver_quotes_it() -> None:
    assert scrub_secrets('token: "Pa%Zss9", host Yss9@h', "postgresql://u:Pa%Zss9@h/d") \
        == 'token: "***", host Yss9@h'
    assert scrub_secrets("host 'Yss9@h'", "postgresql://u:Pa@Yss9@h/d") == "host '***@h'"
    assert scrub_secrets('spaces found in "Pa Vss9", use', "postgresql://u:Pa Vss9@h/d") \
        == 'spaces found in "***", use'
    assert scrub_secrets("p=a b", "postgresql://h/d?password=a%20b") == "p=***"
    # the URL as the driver rewrote it (scheme), and the password percent-decoded
    assert scrub_secrets('bad postgresql://u:S3%23t%40x@h/d, "S3#t@x"',
                         "postgres://u:S3%23t%40x@h/d") == 'bad postgresql://u:***@h/d, "***"'


def test_every_password_parameter_is_masked() -> None:
    url = "postgresql://app@127.0.0.1:1/svc?sslmode=disable&sslpassword=KeyPassphrase99"
    assert redact_url(url) == "postgresql://app@127.0.0.1:1/svc?sslmode=disable&sslpassword=***"
    assert redact_url("postgresql://h/d?SSL%50assword=x&passfile=/p&password=") \
        == "postgresql://h/d?SSL%50assword=***&passfile=/p&password=***"
    assert scrub_secrets(f"bad {url}", url).endswith("sslpassword=***")
    assert scrub_secrets('invalid percent-encoded token: "Key%ZZ"',
                         "postgresql://h/d?sslpassword=Key%ZZ") \
        == 'invalid percent-encoded token: "***"'
    # libpq's key=value form, whatever the URL
    assert scrub_secrets("host=h sslpassword='a b' password=pw port=5", "postgresql://h/d") \
        == "host=h sslpassword=*** password=*** port=5"


def test_cannot_connect_keeps_the_words_and_hides_the_passphrase(tmp_path: Path) -> None:
    short = cli(tmp_path, "postgresql://app:on@127.0.0.1:1/db?connect_timeout=1", "stats")
    assert short.returncode == 1
    assert "connection to server" in short.stderr and "running on that host" in short.stderr
    assert "***" in short.stderr and "app:on@" not in short.stderr  # the URL's own mask only
    url = "postgresql://app@127.0.0.1:1/svc?sslmode=disable&sslpassword=KeyPassphrase99"
    refused = cli(tmp_path, url, "stats")
    assert refused.returncode == 1 and "sslpassword=***" in refused.stderr
    assert "KeyPassphrase99" not in refused.stderr + refused.stdout


def test_stats_of_a_live_store_hides_the_passphrase(tmp_path: Path) -> None:
    url = pg.new_database() + "&sslmode=disable&sslpassword=KeyPassphrase99"
    for args in (["stats"], ["stats", "--json"]):
        done = cli(tmp_path, url, *args)
        assert done.returncode == 0, done.stderr
        assert "KeyPassphrase99" not in done.stdout + done.stderr
    assert json.loads(done.stdout)["db_path"].endswith("sslpassword=***")
