"""The JSON-RPC server (layer L6): dsh's SDK runtime protocol plus dshpy's ``session.*`` methods.

* :mod:`~dshpy.server.protocol` — frames, error codes, parameter checks;
* :mod:`~dshpy.server.methods` — :class:`Runtime`: sessions, agents, the method table;
* :mod:`~dshpy.server.hub` — notification fan-out and subscriptions;
* :mod:`~dshpy.server.stdio` — newline-delimited JSON-RPC on stdin/stdout;
* :mod:`~dshpy.server.http` — ``POST /rpc`` + Server-Sent Events on uvicorn (lifecycle, options);
* :mod:`~dshpy.server.http_app` — the Starlette routes, the event streams and their scope;
* :mod:`~dshpy.server.http_guard` — the trust model: token, Host, Origin checks;
* :mod:`~dshpy.server.connections` — read deadlines and the connection cap below the app;
* :mod:`~dshpy.server.main` — ``dshpy serve`` and the ``dshpy-runtime`` script.

Importing this package is cheap; the modules that need the model client load it.
"""
