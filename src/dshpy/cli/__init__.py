"""The ``dshpy`` command line (click + rich); see ``dshpy --help`` and README "Command line".

``cli`` is the root click group (for ``CliRunner`` and embedding), ``main`` the
console-script entry point.
"""

from dshpy.cli.app import cli, main
from dshpy.cli.compact import compact
from dshpy.cli.migrate import migrate
from dshpy.cli.search import index, search
from dshpy.cli.sessions import sessions
from dshpy.cli.upgrade import upgrade

sessions.add_command(compact)
sessions.add_command(upgrade)
cli.add_command(sessions)
sessions.add_command(search)
cli.add_command(index)
# The agent commands import the model client (openai, ~0.8 s): only when they run, not for `sessions list`.
cli.add_lazy_command("run", "dshpy.cli.agent:run")
cli.add_lazy_command("chat", "dshpy.cli.agent:chat")
cli.add_lazy_command("serve", "dshpy.cli.serve:serve")
cli.add_lazy_command("ui", "dshpy.cli.ui:ui")
cli.add_command(migrate)

__all__ = ["cli", "main"]
