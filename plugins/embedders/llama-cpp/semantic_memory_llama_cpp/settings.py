"""The llama-cpp embedder's own settings section (`MEMORY_EMBED_*`; docs/vector.md#variables).

The model file and device are the core's (`MEMORY_MODEL_PATH`, `MEMORY_DEVICE`): they say
whether there is a model at all, which the service reports without loading a plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from semantic_memory.config import SettingsSection, within

#: Tokens of a text embedded (capped at the model's trained context), llama.cpp's n_ctx and
#: batch. Memory grows with it: llama.cpp computes an output row of the vocabulary's size for
#: every token of a text (pooled embeddings make every token an output), so with a Qwen3
#: vocabulary one 80,000-character memory took 10.4 GB at 8192, and kept it. Every benchmark
#: memory is shorter; a longer text is embedded by its start (the keyword channels see it all).
EMBED_N_CTX = 1024


@dataclass(frozen=True)
class LlamaCppSettings(SettingsSection):
    # Prompt overrides; unset = the model's own prompts (chosen from the GGUF architecture),
    # the word "none" = no prefix. EMBED_INSTRUCT is the task text of Qwen3's query prefix.
    embed_query_prefix: str | None = None
    embed_doc_prefix: str | None = None
    embed_instruct: str = ""
    # Matryoshka truncation of the vectors (0 = the model's full dimension).
    embed_dim: int = field(default=0, metadata=within(0, 65_536))
    # llama.cpp context size (capped at the model's trained context) and texts per sub-batch.
    embed_n_ctx: int = field(default=EMBED_N_CTX, metadata=within(8, 1_048_576))
    embed_batch: int = field(default=32, metadata=within(1, 4096))
    # CPU threads for llama.cpp (0 = its default: all cores for batches).
    embed_threads: int = field(default=0, metadata=within(0, 1024))
