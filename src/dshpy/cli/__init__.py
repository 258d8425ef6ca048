"""The ``dshpy`` command line (click + rich); see ``dshpy --help`` and README "Command line".

``cli`` is the root click group (for ``CliRunner`` and embedding), ``main`` the
console-script entry point.
"""

from dshpy.cli.app import cli, main
from dshpy.cli.migrate import migrate
from dshpy.cli.sessions import sessions

cli.add_command(sessions)
cli.add_command(migrate)

__all__ = ["cli", "main"]
