"""Every field limit, defined once. The engine validates memories with these; REST (pydantic
schemas and the hook-facing fast parser), MCP tool schemas and the CLI state the same ones, so
an input is accepted or refused the same way on every interface."""

#: A memory's short fields.
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_PROJECT_CHARS = 256
MAX_SESSION_CHARS = 256
#: A uid (`[A-Za-z0-9_-]`), as given to get/forget/update/replaces.
MAX_UID_CHARS = 64
#: A recall: the query's length and how many memories one call may ask for.
MAX_QUERY_CHARS = 10_000
MAX_RECALL_K = 200
DEFAULT_K = 10
#: Items in one ingest batch; uids in one injection report; rows in one listing page.
MAX_BATCH = 1_000
MAX_UIDS = 500
MAX_PAGE = 500
#: The most characters an injected block may take (MEMORY_PLUGIN_BUDGET_CHARS, a recall's
#: `budget_chars`).
MAX_BUDGET_CHARS = 1_000_000
#: How far ahead of this machine's clock a memory's own time may be (another machine's clock
#: skew): a memory dated later would sort first by recency and never reach its TTL.
MAX_FUTURE_S = 86_400
