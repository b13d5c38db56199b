"""The llama.cpp embedder: real GGUF models built offline (tests/models.py), prompts, pooling,
EOS, dimension and MRL, refusals of crash-prone configurations, and the device policy."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402
from semantic_memory_llama_cpp import (  # noqa: E402
    ConfigRefused, EmbedderUnavailable, LlamaCppEmbedder, from_settings, model_prompts,
)


@pytest.fixture(scope="session")
def minilm(minilm_path: Path) -> LlamaCppEmbedder:
    return LlamaCppEmbedder(str(minilm_path), device="cpu")


@pytest.fixture(scope="session")
def qwen3(qwen3_path: Path) -> LlamaCppEmbedder:
    return LlamaCppEmbedder(str(qwen3_path), device="cpu", n_ctx=256)


# --- MiniLM: a real BERT embedding model ---------------------------------------------------------

def test_minilm_metadata_and_lazy_load(minilm_path: Path) -> None:
    emb = LlamaCppEmbedder(str(minilm_path), device="cpu")
    info = emb.info()
    assert info["architecture"] == "bert" and info["pooling"] == "mean" and info["dim"] == 384
    assert info["loaded"] is False and emb.device is None  # nothing loads before the first embed
    assert emb.prompts.query == "" and emb.prompts.document == ""  # bert: none unless configured
    assert emb.n_ctx == 512  # capped at the trained context
    emb.embed_query("hello")
    assert emb.info()["loaded"] is True and emb.device == "cpu"


def test_minilm_semantics_and_normalisation(minilm: LlamaCppEmbedder) -> None:
    docs = minilm.embed_documents([
        "Remember to rotate the database credentials every ninety days.",
        "My grandmother's apple pie recipe uses cinnamon and nutmeg.",
    ])
    query = minilm.embed_query("How often should the DB passwords be changed?")
    assert docs.dtype == np.float32 and docs.shape == (2, 384) and query.shape == (384,)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-5)
    paraphrase, unrelated = docs @ query
    assert paraphrase > 0.4 and unrelated < 0.2 and paraphrase > unrelated + 0.3


def test_batches_match_single_calls(minilm: LlamaCppEmbedder) -> None:
    texts = [f"note {i}: the build uses cache layer {i}" for i in range(5)] + ["x" * 3000]
    together = minilm.embed_documents(texts)
    alone = np.stack([minilm.embed_documents([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-4)  # sub-batching changes nothing
    assert together.shape == (6, 384)  # an over-long text is truncated, not an error


def test_a_query_goes_before_the_rest_of_a_document_batch(minilm_path: Path) -> None:
    """A recall's query waits for one text of a batch under way, not for the batch (the
    embedding queue's 32 memories of ~1.5 KB held every recall up for ~10 s on one thread);
    the batch's vectors are the same as without the queries in between."""
    emb = LlamaCppEmbedder(str(minilm_path), device="cpu", threads=1)
    texts = [f"Tool output {i}: pytest collected 412 items; test_login failed with KeyError "
             "'token' in auth/session.py, fixed by refreshing the session first. " * 10
             for i in range(8)]
    started = time.perf_counter()
    alone = emb.embed_documents(texts)
    batch_s = time.perf_counter() - started
    together: list[np.ndarray] = []
    batch = threading.Thread(target=lambda: together.append(emb.embed_documents(texts)))
    batch.start()
    waits = []
    for query in ("how was the login test fixed?", "which file raised the KeyError?"):
        time.sleep(batch_s / 5)  # the batch is under way
        started = time.perf_counter()
        emb.embed_query(query)
        waits.append(time.perf_counter() - started)
    batch.join()
    assert batch_s > 0 and max(waits) < batch_s / 3, (waits, batch_s)
    assert np.allclose(together[0], alone, atol=1e-5)


def test_zero_vector_guard(minilm: LlamaCppEmbedder) -> None:
    rows = minilm._finish(np.zeros((2, 4), dtype=np.float32))
    assert np.all(np.isfinite(rows)) and not rows.any()


# --- tiny qwen3: LAST pooling, Instruct prefix, EOS, dimension, MRL ------------------------------

def test_qwen3_defaults(qwen3: LlamaCppEmbedder) -> None:
    info = qwen3.info()
    assert info["architecture"] == "qwen3" and info["pooling"] == "last" and info["dim"] == 64
    assert qwen3.prompts.query.startswith("Instruct: Given a web search query")
    assert qwen3.prompts.query.endswith("\nQuery: ") and qwen3.prompts.document == ""
    vec = qwen3.embed_query("where is the config file?")
    assert vec.shape == (64,) and np.isclose(np.linalg.norm(vec), 1.0, atol=1e-5)


def test_qwen3_eos_is_last_token_even_when_truncated(qwen3: LlamaCppEmbedder) -> None:
    qwen3.load()
    eos = qwen3._llm.token_eos()
    assert eos == 151643
    assert qwen3._tokens("hello world")[-1] == eos
    long = qwen3._tokens("word " * 1000)
    assert len(long) == qwen3.n_ctx == 256 and long[-1] == eos
    assert long.count(eos) == 1


def test_qwen3_query_prefix_changes_the_vector(qwen3: LlamaCppEmbedder) -> None:
    query = qwen3.embed_query("deploy")
    doc = qwen3.embed_documents(["deploy"])[0]
    assert not np.allclose(query, doc, atol=1e-4)
    raw = qwen3._finish(qwen3._run([qwen3.prompts.query + "deploy"]))[0]
    assert np.allclose(query, raw, atol=1e-5)


def test_qwen3_custom_instruct_and_overrides(qwen3_path: Path) -> None:
    emb = LlamaCppEmbedder(str(qwen3_path), device="cpu", instruct="Find the memory")
    assert emb.prompts.query == "Instruct: Find the memory\nQuery: "
    emb = LlamaCppEmbedder(str(qwen3_path), device="cpu", query_prefix="none",
                           doc_prefix="passage: ")
    assert emb.prompts.query == "" and emb.prompts.document == "passage: "


def test_qwen3_mrl_truncation(qwen3_path: Path, qwen3: LlamaCppEmbedder) -> None:
    small = LlamaCppEmbedder(str(qwen3_path), device="cpu", n_ctx=256, dim=32)
    assert small.dim == 32 and small.model_id == qwen3.model_id
    cut = small.embed_documents(["matryoshka dolls nest"])[0]
    full = qwen3.embed_documents(["matryoshka dolls nest"])[0]
    assert cut.shape == (32,) and np.isclose(np.linalg.norm(cut), 1.0, atol=1e-5)
    expected = full[:32] / np.linalg.norm(full[:32])
    assert np.allclose(cut, expected, atol=1e-4)


# --- refusals and BM25-only reasons -------------------------------------------------------------

def test_unsafe_or_unusable_configurations_are_refused(minilm_path: Path,
                                                       qwen3_path: Path) -> None:
    emb = LlamaCppEmbedder(str(minilm_path), device="cpu", n_ubatch=64)
    assert not emb.available and "n_ubatch" in emb.error and "abort" in emb.error
    with pytest.raises(EmbedderUnavailable, match="n_ubatch"):
        emb.embed_query("x")
    emb = LlamaCppEmbedder(str(minilm_path), device="cpu", pooling="none")
    assert not emb.available and "pooling" in emb.error
    emb = LlamaCppEmbedder(str(minilm_path), device="cpu", dim=128)
    assert not emb.available and "Matryoshka" in emb.error
    emb = LlamaCppEmbedder(str(qwen3_path), device="cpu", dim=999)
    assert not emb.available and "MEMORY_EMBED_DIM" in emb.error
    with pytest.raises(ConfigRefused):
        LlamaCppEmbedder(str(qwen3_path), device="cpu")._configure(
            type(emb.gguf)(emb.gguf.path, 3, {**emb.gguf.metadata, "qwen3.pooling_type": 0}))


def test_missing_and_corrupt_models_report_why(tmp_path: Path) -> None:
    emb = LlamaCppEmbedder("", device="cpu")
    assert not emb.available and "MEMORY_MODEL_PATH" in emb.error
    emb = LlamaCppEmbedder(str(tmp_path / "nope.gguf"), device="cpu")
    assert not emb.available and "cannot read model" in emb.error
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    emb = LlamaCppEmbedder(str(bad), device="cpu")
    assert not emb.available and "GGUF" in emb.error


def test_load_failure_is_reported_not_raised_twice(tmp_path: Path, minilm_path: Path) -> None:
    def broken_factory(**kwargs):  # noqa: ANN003, ANN202
        raise ValueError("Failed to load model from file")

    emb = LlamaCppEmbedder(str(minilm_path), device="cpu", llama_factory=broken_factory)
    with pytest.raises(EmbedderUnavailable, match="failed to load"):
        emb.embed_query("x")
    assert not emb.available and "failed to load" in emb.info()["reason"]


def test_settings_reach_the_embedder(minilm_path: Path) -> None:
    env = {"MEMORY_MODEL_PATH": str(minilm_path), "MEMORY_DEVICE": "cpu",
           "MEMORY_EMBED_QUERY_PREFIX": "query: ", "MEMORY_EMBED_DOC_PREFIX": "passage: ",
           "MEMORY_EMBED_N_CTX": "128", "MEMORY_EMBED_BATCH": "4"}
    emb = from_settings(Settings.from_env(env))
    assert emb.prompts.query == "query: " and emb.prompts.document == "passage: "
    assert emb.n_ctx == 128 and emb.batch == 4 and emb.requested_device == "cpu"


def test_prompts_by_architecture() -> None:
    gemma = model_prompts("gemma-embedding")
    assert gemma.query == "task: search result | query: "
    assert gemma.document == "title: none | text: "
    assert model_prompts("bert").query == "" and model_prompts("bert").document == ""
    assert model_prompts("qwen3", "Custom task").query == "Instruct: Custom task\nQuery: "


# --- device policy, with what the probe sees injected --------------------------------------------

class FakeLlama:
    """Stands in for llama_cpp.Llama: records how it was built, embeds deterministically."""

    def __init__(self, log: list, fail_embed: bool = False, **kwargs) -> None:  # noqa: ANN003
        self.gpu = kwargs["n_gpu_layers"] != 0
        self.fail_embed = fail_embed
        self.kwargs = kwargs
        log.append(("build", "gpu" if self.gpu else "cpu"))
        self.log = log
        self.closed = False

    def embed(self, texts):  # noqa: ANN001, ANN201
        self.log.append(("embed", "gpu" if self.gpu else "cpu"))
        if self.fail_embed:
            raise RuntimeError("CUDA error: out of memory")
        return [[float(len(t)), 1.0, 0.0] for t in texts]

    def token_eos(self) -> int:
        return 2

    def close(self) -> None:
        self.closed = True


def policy_embedder(minilm_path: Path, *, device: str = "cuda", supports: bool = True,
                    pids=None, gpu_fails_build=False, gpu_fails_embed=False,  # noqa: ANN001
                    gpu_fails_later=False):  # noqa: ANN001, ANN201
    log: list = []
    state = {"gpu_embeds": 0}

    def factory(**kwargs):  # noqa: ANN003, ANN202
        if kwargs["n_gpu_layers"] != 0 and gpu_fails_build:
            log.append(("build", "gpu-failed"))
            raise RuntimeError("ggml_cuda_init: no CUDA devices")
        llama = FakeLlama(log, **kwargs)
        if llama.gpu and gpu_fails_embed:
            llama.fail_embed = True
        if llama.gpu and gpu_fails_later:
            original = llama.embed

            def flaky(texts):  # noqa: ANN001, ANN202
                state["gpu_embeds"] += 1
                if state["gpu_embeds"] > 2:  # probe and first embed pass, a later one fails
                    log.append(("embed", "gpu-oom"))
                    raise RuntimeError("CUDA error: out of memory")
                return original(texts)

            llama.embed = flaky
        return llama

    def nvidia_smi() -> set[int]:
        log.append(("nvidia-smi", None))
        if pids is None:
            raise RuntimeError("nvidia-smi not found")
        return pids

    emb = LlamaCppEmbedder(str(minilm_path), device=device, llama_factory=factory,
                           gpu_pids=nvidia_smi, supports_gpu=lambda: supports)
    return emb, log


def test_policy_gpu_verified_by_nvidia_smi(minilm_path: Path) -> None:
    emb, log = policy_embedder(minilm_path, pids={os.getpid(), 1})
    emb.embed_query("x")
    assert emb.device == "cuda" and emb.fallback_reason is None
    assert log[:3] == [("build", "gpu"), ("embed", "gpu"), ("nvidia-smi", None)]
    assert emb.info()["device"] == "cuda"


def test_policy_silent_cpu_run_detected_by_pid_check(minilm_path: Path, caplog) -> None:  # noqa: ANN001
    emb, log = policy_embedder(minilm_path, pids={1, 2})
    with caplog.at_level("WARNING", logger="semantic_memory.llama_cpp"):
        emb.embed_query("x")
    assert emb.device == "cpu" and "nvidia-smi does not list this process" in emb.fallback_reason
    assert [e for e in log if e[0] == "build"] == [("build", "gpu"), ("build", "cpu")]
    assert any("rebuilding on CPU" in r.message for r in caplog.records)
    assert emb.info()["device_fallback"] == emb.fallback_reason


def test_policy_each_failing_step_falls_back(minilm_path: Path) -> None:
    emb, log = policy_embedder(minilm_path, supports=False)
    emb.embed_query("x")
    assert emb.device == "cpu" and "no GPU offload" in emb.fallback_reason
    assert log[0] == ("build", "cpu")  # no GPU build attempted
    emb, log = policy_embedder(minilm_path, gpu_fails_build=True, pids={os.getpid()})
    emb.embed_query("x")
    assert emb.device == "cpu" and "no CUDA devices" in emb.fallback_reason
    emb, log = policy_embedder(minilm_path, gpu_fails_embed=True, pids={os.getpid()})
    emb.embed_query("x")
    assert emb.device == "cpu" and "out of memory" in emb.fallback_reason
    assert ("nvidia-smi", None) not in log  # the probe failed first
    emb, log = policy_embedder(minilm_path, pids=None)  # nvidia-smi missing
    emb.embed_query("x")
    assert emb.device == "cpu" and "nvidia-smi not found" in emb.fallback_reason


def test_policy_runtime_gpu_failure_rebuilds_on_cpu_and_retries_once(minilm_path: Path) -> None:
    emb, log = policy_embedder(minilm_path, gpu_fails_later=True, pids={os.getpid()})
    emb.embed_query("probe passes")
    assert emb.device == "cuda"
    vec = emb.embed_query("this one hits an OOM")
    assert vec.shape == (3,) and emb.device == "cpu"
    assert "runtime GPU failure" in emb.fallback_reason
    assert log[-3:] == [("embed", "gpu-oom"), ("build", "cpu"), ("embed", "cpu")]


def test_policy_cpu_requested_never_touches_the_gpu(minilm_path: Path) -> None:
    emb, log = policy_embedder(minilm_path, device="cpu", pids={os.getpid()})
    emb.embed_documents(["a", "b"])
    assert emb.device == "cpu" and emb.fallback_reason is None
    assert ("nvidia-smi", None) not in log and log[0] == ("build", "cpu")


@pytest.mark.skipif(llama_cpp.llama_supports_gpu_offload(),
                    reason="a CPU-only llama.cpp build is what this case is about")
def test_real_model_on_a_machine_without_gpu_falls_back(minilm_path: Path) -> None:
    emb = LlamaCppEmbedder(str(minilm_path))  # MEMORY_DEVICE default: cuda
    emb.embed_query("x")
    assert emb.device == "cpu" and emb.fallback_reason


def test_vector_settings_are_validated(tmp_path: Path) -> None:
    from semantic_memory.config import ConfigError
    from semantic_memory_llama_cpp import LlamaCppSettings

    env = {"MEMORY_FAST_PATH": "0", "MEMORY_EMBED_DIM": "256", "MEMORY_EMBED_INSTRUCT": "Find notes"}
    s = Settings.from_env(env)
    own = s.section(LlamaCppSettings)  # the plugin's section, from the same environment
    assert s.fast_path is False and own.embed_dim == 256 and own.embed_instruct == "Find notes"
    with pytest.raises(ConfigError, match="MEMORY_FAST_PATH_MIN"):
        Settings.from_env({"MEMORY_FAST_PATH_MIN": "1.5"})
    with pytest.raises(ConfigError, match="MEMORY_EMBED_BATCH must be within 1..4096, not 0"):
        LlamaCppSettings.from_env({"MEMORY_EMBED_BATCH": "0"})
    bad = Settings.from_env({"MEMORY_EMBED_N_CTX": "4", "MEMORY_DB_PATH": str(tmp_path / "m.db"),
                             "MEMORY_PLUGINS": "llama_cpp"})
    with pytest.raises(ConfigError, match="MEMORY_EMBED_N_CTX must be within 8..1048576, not 4"):
        MemoryEngine(bad)  # a plugin's bad setting stops the command, like a core one
    for name, value in (("MEMORY_EMBED_BATCH", "10" * 10), ("MEMORY_EMBED_THREADS", "99999"),
                        ("MEMORY_EMBED_DIM", "-1")):  # a mistake, not a size: refused too
        with pytest.raises(ConfigError, match=f"{name} must be within"):
            LlamaCppSettings.from_env({name: value})

def test_a_long_memory_is_embedded_in_bounded_memory(qwen3_path: Path) -> None:
    """One 80,000-character memory took 10.4 GB with a Qwen3-vocabulary model at the former
    default of 8192 tokens (llama.cpp computes a vocabulary-sized output row for every token of
    a pooled text) and the process kept it: at the default the growth stays a few times the
    model's own. Measured in a fresh process (ru_maxrss), as a ratio."""
    probe = (
        "import resource, sys\n"
        "from semantic_memory_llama_cpp import LlamaCppEmbedder\n"
        "emb = LlamaCppEmbedder(sys.argv[1], device='cpu', threads=1)\n"
        "emb.embed_documents(['the deploy script lives in ops/deploy.sh'])\n"
        "short = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "vector = emb.embed_documents(['deploy pipeline notes ' * 4000])\n"
        "long = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(emb.n_ctx, long / short, vector.shape[1])\n")
    done = subprocess.run([sys.executable, "-c", probe, str(qwen3_path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    n_ctx, growth, dim = done.stdout.split()
    assert int(n_ctx) == 1024 and int(dim) == 64
    assert float(growth) < 12, done.stdout  # 8192 tokens: ~35x; 1024: ~5x
