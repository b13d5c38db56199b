"""A GGUF embedding model run by llama.cpp (llama-cpp-python), with the spec's device policy.

Defaults follow Qwen3-Embedding-0.6B: pooling LAST, queries `Instruct: {task}\\nQuery: {text}`,
documents raw, n_ctx 1024, sub-batches of 32, float32 rows L2-normalised (1e-12 guard). Pooling
and prompts come from the GGUF itself (architecture, `<arch>.pooling_type`), so MiniLM (bert,
MEAN) or EmbeddingGemma (gemma-embedding, its `task: … | query:` prompts) work unchanged.

The model loads lazily on the first embed (callers wait on a lock; nothing is dropped). A query
waiting for the model goes before the rest of a document batch under way: the batch hands the
model over between two texts, so a recall waits for one text, not for a whole batch. Device
policy (`MEMORY_DEVICE=cuda`, the default): load with every layer offloaded → probe embed →
nvidia-smi must list this process → otherwise rebuild on CPU with a log line. A GPU failure at
run time rebuilds on CPU and retries once. `info()` reports the device really in use.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from semantic_memory.embedders import Embedder

from .gguf_meta import POOLING, POOLING_NAMES, GGUFError, GGUFInfo, read_gguf
from .settings import EMBED_N_CTX

if TYPE_CHECKING:  # numpy is imported where rows are made: ~0.1 s off every service start
    import numpy as np

log = logging.getLogger("semantic_memory.llama_cpp")

NORM_EPS = 1e-12
QWEN3_INSTRUCT = "Given a web search query, retrieve relevant passages that answer the query"

#: Architectures whose embeddings are trained with Matryoshka representation learning.
MRL_ARCHITECTURES = frozenset({"qwen3", "gemma-embedding"})
MIN_MRL_DIM = 32
#: The command that installs what this plugin runs models with (a dependency of the plugin, so
#: missing only where it was left out, e.g. `uv sync --no-install-package llama-cpp-python`).
INSTALL_LLAMA_CPP = "pip install llama-cpp-python"


class EmbedderUnavailable(RuntimeError):
    """The embedder cannot embed (no model configured, model failed to load, …)."""


class ConfigRefused(EmbedderUnavailable):
    """A llama.cpp configuration that could abort the process; refused before loading."""


class ModelRebuilt(Exception):
    """A query rebuilt the model on the CPU while a document batch let it in: embed the
    batch's part again, on the new one."""


@dataclass(frozen=True)
class Prompts:
    query: str = ""
    document: str = ""


def model_prompts(architecture: str, instruct: str = "") -> Prompts:
    """The prompts a model was trained with, chosen from its GGUF architecture."""
    if architecture == "qwen3":
        return Prompts(query=f"Instruct: {instruct or QWEN3_INSTRUCT}\nQuery: ")
    if architecture == "gemma-embedding":
        return Prompts(query="task: search result | query: ", document="title: none | text: ")
    if architecture == "nomic-bert":
        return Prompts(query="search_query: ", document="search_document: ")
    return Prompts()  # bert and anything unknown: none unless configured


#: Default fusion weight of the vector channel per architecture, measured on LoCoMo dev
#: (bench/bench_vector.py): a weak embedder (MiniLM, bert) must not drag BM25 down, a strong one
#: (EmbeddingGemma, Qwen3-Embedding) should lead. MEMORY_CHANNEL_WEIGHTS=vector=… overrides it.
FUSION_WEIGHTS = {"bert": 0.3, "nomic-bert": 0.5, "gemma-embedding": 20.0, "qwen3": 20.0}
DEFAULT_FUSION_WEIGHT = 0.5
#: Its default share of the weight under score fusion (MEMORY_FUSION=score), per architecture,
#: chosen on LoCoMo dev with leave-one-conversation-out, jointly with the trigram channel's
#: score weight (bench/bench_vector.py --shares --trigram, then `joint`): MiniLM (bert) speaks up
#: for a third, a strong embedder leads (Qwen3 is not measured here: EmbeddingGemma's).
FUSION_SHARES = {"bert": 0.35, "nomic-bert": 0.5, "gemma-embedding": 0.8, "qwen3": 0.8}
DEFAULT_FUSION_SHARE = 0.5
#: How many ranks behind its hit each step away puts a session neighbour (MEMORY_NEIGHBOUR_GAP)
#: when this model's channel answers: a strong embedder's top hits are mostly right, so their
#: neighbours come after them rather than among them (same bench, leave-one-out).
NEIGHBOUR_GAPS = {"gemma-embedding": 8.0, "qwen3": 8.0}
DEFAULT_NEIGHBOUR_GAP = 1.0
#: Default cosine floor for vector-only hits, per architecture: where unrelated texts land for
#: that model (spec: Qwen3 relevant ~0.68, unrelated ~0.3 -> 0.45; EmbeddingGemma 0.35 costs no
#: LoCoMo recall while 0.45 cuts R@50 by 2 points; MiniLM unrelated ~0.0-0.1).
COSINE_FLOORS = {"qwen3": 0.45, "gemma-embedding": 0.35, "bert": 0.25}
DEFAULT_COSINE_FLOOR = 0.3
#: Default injection floor (MEMORY_INJECT_MIN_COSINE) per architecture, where it is above the
#: cosine floor: MiniLM's recall floor let near texts of another subject into hook injections
#: (bench/relevance.py --knob cosine, docs/benchmarks.md); others are not measured: their floor.
INJECT_FLOORS = {"bert": 0.35}


def _override(value: str | None, default: str) -> str:
    if value is None:
        return default
    return "" if value.strip().lower() == "none" else value.replace("\\n", "\n")


def nvidia_smi_pids() -> set[int]:
    """PIDs nvidia-smi lists as compute processes; raises when nvidia-smi is missing/fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise RuntimeError("nvidia-smi not found")
    out = subprocess.run(
        [exe, "--query-compute-apps=pid", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout
    return {int(line.strip()) for line in out.splitlines() if line.strip().isdigit()}


def _default_llama_factory(**kwargs: Any) -> Any:
    from llama_cpp import Llama

    return Llama(**kwargs)


def _default_supports_gpu() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


class LlamaCppEmbedder(Embedder):
    """Embeds text with a GGUF model. Thread-safe; loads on first use."""

    name = "llama-cpp"

    def __init__(
        self,
        model_path: str,
        *,
        device: str = "cuda",
        n_ctx: int = EMBED_N_CTX,
        batch: int = 32,
        dim: int = 0,
        query_prefix: str | None = None,
        doc_prefix: str | None = None,
        instruct: str = "",
        pooling: str | None = None,
        n_ubatch: int | None = None,
        llama_factory: Callable[..., Any] | None = None,
        gpu_pids: Callable[[], set[int]] | None = None,
        supports_gpu: Callable[[], bool] | None = None,
        pack_tokens: int | None = None,
        threads: int = 0,
    ) -> None:
        self.model_path = model_path
        self.requested_device = device
        self.n_ctx_requested = n_ctx
        self.batch = max(1, batch)
        self.dim_requested = dim
        self.pack_tokens = pack_tokens
        self.threads = threads
        self._query_override, self._doc_override = query_prefix, doc_prefix
        self._instruct = instruct
        self._pooling_override = pooling
        self._n_ubatch_override = n_ubatch
        self._factory = llama_factory or _default_llama_factory
        self._gpu_pids = gpu_pids or nvidia_smi_pids
        self._supports_gpu = supports_gpu or _default_supports_gpu
        self._lock = threading.RLock()  # the model and its context: one call at a time
        self._queries_waiting = 0  # queries wanting the lock: a document batch lets them in
        self._turns = threading.Condition()  # signalled when that count falls
        self._llm: Any = None
        self.device: str | None = None  # the device really in use, once loaded
        self.fallback_reason: str | None = None
        self.error: str | None = None
        self.load_seconds: float | None = None
        self.gguf: GGUFInfo | None = None
        self.prompts = Prompts()
        self.pooling: int = POOLING["last"]
        self.n_ctx = n_ctx
        self.native_dim: int | None = None
        self._eos: int | None = None
        self._inspect()

    # --- configuration (no llama.cpp needed) -----------------------------------------------

    def _inspect(self) -> None:
        """Read the GGUF header: prompts, pooling, dimension, model id; refuse unsafe configs."""
        if not self.model_path:
            self.error = "no model configured (MEMORY_MODEL_PATH is empty): BM25-only mode"
            return
        try:
            self.gguf = info = read_gguf(self.model_path)
        except (OSError, GGUFError) as exc:
            self.error = f"cannot read model {self.model_path}: {exc}"
            return
        try:
            self._configure(info)
        except ConfigRefused as exc:
            self.error = str(exc)

    def _configure(self, info: GGUFInfo) -> None:
        arch = info.architecture
        defaults = model_prompts(arch, self._instruct)
        self.prompts = Prompts(
            query=_override(self._query_override, defaults.query),
            document=_override(self._doc_override, defaults.document),
        )
        if self._pooling_override:
            if self._pooling_override not in POOLING:
                raise ConfigRefused(f"unknown pooling {self._pooling_override!r}")
            self.pooling = POOLING[self._pooling_override]
        else:
            recorded = info.pooling_type
            self.pooling = recorded if recorded not in (None, -1) else POOLING["last"]
        if self.pooling in (POOLING["none"], POOLING["rank"]):
            raise ConfigRefused(
                f"refusing pooling {POOLING_NAMES[self.pooling]!r}: the vector channel needs one "
                "pooled vector per text (use mean, cls or last)"
            )
        trained = info.context_length
        self.n_ctx = min(self.n_ctx_requested, trained) if trained else self.n_ctx_requested
        if self.n_ctx < 8:
            raise ConfigRefused(f"refusing n_ctx {self.n_ctx}: too small to embed anything")
        if self._n_ubatch_override not in (None, 0, self.n_ctx):
            # llama.cpp aborts the whole process (GGML_ASSERT in build_pooling) when a pooled
            # sequence spans more than one micro-batch: n_ubatch must equal n_batch.
            raise ConfigRefused(
                f"refusing n_ubatch {self._n_ubatch_override} != n_batch {self.n_ctx}: llama.cpp "
                "aborts the process when a pooled sequence spans several micro-batches"
            )
        self.native_dim = info.embedding_length
        dim = self.dim_requested
        if dim:
            if arch not in MRL_ARCHITECTURES:
                raise ConfigRefused(
                    f"MEMORY_EMBED_DIM={dim}: truncation is only meaningful for Matryoshka models "
                    f"({', '.join(sorted(MRL_ARCHITECTURES))}), not {arch!r}"
                )
            if self.native_dim and not MIN_MRL_DIM <= dim <= self.native_dim:
                raise ConfigRefused(
                    f"MEMORY_EMBED_DIM={dim} must be within {MIN_MRL_DIM}..{self.native_dim}"
                )

    @property
    def available(self) -> bool:
        """False when the model is not configured, unreadable, refused or failed to load."""
        return self.error is None

    @property
    def dim(self) -> int | None:
        return self.dim_requested or self.native_dim

    @property
    def fusion_weight(self) -> float:
        """The vector channel's default RRF weight for this model (see FUSION_WEIGHTS)."""
        arch = self.gguf.architecture if self.gguf else ""
        return FUSION_WEIGHTS.get(arch, DEFAULT_FUSION_WEIGHT)

    @property
    def fusion_share(self) -> float:
        """The vector channel's default share under score fusion (see FUSION_SHARES)."""
        arch = self.gguf.architecture if self.gguf else ""
        return FUSION_SHARES.get(arch, DEFAULT_FUSION_SHARE)

    @property
    def neighbour_gap(self) -> float:
        """The default MEMORY_NEIGHBOUR_GAP when this model answers (see NEIGHBOUR_GAPS)."""
        arch = self.gguf.architecture if self.gguf else ""
        return NEIGHBOUR_GAPS.get(arch, DEFAULT_NEIGHBOUR_GAP)

    @property
    def cosine_floor(self) -> float:
        """Default MEMORY_RECALL_MIN_COSINE for this model (see COSINE_FLOORS)."""
        arch = self.gguf.architecture if self.gguf else ""
        return COSINE_FLOORS.get(arch, DEFAULT_COSINE_FLOOR)

    @property
    def inject_floor(self) -> float:
        """Default MEMORY_INJECT_MIN_COSINE for this model (see INJECT_FLOORS; -1: the
        cosine floor)."""
        arch = self.gguf.architecture if self.gguf else ""
        return INJECT_FLOORS.get(arch, -1.0)

    @property
    def model_id(self) -> str | None:
        """Tags every stored vector; vectors of another id are never compared with these."""
        if self.gguf is None:
            return None
        return f"{self.gguf.path.name}#{self.gguf.fingerprint}"

    def info(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "embedder": self.name,
            "model_path": self.model_path or None,
            "model_id": self.model_id,
            "architecture": self.gguf.architecture if self.gguf else None,
            "dim": self.dim,
            "pooling": POOLING_NAMES.get(self.pooling),
            "loaded": self._llm is not None,
            "device_requested": self.requested_device,
            "device": self.device,
            "available": self.available,
        }
        if self.fallback_reason:
            data["device_fallback"] = self.fallback_reason
        if self.error:
            data["reason"] = self.error
        if self.load_seconds is not None:
            data["load_seconds"] = round(self.load_seconds, 3)
        return data

    # --- loading and the device policy -----------------------------------------------------

    def _build(self, gpu: bool) -> Any:
        kwargs = dict(
            model_path=str(self.model_path), embedding=True, pooling_type=self.pooling,
            n_ctx=self.n_ctx, n_batch=self.n_ctx, n_ubatch=self.n_ctx,
            n_gpu_layers=-1 if gpu else 0, verbose=False,
        )
        if self.threads > 0:  # oversubscribed CPUs: OpenMP threads spinning cost 10-30x
            kwargs.update(n_threads=self.threads, n_threads_batch=self.threads)
        return self._factory(**kwargs)

    def _try_gpu(self) -> tuple[Any | None, str | None]:
        """load → probe embed → nvidia-smi PID check. Returns (model, None) or (None, why)."""
        llm = None
        try:
            if not self._supports_gpu():
                return None, "this llama.cpp build has no GPU offload"
            llm = self._build(gpu=True)
            self._llm = llm
            self._eos = self._eos_token(llm)
            self._embed_raw(["probe"])
            pids = self._gpu_pids()
            if os.getpid() not in pids:
                return self._drop(llm), "nvidia-smi does not list this process (silent CPU run)"
            return llm, None
        except ImportError:  # no llama.cpp at all: the CPU has none either (`_load_locked`)
            self._drop(llm)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure means: use the CPU
            return self._drop(llm), f"{type(exc).__name__}: {exc}"

    def _drop(self, llm: Any) -> None:
        self._llm = None
        close = getattr(llm, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
        return None

    def _load_locked(self) -> None:
        if self._llm is not None:
            return
        if self.error is not None:
            raise EmbedderUnavailable(self.error)
        started = time.perf_counter()
        try:
            if self.requested_device == "cuda":
                llm, why = self._try_gpu()
                if llm is not None:
                    self._llm, self.device = llm, "cuda"
                else:
                    self.fallback_reason = why
                    log.warning("embedder: GPU unavailable (%s); rebuilding on CPU", why)
            if self._llm is None:
                self._llm = self._build(gpu=False)
                self.device = "cpu"
            self._eos = self._eos_token(self._llm)
        except ImportError as exc:
            self._llm = None
            self.error = f"llama-cpp-python cannot be imported ({exc}): {INSTALL_LLAMA_CPP}"
            log.error("embedder: %s; vector channel off (BM25-only)", self.error)
            raise EmbedderUnavailable(self.error) from None
        except Exception as exc:  # noqa: BLE001
            self._llm = None
            self.error = f"model failed to load: {type(exc).__name__}: {exc}"
            log.error("embedder: %s; vector channel off (BM25-only)", self.error)
            raise EmbedderUnavailable(self.error) from None
        self.load_seconds = time.perf_counter() - started
        log.info("embedder: %s loaded on %s in %.2fs", self.model_id, self.device,
                 self.load_seconds)

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _eos_token(self, llm: Any) -> int | None:
        if self.pooling != POOLING["last"]:
            return None
        try:
            eos = int(llm.token_eos())
        except Exception:  # noqa: BLE001
            return None
        return eos if eos >= 0 else None

    # --- embedding -------------------------------------------------------------------------

    def _tokens(self, text: str) -> list[int]:
        llm = self._llm
        tokens = list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))
        limit = self.n_ctx
        if self._eos is not None:
            # LAST pooling reads the final token: it must be EOS, also after truncation.
            if tokens and tokens[-1] == self._eos:
                tokens.pop()
            tokens = tokens[: limit - 1] + [self._eos]
        else:
            tokens = tokens[:limit]
        return tokens or [0]

    def _embed_raw(self, texts: Sequence[str],
                   between: Callable[[], None] | None = None) -> np.ndarray:
        """Embed already-prefixed texts; returns unnormalised float32 rows. `between` runs
        between two decodes (the context is free then: each decode starts from a clear one)."""
        import numpy as np

        llm = self._llm
        if hasattr(llm, "_batch") and hasattr(llm, "_ctx"):
            return self._embed_llama(llm, texts, between)
        return np.asarray(llm.embed(list(texts)), dtype=np.float32)  # test doubles

    def _embed_llama(self, llm: Any, texts: Sequence[str],
                     between: Callable[[], None] | None = None) -> np.ndarray:
        import llama_cpp
        import numpy as np

        n_embd = llm.n_embd()
        n_seq_max = max(1, int(llm.context_params.n_seq_max))
        out = np.zeros((len(texts), n_embd), dtype=np.float32)
        pending: list[int] = []
        used = 0
        batch = llm._batch

        def flush() -> None:
            nonlocal used
            if not pending:
                return
            llm._ctx.kv_cache_clear()
            llm._ctx.decode(batch)
            for seq, row in enumerate(pending):
                ptr = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, seq)
                if not ptr:
                    raise RuntimeError("llama.cpp returned no pooled embedding")
                out[row] = np.ctypeslib.as_array(ptr, shape=(n_embd,))
            batch.reset()
            pending.clear()
            used = 0

        batch.reset()
        # One text per decode is fastest on CPU (a packed batch pays attention across the whole
        # pack, MODELS.md); a GPU gains from packing.
        budget = self.pack_tokens or (4096 if self.device == "cuda" else 1)
        for row, text in enumerate(texts):
            tokens = self._tokens(text)
            if pending and (used + len(tokens) > min(budget, self.n_ctx)
                            or len(pending) >= n_seq_max):
                flush()
                if between is not None:
                    between()
                    if self._llm is not llm:  # a query rebuilt it on the CPU meanwhile
                        raise ModelRebuilt
            batch.add_sequence(tokens, len(pending), True)
            pending.append(row)
            used += len(tokens)
        flush()
        llm._ctx.kv_cache_clear()
        return out

    def _finish(self, rows: np.ndarray) -> np.ndarray:
        import numpy as np

        rows = np.asarray(rows, dtype=np.float32)
        if self.dim_requested and rows.shape[1] > self.dim_requested:
            rows = rows[:, : self.dim_requested]
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return (rows / np.maximum(norms, NORM_EPS)).astype(np.float32, copy=False)

    def _run(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        import numpy as np

        with self._model(query):
            self._load_locked()
            between = None if query else self._let_queries_in
            chunks = []
            for start in range(0, len(texts), self.batch):
                part = texts[start : start + self.batch]
                if start and between is not None:
                    between()
                try:
                    chunks.append(self._embed_raw(part, between))
                except ModelRebuilt:
                    chunks.append(self._embed_raw(part, between))
                except Exception as exc:  # noqa: BLE001
                    if self.device != "cuda":
                        raise
                    # runtime GPU failure (OOM, lost device): rebuild on CPU, retry once
                    self.fallback_reason = f"runtime GPU failure: {type(exc).__name__}: {exc}"
                    log.warning("embedder: %s; rebuilding on CPU and retrying",
                                self.fallback_reason)
                    self._drop(self._llm)
                    self._llm = self._build(gpu=False)
                    self.device = "cpu"
                    self._eos = self._eos_token(self._llm)
                    chunks.append(self._embed_raw(part, between))
            rows = np.concatenate(chunks) if chunks else np.zeros((0, self.dim or 0), np.float32)
        return self._finish(rows)

    @contextmanager
    def _model(self, query: bool) -> Iterator[None]:
        """Hold the model for one call; a query is counted while it waits, so a document batch
        under way hands the model over before its next text (`_let_queries_in`)."""
        if not query:
            with self._lock:
                yield
            return
        with self._turns:
            self._queries_waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._turns:
                self._queries_waiting -= 1
                self._turns.notify_all()
        try:
            yield
        finally:
            self._lock.release()

    def _let_queries_in(self) -> None:
        """Between two texts of a document batch (its thread holds the lock once, in `_run`):
        when queries wait, release the model until each of them has taken it, then go on."""
        if not self._queries_waiting:  # a query arriving just after waits for the next text
            return
        self._lock.release()
        try:
            with self._turns:
                self._turns.wait_for(lambda: self._queries_waiting == 0)
        finally:
            self._lock.acquire()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """float32 rows (len(texts) × dim), L2-normalised, documents' prompt applied."""
        return self._run([self.prompts.document + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """One L2-normalised float32 vector, the query prompt applied."""
        return self._run([self.prompts.query + text], query=True)[0]

    def close(self) -> None:
        with self._lock:
            self._drop(self._llm)
