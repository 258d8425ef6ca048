"""Format versions and the chain of one-step migrations that upgrades old logs on read.

The stored format is one integer. A reader upgrades an older log in memory by
running the adjacent edges n→n+1 up to :data:`FORMAT_VERSION`; the stored bytes are
never rewritten by a read. A newer version is refused with "upgrade", never guessed
at. The machinery lives in :mod:`dshpy.log.formats.chain`, dsh's own four edges in
:mod:`dshpy.log.formats`; this module names the chain every store uses.
"""

from __future__ import annotations

from dshpy.log.formats import dsh_chain
from dshpy.log.formats.chain import Migration, MigrationChain, format_version_of
from dshpy.log.header import FORMAT_VERSION

__all__ = ["DEFAULT_CHAIN", "FORMAT_VERSION", "Migration", "MigrationChain", "format_version_of"]

DEFAULT_CHAIN = dsh_chain()
"""dsh's v0→v4 chain, for a session without historical subagent children.

A store upgrading a parent builds its own with :func:`~dshpy.log.formats.dsh_chain`,
passing the children it found (their catalog facts join the parent's v4 log)."""
