"""``jsonl:///dir`` — dsh v4's own on-disk layout, so dsh and dshpy share session roots.

Each session is a directory ``<root>/<project>/<segment>/`` (see
:mod:`dshpy.storage.jsonl.layout`) holding its log ``session.v4.jsonl`` (or
``session.v4.jsonl.zstd``, dsh's default) and a ``session.lock``; older generations
dsh wrote (``session.jsonl`` … ``session.v3.jsonl``) are read through dsh's upgrade
chain and kept when a writer stores their upgrade beside them. The log's first
line is the header record; every further line is one event in its storage form
(``sourceEventSeqs`` range-packed), compact JSON, ``\\n``-terminated. Compressed,
frame 0 holds exactly the header line and every durable batch is one more
checksummed frame.

Durability and crash safety follow dsh (dsh-v4 §2.4, §2.5, §6.2):

* a new log is written to ``<final>.<12 hex>.tmp``, fsynced, published with
  ``link`` (never overwriting) and its directory fsynced;
* a batch is appended and fsynced; a failed write is truncated back off;
* the single writer holds a non-blocking ``flock`` on ``session.lock`` for its
  whole lifetime (readers never lock); the kernel drops it when the process dies;
* a torn tail (bytes of a batch whose flush never returned) is ignored on read; before
  the next append its bytes are moved aside to ``<log>.torn-<UTC time>``, logged, and
  cut off. A cut final zstd frame gives back the complete records it holds, which are
  re-appended as their own frame.

Only a *provably* torn tail is dropped (issue #11): in plain JSONL an unterminated
final line that is the start of a JSON object line; compressed, an incomplete final
frame that no re-reading of one header field makes complete and after which nothing
decodes (:func:`~dshpy.storage.jsonl.zstd_frames.check_torn`). Every complete line must be
the next valid event and every complete frame must decode and verify its checksum.
Anything else is :class:`~dshpy.errors.CorruptSessionError`, naming the line or frame,
and nothing is written. No ``OSError`` leaves the store raw: every one goes through
:func:`~dshpy.storage.os_errors.os_store_error`, so a write the filesystem refuses is
:class:`~dshpy.errors.ReadOnlyStoreError` or, when the disk is full,
:class:`~dshpy.errors.StoreFullError` (the failed batch is cut back off), and a log or
lock it cannot read or open (``EIO``, a symlink loop, a directory in its place)
:class:`~dshpy.errors.StoreUnavailableError`.

The package holds one concept a module:

* :mod:`~dshpy.storage.jsonl.store`: :class:`JsonlStore`, finding sessions under a root;
* :mod:`~dshpy.storage.jsonl.layout`: where a session lives, and what its files are named;
* :mod:`~dshpy.storage.jsonl.scan`: reading and checking a log, and the cache of whole scans;
* :mod:`~dshpy.storage.jsonl.zstd_frames` and :mod:`~dshpy.storage.jsonl.json_prefix`:
  telling a torn tail from damage, for zstd frames and for plain lines;
* :mod:`~dshpy.storage.jsonl.generations`: an old generation (v0–v3) read as its in-memory upgrade;
* :mod:`~dshpy.storage.jsonl.upgrade`: storing that upgrade as ``session.v4`` the way dsh stages it;
* :mod:`~dshpy.storage.jsonl.writer`: encoding and appending batches, the live writer;
* :mod:`~dshpy.storage.jsonl.locking`: the single-writer ``session.lock``;
* :mod:`~dshpy.storage.jsonl.sidecar`: the projection cache beside the log;
* :mod:`~dshpy.storage.jsonl.files`: durable file work and ``OSError`` translation.
"""

from dshpy.storage.jsonl.sidecar import PROJECTION_CACHE_FILENAME
from dshpy.storage.jsonl.store import COMPRESSIONS, JsonlStore

__all__ = ["COMPRESSIONS", "PROJECTION_CACHE_FILENAME", "JsonlStore"]
