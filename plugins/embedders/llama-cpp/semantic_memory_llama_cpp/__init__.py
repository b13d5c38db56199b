"""llama.cpp embedder plugin: registers a GGUF embedder (Qwen3-Embedding by default).

Configured by MEMORY_MODEL_PATH (empty = no model: the vector channel stays off and recall is
BM25-only), MEMORY_DEVICE, and its own section `LlamaCppSettings` (MEMORY_EMBED_*; see
docs/vector.md).
"""

from __future__ import annotations

from semantic_memory.config import Settings
from semantic_memory.hookspecs import hookimpl

from .embedder import (
    ConfigRefused,
    EmbedderUnavailable,
    LlamaCppEmbedder,
    Prompts,
    model_prompts,
    nvidia_smi_pids,
)
from .settings import LlamaCppSettings

__all__ = [
    "ConfigRefused", "EmbedderUnavailable", "LlamaCppEmbedder", "LlamaCppSettings", "Prompts",
    "model_prompts", "nvidia_smi_pids", "from_settings",
]


def from_settings(settings: Settings) -> LlamaCppEmbedder:
    own = settings.section(LlamaCppSettings)
    return LlamaCppEmbedder(
        settings.model_path,
        device=settings.device,
        n_ctx=own.embed_n_ctx,
        batch=own.embed_batch,
        dim=own.embed_dim,
        query_prefix=own.embed_query_prefix,
        doc_prefix=own.embed_doc_prefix,
        instruct=own.embed_instruct,
        threads=own.embed_threads,
    )


@hookimpl
def register_embedders(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(from_settings(settings))
