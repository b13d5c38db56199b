"""Helpers for tests that need an embedder they control: a bag-of-letters model, registered in
process through the plugin manager, that a test breaks the way a real model fails (it raises,
answers NaN, answers the wrong shape). (No tests here.)"""

from __future__ import annotations

from typing import Any

import numpy as np
from semantic_memory.embedders import Embedder
from semantic_memory.hookspecs import hookimpl

DIM = 26


def letter_vector(text: str) -> Any:
    """The text's a-z counts at unit length: texts that share letters are near, no model needed."""
    v = np.zeros(DIM, np.float32)
    for ch in text.lower():
        if "a" <= ch <= "z":
            v[ord(ch) - 97] += 1
    return v / max(float(np.linalg.norm(v)), 1e-12)


class Letters(Embedder):
    """The model every test shares the tag of (`letters#1`); a test subclasses it to break it."""

    name = "letters"
    model_id = "letters#1"
    dim = DIM
    cosine_floor = 0.0

    def embed_documents(self, texts: list[str]) -> Any:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> Any:
        return letter_vector(text)


class Plugin:
    """Registers this one embedder instance, so the test keeps a handle to break it by."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @hookimpl
    def register_embedders(self, register: Any, settings: Any) -> None:
        register(self.embedder)
