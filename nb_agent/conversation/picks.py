"""The widget's pickers: a conversation's model, mode and approvals, chosen for its next turn.

What is offered (:meth:`Picks.offer`, the widget's ``choices`` trait):

- the built-in agent: the models its provider's server lists (OpenAI-compatible and Anthropic
  ``/v1/models``, ``providers/listing.py``), and the embedded model where it can run; its modes
  (approve, auto, chat). The list is asked for when the user opens a picker or a turn has called
  the model live, never when a widget appears: a replayed notebook contacts no model;
- an ACP agent: its modes (``session/set_mode``) and its select config options (``session/set_config_option``),
  the one of category ``model`` as the model picker;
- every agent: the approvals (``--approve``: ask, always, never).

**The admin's floor** (``nb_agent.policy``): a choice the policy refuses (approvals "always", the
built-in agent's "auto" mode under an "ask" floor; the embedded model when it is turned off) is shown
disabled, "not allowed here", and refused if sent anyway; the run's own policy check stands behind it.

**Scope.** A choice belongs to the widget's conversation and takes effect at its next turn: a turn
under way keeps what it started with. It holds for that conversation's later turns, follow-ups and
``%agent`` cells alike, until it is changed again, the same option is given on a ``%agent`` line (the
line wins and the pick goes), or ``--new`` starts another conversation. The picks go into the
conversation's configuration before its run starts, so whatever checks a configuration (an admin's
approval floor) checks them too. ``%agent_config`` lists them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from nb_agent import policy
from nb_agent.agent.models.default import local_models
from nb_agent.agent.permissions import MODES
from nb_agent.agent.providers.local_model import local_available
from nb_agent.agent.select import choose_provider
from nb_agent.agent.tape import TapeProvider
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation import history
from nb_agent.errors import UsageError
from nb_agent.run import RunClient

log = logging.getLogger("nb_agent.ui")

APPROVE = (("ask", "Ask each time"), ("always", "Allow every call"), ("never", "Deny every call"))
BUILTIN_MODES = (("approve", "Approve: ask before writes and runs"), ("auto", "Auto: no asking"),
                 ("chat", "Chat: no tools"))  # fmt: skip
_CONFIG = ("model", "provider", "mode", "approve")  # the picks that are AgentConfig fields
LIST_TIMEOUT = 5.0
Json = dict[str, Any]


@dataclass
class Picks:
    """One conversation's picks: what the user chose in the widget for its next turns, and what the
    pickers last offered. The conversation holds it and hands each step what it needs (its
    configuration, its client): a pick never reaches back into the conversation."""

    picked: dict[str, str] = field(default_factory=dict)  # the widget's choices for the next turns
    offered: dict[str, set[str]] = field(default_factory=dict)  # what the pickers last offered, per picker
    model_option: str | None = None  # an ACP agent's config option that picks its model
    listed: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # the models each server listed

    def over(self, config: AgentConfig) -> AgentConfig:
        """``config`` with the picks on top (an ACP agent's mode goes to its ``acp_mode``)."""
        fields = {k: v for k, v in self.picked.items() if k in _CONFIG}
        return config.merged(**fields) if fields else config

    def explicit(self, args: Any) -> None:
        """A ``%agent`` line's own options win over the widget's picks of the same thing: those picks go."""
        for name in _CONFIG:
            if getattr(args, name, None) is not None:
                self.picked.pop(name, None)

    def pick(self, config: AgentConfig, key: str, value: str) -> None:
        """The user chose ``value`` for ``key`` (``config``: the conversation's); a value the pickers
        did not offer is refused."""
        offered = self.offered.get(key)
        if offered is None or value not in offered:
            raise UsageError(f"{value!r} is not one of the choices for {key}")
        if key == "model" and config.protocol != "acp" and not config.url:
            provider, model = json.loads(value)
            self.picked.update(provider=provider, model=model)
        elif key == "model" and self.model_option:  # an ACP agent's model is one of its config options
            self.picked[f"config:{self.model_option}"] = value
        else:
            self.picked[key] = value

    async def apply(self, client: RunClient, config: AgentConfig | None) -> None:
        """At a turn's start: bring the client to the turn's configuration (``config``: the conversation's,
        the picks already over it, a ``%agent`` line's options over those; ``None`` for a client the
        caller built itself, which only the picks change): the built-in agent's provider, model and
        mode; an ACP agent's picked config options (its mode goes as ``acp_mode``)."""
        if client.protocol == "builtin":
            await _builtin(self._wanted(config), "provider" in self.picked or "model" in self.picked, client)
        elif client.protocol == "acp":
            state = getattr(client, "session_state", None)
            options = state.options.options if state is not None and state.options is not None else []
            current = {o.id: o.value for o in options}
            for key, value in self.picked.items():
                if key.startswith("config:") and current.get(key[7:]) != value:
                    await client.set_config_option(key[7:], value)  # type: ignore[attr-defined]

    def _wanted(self, config: AgentConfig | None) -> dict[str, str]:
        """The built-in agent's provider, model and mode a turn asks for (those it names)."""
        if config is None:
            return {k: v for k, v in self.picked.items() if k in ("provider", "model", "mode")}
        wanted = {"provider": config.provider, "model": config.model or "", "mode": config.mode}
        return {k: v for k, v in wanted.items() if v and not (k == "provider" and v == "auto")}

    async def offer(self, config: AgentConfig, client: RunClient | None, *, ask: bool = False) -> Json:
        """What the pickers show now, for a conversation of ``config`` whose client is ``client`` (None
        before its first turn): each picker with its choices, the one picked, and the one in use.

        ``ask``: the provider's server may be asked for its models now (the user opened a picker, or a
        turn just called the model live). Otherwise the model picker offers the list asked before, or
        the model in use alone: a widget that appears (a replayed notebook's cell) contacts nothing.
        """
        pickers: list[Json] = []
        self.model_option = None
        if not config.url:
            pickers += await self._builtin_pickers(config, client, ask)
        elif config.protocol == "acp" and client is not None:
            pickers += self._acp_pickers(client)
            pickers += await history.picker(client)  # the agent's past sessions, where it lists them
        approve = self.picked.get("approve", config.approve)
        rules = policy.current()
        pickers.append({"key": "approve", "label": "Approvals", "value": approve, "active": config.approve,
                        "options": _options(APPROVE, rules.check_approve)})  # fmt: skip
        self.offered = {p["key"]: {o["value"] for o in p["options"] if not o.get("disabled")} for p in pickers}
        return {"pickers": pickers}

    async def _builtin_pickers(self, cfg: AgentConfig, agent: RunClient | None, ask: bool) -> list[Json]:
        provider = getattr(agent, "provider", None)
        if provider is not None:
            try:
                provider = _live(provider)
            except Exception as exc:  # no model can be chosen: the run says so; the pickers offer none
                log.info("no model to offer: %s", exc)
                return []
        temporary = provider is None
        if provider is None:  # no run yet: the provider the first run would use, asked and let go
            try:
                provider = choose_provider(None if cfg.provider == "auto" else cfg.provider, cfg.model).provider
            except UsageError as exc:
                log.info("no model to offer: %s", exc)
                return []
        where = getattr(provider, "base_url", None)
        key = (provider.name, str(where))
        models = self.listed.get(key)
        # asked once per server for the conversation, and only when it may be; the local models are
        # the disk's (a pulled one among them at once), which contacts nobody
        if models is None and (ask or provider.name == "local"):
            try:
                models = self.listed[key] = await asyncio.wait_for(provider.list_models(), LIST_TIMEOUT)
            except (TimeoutError, UsageError):
                models = None
        if models is None:  # not asked (yet), or no answer: the model in use (an open picker asks again)
            models = [provider.model]
        models = list(dict.fromkeys([provider.model, *models]))
        group = f"{provider.name} ({where})" if where else provider.name
        options = [{"value": _model_value(provider.name, m), "label": m, "group": group} for m in models]
        if provider.name != "local" and local_available() is None and policy.current().embedded_model:
            for name in local_models():  # the embedded model and the downloaded ones (agent.models)
                options.append({"value": _model_value("local", name), "label": name, "group": "local (no network)"})
        active = _model_value(provider.name, provider.model)
        value = _model_value(self.picked.get("provider", provider.name), self.picked.get("model", provider.model))
        if temporary:
            await provider.aclose()
        permissions = getattr(agent, "permissions", None)
        mode_now = permissions.mode if permissions is not None else cfg.mode
        return [
            {"key": "model", "label": "Model", "value": value, "active": active, "options": options},
            {"key": "mode", "label": "Mode", "value": self.picked.get("mode", mode_now), "active": mode_now,
             "options": _options(BUILTIN_MODES, policy.current().check_mode)},
        ]  # fmt: skip

    def _acp_pickers(self, client: RunClient) -> list[Json]:
        state = getattr(client, "session_state", None)
        if state is None:
            return []
        out: list[Json] = []
        for option in state.options.options if state.options is not None else []:
            if not option.choices or not isinstance(option.value, str):
                continue  # on/off options are not pickers
            model = option.category == "model" and self.model_option is None
            key = "model" if model else f"config:{option.id}"
            if model:
                self.model_option = option.id
            value = self.picked.get(f"config:{option.id}", option.value)
            out.append({"key": key, "label": "Model" if model else option.name, "value": value,
                        "active": option.value,
                        "options": [{"value": c.value, "label": c.name} for c in option.choices]})  # fmt: skip
        if state.modes is not None and state.modes.available:
            now = state.modes.current or ""
            out.append({"key": "mode", "label": "Mode", "value": self.picked.get("mode", now), "active": now,
                        "options": [{"value": m.id, "label": m.name} for m in state.modes.available]})  # fmt: skip
        return out


def _model_value(provider: str, model: str) -> str:
    return json.dumps([provider, model])


def _live(provider: Any) -> Any:
    """The provider that answers live: a notebook's agent records its model calls through a
    ``TapeProvider`` (``agent/tape.py``) whose live provider is chosen at its first live call."""
    if isinstance(provider, TapeProvider):
        return provider.chosen() or provider.live()
    return provider


async def _builtin(wanted: dict[str, str], picked: bool, agent: Any) -> None:
    """The built-in agent brought to ``wanted`` (``picked``: in the widget, for its badge): another
    provider or model where it names one (none named: the agent keeps its own), and its mode."""
    provider = agent.provider
    name, model = wanted.get("provider"), wanted.get("model")
    if (name or model) and not (isinstance(provider, TapeProvider) and provider.replaying):
        try:  # a replay answers from its recording: no live model is chosen for it
            live = _live(provider)
        except Exception as exc:  # no model can be chosen: the run says so itself
            log.info("the model cannot be chosen now: %s", exc)
            live = None
        how = " · picked in the widget" if picked else ""
        if live is not None and name and name != live.name:
            choice = choose_provider(name, model)
            label = f"{choice.label}{how}"
            taped = isinstance(provider, TapeProvider)  # the tape goes on, from the new model
            agent.provider = provider.with_live(choice.provider, label) if taped else choice.provider
            agent.mode_label = label
            if agent.owns_provider:
                await live.aclose()
        elif live is not None and model and model != live.model:
            agent.provider = provider.with_model(model)
            agent.mode_label = f"{live.name}{how}" if how else agent.mode_label
    if wanted.get("mode") in MODES:
        agent.permissions.mode = wanted["mode"]


def _options(pairs: Any, check: Any = None) -> list[Json]:
    """Options for a picker; those ``check`` refuses (a ``PolicyError``) disabled, saying so."""
    out: list[Json] = []
    for value, label in pairs:
        try:
            if check is not None:
                check(value)
        except policy.PolicyError:
            out.append({"value": value, "label": f"{label} (not allowed here)", "disabled": True})
            continue
        out.append({"value": value, "label": label})
    return out


def describe(conversations: dict[str, Picks]) -> str:
    """For ``%agent_config``: each conversation's picks, by the conversation's name."""
    lines = []
    for name, picks in conversations.items():
        if picks.picked:
            shown = ", ".join(f"{k.removeprefix('config:')} {v}" for k, v in sorted(picks.picked.items()))
            lines.append(f"picked:      {shown}  (in the widget, conversation {name!r}; from its next turn)")
    return "\n".join(lines)


__all__ = ["Picks", "describe"]
