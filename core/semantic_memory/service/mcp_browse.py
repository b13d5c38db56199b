"""Browsing memory from inside the agent: MCP resources (what clients offer as @-mentions), a
prompt (a slash command) and completion of their arguments.

- `memory://recent`: the newest-updated memories; `memory://recent/{+project}`: one project's
  (resources/list names one such resource per project that has memories);
  `memory://memories/{uid}`: one memory. A resource goes into the model's context like a hook's
  injection, so its text is the same `<semantic-memory>` block: labelled as reference data, with
  any wrapper tags inside stored content neutralised.
- Prompt `recall`: recalls for a described task with the hooks' relevance bar and budget and
  returns the block as a user message.
- `completion/complete`: the projects and kinds that exist, most used first, for the prompt's
  `project` / `kind` arguments and the project template's `project`.

In a repository (`--stdio`, started in the agent's folder) they obey its `.semantic-memory.toml`
as memory_recall does: recall off, each refuses with memory_recall's reason; and the prompt
recalls for the repository's project unless given one. The HTTP service's /mcp serves every
folder: no repository binds it.
"""

# No `from __future__ import annotations`: the SDK reads the prompt's signature at runtime.
from typing import TYPE_CHECKING, Annotated, Protocol

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp_types import (
    INVALID_REQUEST,
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    Resource,
    ResourceTemplateReference,
)
from pydantic import Field

from ..harness.repo_config import RepoConfig
from ..models import Memory, RecallFilters, RecallHit
from ..pipeline import MemoryEngine
from .mcp_logging import embedder_fallback

if TYPE_CHECKING:
    from .mcp_server import MemoryMCP

RECENT_URI = "memory://recent"
PROJECT_TEMPLATE = "memory://recent/{+project}"  # `+`: project names hold slashes (host/org/repo)
MEMORY_TEMPLATE = "memory://memories/{uid}"
PROMPT_NAME = "recall"
#: Memories in a "recent" resource, and the characters its block may take.
RECENT_LIMIT = 20
RECENT_BUDGET = 20_000
#: Projects listed as resources of their own (most memories first); the template reaches all.
MAX_LISTED_PROJECTS = 50
#: The protocol's cap on values in one completion answer.
MAX_COMPLETIONS = 100
#: A kind, as the tools take it (mcp_tools.Identifier).
KIND_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}"
#: The prompt's `kind`: one, or blank (a form sends every field; blank is left out).
PROMPT_KIND = rf"^\s*({KIND_PATTERN})?\s*$"

PROMPT_DESCRIPTION = (
    "Recall what long-term memory holds about a task: the memories relevant to it, as the "
    "labelled block the hooks inject (nothing when nothing is relevant).")

#: (reference kind, prompt name or template URI, argument) -> the memories column it completes.
COMPLETED: dict[tuple[str, str, str], str] = {
    ("ref/prompt", PROMPT_NAME, "project"): "project",
    ("ref/prompt", PROMPT_NAME, "kind"): "kind",
    ("ref/resource", PROJECT_TEMPLATE, "project"): "project",
}


class Repository(Protocol):
    """The repository a server runs in, as browsing uses it (mcp_tools.Workspace, which the
    tools use too)."""

    def require(self, what: str, refused: str) -> RepoConfig:
        """Its settings; ToolError with the reason when its file turns `what` off."""

    def project(self, repo: RepoConfig) -> str | None:
        """The project memories made there are filed under (what the hooks use)."""


def as_block(engine: MemoryEngine, memories: list[Memory], budget: int) -> str:
    """Memories as an injection block (newest first, as given), without a query."""
    return engine.injection_block("", [RecallHit(m, 0.0) for m in memories], budget)


def project_uri(template: UriTemplate, project: str) -> str:
    """The URI of a project's recent memories, which reads back as that project: `{+project}`
    keeps reserved characters as they are (a project's slashes stay slashes), so a `?` or `#`
    in a name would end the path (`memory://recent/q?x=1#f` named no resource) and a `%` be
    read as an escape (`x%2Fy` read back as `x/y`): those three are escaped first. Reading
    decodes every escape (the SDK's template match), so `%2F` typed by hand is a `/`."""
    escaped = project.replace("%", "%25").replace("?", "%3F").replace("#", "%23")
    return template.expand({"project": escaped})


def register_browsing(mcp: "MemoryMCP", engine: MemoryEngine,
                      workspace: Repository | None = None) -> None:
    """Add the resources, the prompt and the completion handler to `mcp`, bound by
    `workspace`'s repository file when the server runs in one (None: /mcp)."""

    def recall_on(refused: str) -> RepoConfig | None:
        """The workspace's settings (None without one); a protocol error with memory_recall's
        reason when its file turns recall off: the memories are as much its as the tool's."""
        if workspace is None:
            return None
        try:
            return workspace.require("recall", refused)
        except ToolError as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None

    def recent(project: str | None) -> str:
        recall_on("nothing read")
        if project == "":  # `memory://recent/`: every project's are `memory://recent`
            return f"{RECENT_URI}/ names no project: {RECENT_URI} holds the newest memories " \
                   "of every project."
        memories = engine.list(RecallFilters(project=project), RECENT_LIMIT, 0)
        if not memories:
            return "No memories stored" + (f" for project {project}." if project else ".")
        return as_block(engine, memories, RECENT_BUDGET)

    @mcp.resource(RECENT_URI, name="recent-memories", title="Recent memories",
                  description=f"The {RECENT_LIMIT} most recently updated memories of every "
                              "project, as reference data.", mime_type="text/plain")
    def recent_memories() -> str:
        return recent(None)

    # Project names are not paths: the SDK's path-traversal checks would refuse legitimate
    # ones, and the value only ever reaches SQL as a bound parameter.
    @mcp.resource(PROJECT_TEMPLATE, name="recent-project-memories",
                  title="Recent memories of a project",
                  description=f"The {RECENT_LIMIT} most recently updated memories of one project "
                              "(e.g. github.com/acme/web), as reference data.",
                  mime_type="text/plain", security=ResourceSecurity(exempt_params={"project"}))
    def recent_project_memories(project: str) -> str:
        return recent(project)

    @mcp.resource(MEMORY_TEMPLATE, name="memory", title="One memory",
                  description="One memory by uid (from memory_recall or memory_list), as "
                              "reference data.", mime_type="text/plain")
    def one_memory(uid: str) -> str:
        recall_on("nothing read")
        memory = engine.get(uid)
        if memory is None or memory.deleted:
            raise ResourceNotFoundError(f"no live memory with uid {uid[:80]!r}")
        # Escaping `<` as `&lt;` at most quadruples the content; the wrapper needs the rest.
        return as_block(engine, [memory], 4 * len(memory.content) + 2_000)

    def project_resources() -> list[Resource]:
        recall_on("nothing listed")  # resources/list as a whole: its names are the projects'
        projects, _ = engine.values("project", "", MAX_LISTED_PROJECTS)
        template = UriTemplate.parse(PROJECT_TEMPLATE)
        return [Resource(uri=project_uri(template, project),
                         name=f"recent-memories:{project}",
                         title=f"Recent memories: {project}",
                         description=f"The {RECENT_LIMIT} most recently updated memories of "
                                     f"project {project}.",
                         mime_type="text/plain")
                for project in projects]

    mcp.dynamic_resources = project_resources

    settings = engine.settings

    @mcp.prompt(name=PROMPT_NAME, title="Recall memories for a task",
                description=PROMPT_DESCRIPTION)
    async def recall_prompt(
        task: Annotated[str, Field(min_length=1, max_length=10_000, description=(
            "The task at hand, in a sentence or a few keywords."))],
        project: Annotated[str | None, Field(max_length=256, description=(
            "Only this project's memories (e.g. github.com/acme/web); omitted, the project "
            "of the repository this server runs in, when it runs in one (--stdio)."))] = None,
        kind: Annotated[str | None, Field(max_length=80, pattern=PROMPT_KIND, description=(
            "Only memories of this kind (decision, preference, fact, …)."))] = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> str:
        repo = recall_on("nothing recalled")
        # A form's blank (spaces too) is the argument left out: "  " recalled the global
        # memories alone, which the engine reads a project stripped to "" as.
        project = (project or "").strip() or None
        if workspace is not None and repo is not None and project is None:
            project = workspace.project(repo)

        def work() -> str:
            filters = RecallFilters(project=project, kind=(kind or "").strip() or None)
            hits = engine.recall(task, settings.plugin_limit, filters, relevant_only=True)
            return engine.injection_block(task, hits, settings.plugin_budget_chars)

        block = await anyio.to_thread.run_sync(work)
        fallback = await anyio.to_thread.run_sync(embedder_fallback, engine)
        if fallback and ctx is not None:
            await mcp.client_log.send(ctx, "warning", fallback)
        if not block:
            return f"No stored memory is relevant to this task: {task}"
        return f"Memories recalled for this task: {task}\n\n{block}"

    @mcp.completion()
    async def complete(ref: PromptReference | ResourceTemplateReference,
                       argument: CompletionArgument,
                       context: CompletionContext | None) -> Completion | None:
        recall_on("nothing completed")  # the values are the memories' projects and kinds
        key = (ref.type, ref.name if isinstance(ref, PromptReference) else ref.uri,
               argument.name)
        column = COMPLETED.get(key)
        if column is None:
            return None  # the SDK answers an empty list: nothing to offer for that argument
        values, total = await anyio.to_thread.run_sync(
            engine.values, column, argument.value, MAX_COMPLETIONS)
        return Completion(values=values, total=total, has_more=total > len(values))
