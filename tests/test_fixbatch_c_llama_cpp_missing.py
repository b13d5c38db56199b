"""The llama.cpp embedder plugin installed without llama-cpp-python: one line that names the
missing module and the install command, not a GPU fallback that then fails on the CPU too."""

from __future__ import annotations

import time
from pathlib import Path

from test_service_support import start_service

#: Put first on PYTHONPATH: `llama_cpp` (and its submodules) cannot be imported, as where
#: llama-cpp-python was left out; everything else imports as usual.
SHIM = '''
import sys


class _NoLlamaCpp:
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoLlamaCpp())
'''


def _wait_for(path: Path, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = path.read_text(errors="replace")
        if text in log:
            return log
        time.sleep(0.1)
    return path.read_text(errors="replace")


def test_a_missing_llama_cpp_is_named_with_its_install_command(tmp_path: Path,
                                                               minilm_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    # MEMORY_DEVICE=cuda, the default: the GPU attempt was what reported the missing module
    service = start_service(tmp_path / "svc", MEMORY_MODEL_PATH=str(minilm_path),
                            MEMORY_DEVICE="cuda", PYTHONPATH=str(shim))
    try:
        # the warm-up recall loads the model
        log = _wait_for(tmp_path / "svc" / "stderr.log", "embedder:")
        with service.client() as client:
            health = client.get("/health").json()
    finally:
        service.stop()
    lines = [line for line in log.splitlines() if "embedder:" in line]
    assert len(lines) == 1, log
    assert "No module named 'llama_cpp'" in lines[0], lines[0]
    assert "pip install llama-cpp-python" in lines[0], lines[0]
    assert "GPU" not in log and "rebuilding on CPU" not in log, log
    assert "Traceback" not in log, log
    embedder = health["embedder"]
    assert embedder["mode"] == "bm25-only", embedder
    assert "pip install llama-cpp-python" in embedder["reason"], embedder
