"""The local web UI (``dshpy ui``): session list, transcript, timeline, fork tree and usage, live.

Plain HTML, CSS and a hand-written script shipped in the package (``assets/``), served
by dshpy's own HTTP server behind its token, Host and Origin checks. The browser gets
JSON from ``/ui/api/…`` (:class:`UiData`) and renders every string with
``textContent``: nothing from a session is ever parsed as HTML.
"""

from dshpy.ui.data import UiData
from dshpy.ui.routes import CSP, UI_PREFIX, mount_ui
from dshpy.ui.server import UiServer, ui_url
from dshpy.ui.transcript import transcript_items

__all__ = ["CSP", "UI_PREFIX", "UiData", "UiServer", "mount_ui", "transcript_items", "ui_url"]
