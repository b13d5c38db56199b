"""A store URL's secrets never shown: `redact_url` (stats, /health, the start-up log) and
`scrub_secrets` (a driver's error message) mask the password and every `*password*` parameter
(`sslpassword`: a client key's passphrase)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pg
from test_service_support import memory_mcp_command, service_env

from semantic_memory.stores import redact_url, scrub_secrets


def cli(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], capture_output=True, text=True,
                          env=service_env(tmp_path, MEMORY_DB_URL=url), timeout=60)


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


def test_cannot_connect_hides_the_passphrase(tmp_path: Path) -> None:
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
