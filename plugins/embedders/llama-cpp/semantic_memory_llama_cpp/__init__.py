"""llama.cpp embedder plugin: registers a GGUF embedder (Qwen3-Embedding by default).

Configured by MEMORY_MODEL_PATH (empty = no model: the vector channel stays off and recall is
BM25-only), MEMORY_DEVICE, MEMORY_EMBED_* (see docs/vector.md).
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

__all__ = [
    "ConfigRefused", "EmbedderUnavailable", "LlamaCppEmbedder", "Prompts", "model_prompts",
    "nvidia_smi_pids", "from_settings",
]


def from_settings(settings: Settings) -> LlamaCppEmbedder:
    return LlamaCppEmbedder(
        settings.model_path,
        device=settings.device,
        n_ctx=settings.embed_n_ctx,
        batch=settings.embed_batch,
        dim=settings.embed_dim,
        query_prefix=settings.embed_query_prefix,
        doc_prefix=settings.embed_doc_prefix,
        instruct=settings.embed_instruct,
        threads=settings.embed_threads,
    )


@hookimpl
def register_embedders(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(from_settings(settings))
