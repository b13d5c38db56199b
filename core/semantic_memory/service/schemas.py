"""Request bodies and query strings of the REST routes, as pydantic models.

Imported on first use (and warmed up in the background at start), not at start-up: pydantic
costs more import time than the whole rest of the HTTP service's critical path.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ..limits import (
    MAX_BATCH,
    MAX_BUDGET_CHARS,
    MAX_PAGE,
    MAX_PROJECT_CHARS,
    MAX_QUERY_CHARS,
    MAX_RECALL_K,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_UIDS,
)
from .errors import ApiError

DEFAULT_BUDGET = 2_000
#: The most results `GET /api/search` pages through (the engine's recall limit).
MAX_SEARCH_RESULTS = MAX_RECALL_K

Model = TypeVar("Model", bound=BaseModel)
Short = Annotated[str, Field(min_length=1, max_length=MAX_PROJECT_CHARS)]
#: A read's project filter: "" (or blank) means the global memories alone, those without a
#: project, as the CLI's `--project ''` does (`rest.read_filters`).
ProjectFilter = Annotated[str, Field(max_length=MAX_PROJECT_CHARS)]
Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
#: A name a report may leave out: "" says the same as leaving it out (`{}` was taken where
#: `"harness": ""` was refused).
Unnamed = Annotated[Short | None, BeforeValidator(lambda value: None if value == "" else value)]
Timestamp = float | str


# --- request models ------------------------------------------------------------------------


class _Body(BaseModel):
    """JSON bodies: strict types (no "5" for 5, no true for 1); an unknown field is an error
    (a misspelt `projetc` would otherwise store a memory without its project)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class _MemoryFields(_Body):
    """What a stored memory carries beside its text: an ingest item's fields, and an exchange
    item's, which each memory cut from the exchange takes."""

    kind: str = "fact"
    source: str = "chat"
    project: str | None = None
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    created_at: Timestamp | None = None
    #: The agent session (or capture) it belongs to: kept in arrival order there, so recall
    #: can bring a hit's neighbours along. Without one, a batch is its own session.
    session: Short | None = None


class IngestItem(_MemoryFields):
    content: str
    #: The uid of a live memory this one replaces (explicit supersession).
    replaces: Tag | None = None


class Exchange(_Body):
    """A user question and the assistant's reply, as a flush reads them (transcript.py)."""

    user: str
    reply: str


class IngestExchange(_MemoryFields):
    """A batch item that is an exchange, not a memory: the service redacts it whole, then cuts
    it into memories of at most CHUNK_CHARS as a hook's flush does (`_chunk_exchange`), each
    with the item's other fields. A cut made after the redaction cannot split a secret into
    halves that each pass it."""

    exchange: Exchange


class MemoryEdit(_Body):
    """PATCH /api/memories/{uid}: the fields to change; an absent (or null) field stays.
    `project: ""` makes the memory global; `tags` replaces the whole list. `if_version`: the
    `version` the client read (GET /api/memories/{uid}); the edit is refused (409) when the
    memory changed since."""

    content: str | None = None
    kind: str | None = None
    project: str | None = Field(default=None, max_length=MAX_PROJECT_CHARS)
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    if_version: str | None = Field(default=None, min_length=1, max_length=64)


class IngestBatch(_Body):
    #: Each item is checked on its own (an IngestItem): a bad one is rejected, not the batch.
    items: list[Any] = Field(min_length=1, max_length=MAX_BATCH)


class RecallRequest(_Body):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    k: int = Field(default=10, ge=1, le=MAX_RECALL_K, validation_alias=AliasChoices("k", "limit"))
    project: ProjectFilter | None = None
    kind: Short | None = None
    source: Short | None = None
    since: Timestamp | None = None
    budget_chars: int = Field(default=DEFAULT_BUDGET, ge=0, le=MAX_BUDGET_CHARS)
    #: An agent's context: memories injected into it (/inject/report) or flushed from it
    #: (tagged `session:<session>`) are left out.
    session: Short | None = None
    #: Only hits a channel vouches for (the bar hooks inject by), not merely the nearest.
    relevant_only: bool = False
    #: Also memories a newer one superseded (history); by default only the newest of a chain.
    include_superseded: bool = False
    #: With a project: also the global memories (no project) that a channel vouches for.
    with_global: bool = True


class InjectReport(_Body):
    uids: list[Tag] = Field(default_factory=list, max_length=MAX_UIDS)
    harness: Unnamed = None
    hook: Unnamed = None
    project: Unnamed = None
    query: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    chars: int = Field(default=0, ge=0, le=10**9)
    session: Unnamed = None


class _Query(BaseModel):
    """Query strings: values arrive as text, so numbers are converted; an unknown key is
    refused, as in a body (`?projetc=x` listed every memory)."""

    model_config = ConfigDict(extra="forbid")


class MemoriesQuery(_Query):
    project: ProjectFilter | None = None
    kind: Short | None = None
    source: Short | None = None
    since: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=50, ge=0, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=10**9)
    include_superseded: bool = False


class InjectionsQuery(_Query):
    harness: Short | None = None
    project: ProjectFilter | None = None  # "": the injections made outside any project
    limit: int = Field(default=50, ge=0, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=10**9)


class SearchQuery(_Query):
    """`GET /api/search`: recall, a page at a time. Recall ranks at most MAX_SEARCH_RESULTS
    memories, so `offset + limit` stays within them."""

    q: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    project: ProjectFilter | None = None
    kind: Short | None = None
    source: Short | None = None
    since: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=20, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=MAX_SEARCH_RESULTS - 1)
    include_superseded: bool = False


class ForgottenQuery(_Query):
    """`GET /api/forgotten`: `project=""` lists the global ones (those without a project), as
    `memory-mcp forgotten --project ""` does."""

    project: str | None = Field(default=None, max_length=MAX_PROJECT_CHARS)
    limit: int = Field(default=20, ge=1, le=100)


class PageQuery(_Query):
    limit: int = Field(default=50, ge=0, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=10**9)


#: The longest field path an error repeats: an unknown key is the client's text, of any length.
MAX_FIELD_CHARS = 100


def field_path(loc: tuple[Any, ...], whole: str = "body") -> str:
    """A pydantic error location as a field path (`items[3].content`); `whole` when empty;
    cut to MAX_FIELD_CHARS (ending in "…")."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    if len(out) > MAX_FIELD_CHARS:
        out = out[:MAX_FIELD_CHARS - 1] + "…"
    return out or whole


def parse_model(model: type[Model], data: Any, prefix: str = "",
                unknown: str = "unknown field") -> Model:
    """Validate `data` as `model`; ApiError 422 naming the first bad field otherwise (`prefix`
    is prepended to field names, e.g. "items[3]."; `unknown` says what an unknown key is)."""
    if not isinstance(data, dict):
        name = prefix.rstrip(".") or "body"
        raise ApiError(422, f"{name}: expected a JSON object", name)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{"field": prefix + field_path(tuple(e["loc"])),
                   "message": unknown if e["type"] == "extra_forbidden" else e["msg"]}
                  for e in exc.errors(include_url=False, include_input=False)]
        first = errors[0]
        raise ApiError(422, f"{first['field']}: {first['message']}", first["field"],
                       errors) from None
