"""``--protocol auto``: find an A2A agent card; otherwise say exactly what was tried."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from nb_agent.errors import UsageError
from nb_agent.wire import jsondecode

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


async def detect_protocol(url: str, headers: Mapping[str, str], client: httpx.AsyncClient) -> str:
    """``"a2a"`` when an agent card answers; otherwise a ``UsageError`` listing the attempts."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    tried: list[str] = []
    for path in CARD_PATHS:
        card_url = origin + path
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
    raise UsageError(
        f"could not detect the protocol of {url}: tried {'; '.join(tried)}. "
        "Only A2A announces itself; pass --protocol goose, agui, ntrp or cosmo."
    )
