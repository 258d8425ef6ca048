"""``dshpy migrate``: bring a store's schema to this build's version, and say what was done.

Stores migrate themselves on first use, so this command is for operators who want the
schema change to happen at a chosen moment (before rolling out new workers, say) and
to see its result. On PostgreSQL it runs under the same advisory lock as a first use,
so it is safe while agents are running; a schema newer than this build is refused
(exit 2) and left alone.
"""

from __future__ import annotations

from typing import Any

import click

from .app import AppState, common_options, emit_json, pass_state

__all__ = ["migrate"]


@click.command("migrate")
@common_options
@pass_state
def migrate(state: AppState) -> None:
    """Create or upgrade the store's schema to this dshpy's version (safe to repeat)."""
    store = state.open_store(create=True)
    shown = str(getattr(store, "display_url", store.url))
    applied: tuple[int, ...] | None = getattr(store, "applied_migrations", None)
    version: int | None = getattr(store, "schema_version", None)
    latest: int | None = getattr(store, "latest_schema_version", None)
    result: dict[str, Any] = {
        "store": shown,
        "schemaVersion": version,
        "latestSchemaVersion": latest,
        "applied": None if applied is None else list(applied),
    }
    if state.json:
        emit_json(result)
    elif version is None:
        click.echo(f"{shown} has no schema to migrate (nothing to do)")
    elif applied:
        click.echo(f"{shown}: applied migration(s) {', '.join(map(str, applied))}; schema is at version {version}")
    elif applied is not None:
        click.echo(f"{shown}: schema is at version {version}, nothing to do")
    else:  # a store that migrates whenever it is opened (SQLite) cannot tell what opening it just did
        click.echo(f"{shown}: schema is at version {version}")
