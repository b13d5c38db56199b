"""Vector channel plugin: cosine over an in-memory float32 matrix of embeddings.

Uses the embedder the engine hands it (`register_embedders`, e.g. the llama-cpp plugin; chosen
by MEMORY_EMBEDDER). Without a usable embedder it stays inactive and recall is BM25-only.
Its hits below the cosine floor (MEMORY_RECALL_MIN_COSINE, else the model's) are `weak`: the
engine drops those no other channel found. Adds `memory-mcp backfill` and `memory-mcp reindex`
(the ANN index of large stores, `ann.py`).
"""

from __future__ import annotations

from typing import Any

from semantic_memory.config import Settings
from semantic_memory.hookspecs import hookimpl

from .channel import VectorChannel

__all__ = ["VectorChannel"]


@hookimpl
def register_channels(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(VectorChannel(settings))


@hookimpl
def register_commands(cli) -> None:  # type: ignore[no-untyped-def]
    import click

    @cli.command()
    @click.pass_obj
    def backfill(obj: Any) -> None:
        """Embed every live memory that has no vector of the configured model yet."""
        import json

        from semantic_memory.cli import progress_bar

        engine = obj.engine
        info = engine.embedder_info() or {}
        if not info.get("active"):
            raise click.ClickException(
                f"no usable embedder: {info.get('reason') or 'install the embed extra'}")
        with progress_bar() as bar:
            task = bar.add_task("backfill", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            result = engine.backfill(progress=progress)
        click.echo(json.dumps(result, ensure_ascii=False))
        failed = {name: detail for name, detail in result.get("channels", {}).items()
                  if detail.get("failed")}
        for name, detail in failed.items():  # e.g. a model file that passed its header check
            click.echo(f"Error: {name}: {detail['failed']} memories could not be embedded: "
                       f"{detail.get('reason')}", err=True)
        if failed:
            raise SystemExit(1)

    @cli.command()
    @click.option("--threads", type=click.IntRange(0, 1024), default=0,
                  help="build threads (0: every core)")
    @click.pass_obj
    def reindex(obj: Any, threads: int) -> None:
        """Rebuild the vector channel's ANN index (<db>.vectors/) from the stored vectors."""
        import json

        from semantic_memory.cli import progress_bar

        channel = next((c for c in obj.engine.channels if c.name == "vector"), None)
        if channel is None or not channel.active:
            raise click.ClickException("no active vector channel (no usable embedder)")
        with progress_bar() as bar:
            task = bar.add_task("reindex", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            try:
                result = channel.reindex(progress=progress, threads=threads or None)
            except OSError as exc:  # the index folder cannot be made or written: one line
                raise click.ClickException(f"reindex failed: {exc}") from None
        if not result.get("built"):
            raise click.ClickException(str(result.get("reason")))
        click.echo(json.dumps(result, ensure_ascii=False))
        if not result.get("count"):  # an empty index serves nothing: say what is missing
            raise click.ClickException(f"no stored vector of {result.get('model')} to index: "
                                       "run `memory-mcp backfill` first")
