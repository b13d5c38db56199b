"""The contract an embedder implements (registered through `register_embedders`).

The engine picks one embedder (`choose_embedder`) and hands it to every channel's `bind`; the
vector channels embed with it. Model properties that tune fusion live here, because they are
the model's: a strong model earns a larger share than a small one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import lru_cache
from numbers import Integral
from typing import TYPE_CHECKING, Any

from .errors import one_line
from .fusion import range_problem
from .models import PLUGIN_NAME

if TYPE_CHECKING:
    import numpy as np

#: A vector channel's reason when no embedder plugin is installed (`/health`, `stats`,
#: `backfill`): recall is by words until one is, whatever MEMORY_MODEL_PATH says.
NO_EMBEDDER_PLUGIN = "no embedder plugin installed"


class Embedder(ABC):
    """Turns text into unit-length float32 vectors.

    `model_id` None means installed but not configured (no model): the vector channels stay
    inactive and recall is by words. `available` False means configured but unusable (the
    model failed to load): `error` says why in one line.
    """

    #: Unique among installed embedders; MEMORY_EMBEDDER names it.
    name: str = ""
    #: Default RRF weight of the vector channel when this model answers.
    fusion_weight: float = 1.0
    #: The vector channel's share of the weight under score fusion (MEMORY_FUSION=score).
    fusion_share: float = 0.5
    #: The neighbour gap (docs/retrieval.md#neighbour-expansion) when this model answers.
    neighbour_gap: float = 1.0
    #: Vector-only hits below this cosine are weak (dropped) and never injected; 0 = off.
    cosine_floor: float = 0.45
    #: Vector hits below this cosine are not injected by a hook (recall keeps them);
    #: < 0 = `cosine_floor`. MEMORY_INJECT_MIN_COSINE overrides it.
    inject_floor: float = -1.0

    #: A stable tag of the model (vectors are stored with it); None when none is configured.
    #: An attribute or a property.
    model_id: str | None = None
    #: The vectors' dimension (None before a model is known).
    dim: int | None = None

    #: False when a configured model cannot be used (then `error` says why in one line).
    available: bool = True
    #: Why the embedder is not available; None when it is.
    error: str | None = None

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """A (len(texts), dim) float32 array of L2-normalised rows, one per text."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """A (dim,) float32 L2-normalised vector for a search query (a model may prompt
        queries and documents differently)."""

    def info(self) -> dict[str, Any]:
        """What `stats` and `doctor` show: at least model_id and dim."""
        return {"model_id": self.model_id, "dim": self.dim}


def check_embedder(obj: Any) -> str | None:
    """Why `obj` cannot be registered as an embedder (None when it can). Its model members
    (`model_id`, `dim`, `available`), which may be properties, are read here: one that raises
    or answers the wrong type refuses the embedder in one line, rather than failing every
    command that chooses an embedder or asks the vector channel whether it is active."""
    if not isinstance(obj, Embedder):
        return f"{type(obj).__name__} is not a semantic_memory.embedders.Embedder"
    if not isinstance(obj.name, str) or not PLUGIN_NAME.match(obj.name):
        return f"{type(obj).__name__} has no valid name (got {obj.name!r})"
    where = f"embedder {obj.name!r}"
    read: dict[str, Any] = {}
    for member in ("model_id", "dim", "available"):
        try:
            read[member] = getattr(obj, member)
        except Exception as exc:  # noqa: BLE001 - a plugin's property: refused, not fatal
            return f"{where}: reading {member} failed: {one_line(exc)}"
    model_id, dim, available = read["model_id"], read["dim"], read["available"]
    if model_id is not None and not isinstance(model_id, str):
        return f"{where}: model_id must be a str or None, not {model_id!r}"
    if not isinstance(available, bool):
        return f"{where}: available must be a bool, not {available!r}"
    if model_id is not None and available and (
            isinstance(dim, bool) or not isinstance(dim, Integral) or dim <= 0):
        return f"{where}: dim must be an int > 0 with a model configured, not {dim!r}"
    for problem in (range_problem("fusion_weight", obj.fusion_weight),
                    range_problem("fusion_share", obj.fusion_share, 1.0),
                    range_problem("neighbour_gap", obj.neighbour_gap),
                    range_problem("cosine_floor", obj.cosine_floor, 1.0, low=-1.0),
                    range_problem("inject_floor", obj.inject_floor, 1.0, low=-1.0)):
        if problem:  # the vector channel's weight, share, gap and floor: checked as a channel's
            return f"{where}: {problem}"
    return None


def origin(embedder: Embedder) -> str:
    """How a message names an embedder: `embedder qa-hash of plugin qa_hash (qa-hash-embedder
    0.1)`, the plugin and distribution being those of the installed entry point whose module
    holds its class (as `plugin NAME (DIST VERSION)` in every other plugin message); just
    `embedder qa-hash` for one registered in-process (a test's, a script's)."""
    return f"embedder {embedder.name}{_installed_by(type(embedder).__module__)}"


@lru_cache(maxsize=16)
def _installed_by(module: str) -> str:
    """` of plugin NAME (DIST VERSION)` for the entry point that loads `module` or a package
    above it, "" when none does. Read once per module: only messages ask."""
    from importlib.metadata import entry_points

    # the group plugins.py loads (imported from there, it would close a circle through
    # hookspecs, which names this module's Embedder)
    for point in entry_points(group="semantic_memory"):
        if module == point.module or module.startswith(f"{point.module}."):
            dist = point.dist
            return f" of plugin {point.name}" + (f" ({dist.name} {dist.version})"
                                                 if dist is not None else "")
    return ""


def choose_embedder(embedders: list[Embedder], name: str = "") -> tuple[Embedder | None, str | None]:
    """The embedder recall uses, and a one-line problem when the choice is not what was asked.

    MEMORY_EMBEDDER names one explicitly. Otherwise: the only one installed; among several, the
    only one with a model configured (an installed but unconfigured embedder never displaces a
    configured one); several configured is ambiguous, so none is used until MEMORY_EMBEDDER
    picks one."""
    if name:
        for embedder in embedders:
            if embedder.name == name:
                return embedder, None
        names = ", ".join(e.name for e in embedders) or "none"
        return None, f"MEMORY_EMBEDDER={name} is not installed (installed: {names})"
    if len(embedders) <= 1:
        return (embedders[0] if embedders else None), None
    configured = [e for e in embedders if e.model_id is not None]
    if len(configured) == 1:
        return configured[0], None
    if not configured:
        return embedders[0], None  # all inactive: any one reports "no model" the same way
    names = ", ".join(e.name for e in configured)
    return None, f"several embedders have a model configured ({names}): set MEMORY_EMBEDDER"
