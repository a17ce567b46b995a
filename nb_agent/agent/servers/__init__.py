"""The built-in agent served to other front ends: ``acp`` (``nb-agent acp``, the ACP agent on stdio or
a WebSocket) and ``http`` (``nb-agent serve``: Goose's and AG-UI's HTTP APIs).

Nothing is imported here, so ``nb-agent acp`` on stdio does not need the ``serve`` extra
(starlette, uvicorn) that ``http`` checks for on import.
"""
