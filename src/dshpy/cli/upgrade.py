"""``dshpy sessions upgrade ID|--all [--dry-run]``: store old dsh generations (v0–v3) as v4.

Old sessions read fine without it (each read upgrades in memory, dsh-v4 §1.3), and
opening one to continue it stores the upgrade anyway. This command does it ahead of
time, the way dsh stages it: the v4 file is written beside the old one, verified,
and linked into place; the old file is kept. ``--dry-run`` upgrades in memory and
checks the result, writing nothing. A session dsh's chain refuses is reported with
dsh's reason and left as it is (exit 2 when any was refused).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from dshpy.core.ids import check_session_id
from dshpy.errors import DshError, FormatVersionError, StoreError

if TYPE_CHECKING:  # the JSONL backend is imported only when a store needs it
    from dshpy.storage.jsonl.upgrade import UpgradeReport

from .app import AppState, CliError, DataError, common_options, emit_json, pass_state

__all__ = ["upgrade"]


def _upgrader(state: AppState) -> Any:
    store = state.open_store(create=False)
    if not callable(getattr(store, "upgrade", None)) or not callable(getattr(store, "old_generations", None)):
        raise CliError(f"{state.url} stores every session in the current format: there is nothing to upgrade")
    return store


@click.command("upgrade")
@click.argument("session_id", metavar="ID", required=False)
@click.option("--all", "every", is_flag=True, help="Upgrade every session stored in an older format.")
@click.option("--dry-run", is_flag=True, help="Upgrade in memory and check the result; write nothing.")
@common_options
@pass_state
def upgrade(state: AppState, session_id: str | None, every: bool, dry_run: bool) -> None:
    """Store sessions written in an older dsh format (v0–v3) as v4, beside the old files (which are kept)."""
    if (session_id is None) == (not every):
        raise click.UsageError("give one session ID or --all")
    store = _upgrader(state)
    targets = [check_session_id(session_id)] if session_id is not None else sorted(store.old_generations())
    reports: list[UpgradeReport] = []
    refused: dict[str, str] = {}
    for target in targets:
        try:
            reports.append(store.upgrade(target, dry_run=dry_run))
        except (FormatVersionError, StoreError) as error:
            if session_id is not None:
                raise
            refused[target] = str(error)
        except DshError as error:  # an unexpected refusal of one session must not stop --all
            refused[target] = str(error)
    if state.json:
        emit_json(
            {
                "dryRun": dry_run,
                "upgraded": [report.to_dict() for report in reports if not report.current],
                "current": [report.session_id for report in reports if report.current],
                "refused": [{"id": key, "error": value} for key, value in refused.items()],
            }
        )
    else:
        _print(reports, refused, dry_run, every)
    if refused:
        raise DataError(f"{len(refused)} session(s) could not be upgraded; they are left as they were")


def _print(reports: list[UpgradeReport], refused: dict[str, str], dry_run: bool, every: bool) -> None:
    if every and not reports and not refused:
        click.echo("every session is stored in the current format; nothing to upgrade")
    for report in reports:
        if report.current:
            click.echo(f"{report.session_id}: already stored as v{report.from_version}; nothing to do")
        elif dry_run:
            click.echo(
                f"{report.session_id}: v{report.from_version} upgrades to v4 ({report.event_count} events); "
                f"would write {report.target}"
            )
        else:
            click.echo(
                f"{report.session_id}: v{report.from_version} → v4 ({report.event_count} events) in "
                f"{report.target}; kept {report.source.name}"
            )
    for key, error in refused.items():
        click.echo(f"{key}: not upgraded: {error}", err=True)
