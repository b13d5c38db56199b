"""MEMORY_INJECT_MIN_COSINE: the vector channel's bar for injecting, apart from its recall floor.

With MiniLM the recall floor (0.25) is where unrelated texts land, so memories of another subject
near it were injected into prompts they do not answer (bench/relevance.py: docs/benchmarks.md).
The real CLI, a real SQLite file, the real MiniLM model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Two memories that share no word with the prompt, at a MiniLM cosine of about 0.27 and 0.35
#: from it: above the recall floor (0.25), below an injection floor of 0.45.
NEAR = ["Database backups run nightly at 3am to the offsite bucket",
        "The RabbitMQ queue backs up overnight while the import cron runs"]
PROMPT = "The Kafka consumer group for shipment events shows growing lag every night"


def cli(db: Path, model: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), MEMORY_MODEL_PATH=str(model),
                       MEMORY_DEVICE="cpu", **env)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=environment, timeout=120)


def test_the_injection_floor_withholds_near_misses_and_leaves_recall_alone(
        tmp_path: Path, minilm_path: Path) -> None:
    db = tmp_path / "m.db"
    for content in NEAR:
        assert cli(db, minilm_path, "store", content).returncode == 0
    recalled = {}
    for floor in ("-1", "0.45"):
        found = cli(db, minilm_path, "recall", PROMPT, "--json", MEMORY_INJECT_MIN_COSINE=floor)
        assert found.returncode == 0, found.stderr
        recalled[floor] = [h["content"] for h in json.loads(found.stdout)]
    assert sorted(recalled["-1"]) == sorted(NEAR)  # both clear the recall floor
    assert recalled["0.45"] == recalled["-1"]  # recall is the same either way

    at_recall_floor = cli(db, minilm_path, "recall", PROMPT, "--block", "2000",
                          MEMORY_INJECT_MIN_COSINE="0.25")
    assert all(content in at_recall_floor.stdout for content in NEAR), at_recall_floor.stderr
    # unset, the floor is MiniLM's own (0.35, the llama-cpp plugin's INJECT_FLOORS)
    by_default = cli(db, minilm_path, "recall", PROMPT, "--block", "2000")
    at_model_floor = cli(db, minilm_path, "recall", PROMPT, "--block", "2000",
                         MEMORY_INJECT_MIN_COSINE="0.35")
    assert by_default.stdout == at_model_floor.stdout != at_recall_floor.stdout
    withheld = cli(db, minilm_path, "recall", PROMPT, "--block", "2000",
                   MEMORY_INJECT_MIN_COSINE="0.45")
    assert withheld.returncode == 0 and withheld.stdout == ""
    assert "Nothing clears the relevance bar" in withheld.stderr
    on_topic = cli(db, minilm_path, "recall", "when do the database backups run?", "--block",
                   "2000", MEMORY_INJECT_MIN_COSINE="0.45")
    assert NEAR[0] in on_topic.stdout, on_topic.stderr


def test_an_injection_floor_out_of_range_is_a_one_line_error(tmp_path: Path,
                                                               minilm_path: Path) -> None:
    done = cli(tmp_path / "m.db", minilm_path, "stats", MEMORY_INJECT_MIN_COSINE="1.5")
    assert (done.returncode, done.stderr) == (
        2, "Error: MEMORY_INJECT_MIN_COSINE must be within 0..1 (or -1), not 1.5\n")
