"""dsh's released session formats v0–v3 and the four edges that bring them to v4.

dsh 0.2.1 ships the chain rc.8 only designed (dsh-v4 §1): four adjacent edges, each
a streaming stage over raw header and event records, composed by
:class:`~dshpy.log.formats.chain.MigrationChain`:

* :mod:`~dshpy.log.formats.v0_to_v1`: rc.8's legacy normalizations, made once;
* :mod:`~dshpy.log.formats.v1_to_v2`: assistant chunks folded into attempts, seqs renumbered;
* :mod:`~dshpy.log.formats.v2_to_v3`: the system prompt becomes a protected surface head;
* :mod:`~dshpy.log.formats.v3_to_v4`: producer-owned sources, first-class tool results,
  and the parent's catalog facts for its historical children
  (:mod:`~dshpy.log.formats.children`).

:mod:`~dshpy.log.formats.physical` reads the stored layouts (packed chunk rows,
range-encoded citations, ``seedLength``) and :mod:`~dshpy.log.formats.released` holds
what each released generation admits. The output is what dsh 0.2.1rc2 stages for the
same input, key order included, so an upgraded file is byte-identical to dsh's.
"""

from __future__ import annotations

from collections.abc import Sequence

from dshpy.log.formats.chain import (
    FormatError,
    Migration,
    MigrationChain,
    MigrationRefusedError,
    format_version_of,
)
from dshpy.log.formats.children import ChildSource, child_source, unavailable_child
from dshpy.log.formats.physical import decode_rows
from dshpy.log.formats.v0_to_v1 import V0_TO_V1
from dshpy.log.formats.v1_to_v2 import V1_TO_V2
from dshpy.log.formats.v2_to_v3 import V2_TO_V3
from dshpy.log.formats.v3_to_v4 import v3_to_v4

__all__ = [
    "ChildSource",
    "FormatError",
    "Migration",
    "MigrationChain",
    "MigrationRefusedError",
    "child_source",
    "dsh_chain",
    "format_version_of",
    "unavailable_child",
]

CURRENT = 4


def dsh_chain(children: Sequence[ChildSource] = ()) -> MigrationChain:
    """dsh's v0→v4 chain for a session whose historical subagent children are ``children``."""
    return MigrationChain(CURRENT, [V0_TO_V1, V1_TO_V2, V2_TO_V3, v3_to_v4(children)], decode=decode_rows)
