"""The llama-cpp embedder's own settings section (`MEMORY_EMBED_*`; docs/vector.md#variables).

The model file and device are the core's (`MEMORY_MODEL_PATH`, `MEMORY_DEVICE`): they say
whether there is a model at all, which the service reports without loading a plugin.
"""

from __future__ import annotations

from dataclasses import dataclass

from semantic_memory.config import ConfigError, SettingsSection


@dataclass(frozen=True)
class LlamaCppSettings(SettingsSection):
    # Prompt overrides; unset = the model's own prompts (chosen from the GGUF architecture),
    # the word "none" = no prefix. EMBED_INSTRUCT is the task text of Qwen3's query prefix.
    embed_query_prefix: str | None = None
    embed_doc_prefix: str | None = None
    embed_instruct: str = ""
    # Matryoshka truncation of the vectors (0 = the model's full dimension).
    embed_dim: int = 0
    # llama.cpp context size (capped at the model's trained context) and texts per sub-batch.
    embed_n_ctx: int = 8192
    embed_batch: int = 32
    # CPU threads for llama.cpp (0 = its default: all cores for batches).
    embed_threads: int = 0

    def validate(self) -> None:
        if self.embed_dim < 0:
            raise ConfigError(f"MEMORY_EMBED_DIM must be >= 0, not {self.embed_dim}")
        if self.embed_n_ctx < 8:
            raise ConfigError(f"MEMORY_EMBED_N_CTX must be >= 8, not {self.embed_n_ctx}")
        if self.embed_batch < 1:
            raise ConfigError(f"MEMORY_EMBED_BATCH must be >= 1, not {self.embed_batch}")
        if self.embed_threads < 0:
            raise ConfigError(f"MEMORY_EMBED_THREADS must be >= 0, not {self.embed_threads}")
