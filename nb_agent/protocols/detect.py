"""``--protocol auto``: find an A2A agent card; otherwise say exactly what was tried."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from nb_agent.errors import UsageError
from nb_agent.protocols import PROTOCOLS
from nb_agent.wire import jsondecode
from nb_agent.wire.http import add_url, join_url

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


async def detect_protocol(url: str, headers: Mapping[str, str], client: httpx.AsyncClient) -> str:
    """``"a2a"`` when an agent card answers; otherwise a ``UsageError`` listing the attempts."""
    add_url(url)
    tried: list[str] = []
    for path in CARD_PATHS:
        card_url = join_url(url, path, root=True)  # the query the user typed goes along
        try:
            response = await client.get(card_url, headers=dict(headers), timeout=10.0)
        except httpx.HTTPError as exc:
            tried.append(f"GET {card_url} ({type(exc).__name__})")
            continue
        if response.status_code == 200:
            try:
                card = jsondecode.loads(response.content)
            except ValueError:
                card = None
            if isinstance(card, dict) and ("name" in card or "supportedInterfaces" in card):
                return "a2a"
            tried.append(f"GET {card_url} (200, not an agent card)")
        else:
            tried.append(f"GET {card_url} (HTTP {response.status_code})")
    others = [name for name, registration in PROTOCOLS.items() if not registration.command and name != "a2a"]
    raise UsageError(
        f"could not detect the protocol of {url}: tried {'; '.join(tried)}. "
        f"Only A2A announces itself; pass --protocol {', '.join(others[:-1])} or {others[-1]}."
    )
