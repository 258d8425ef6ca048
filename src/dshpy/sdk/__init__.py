"""The Python SDK (layer L6): :class:`HarnessClient` / :class:`AsyncHarnessClient` over stdio or HTTP.

Importing it is cheap (stdlib only); the server it spawns loads the rest.
"""

from dshpy.sdk.client import AsyncHarnessClient, HarnessClient, Response, SessionRecord
from dshpy.sdk.profiles import Profile, ProfileError, load_profile
from dshpy.sdk.transport import HarnessError, HarnessSessionNotFound, TransportClosedError

__all__ = [
    "AsyncHarnessClient",
    "HarnessClient",
    "HarnessError",
    "HarnessSessionNotFound",
    "Profile",
    "ProfileError",
    "Response",
    "SessionRecord",
    "TransportClosedError",
    "load_profile",
]
