"""``nb-agent stream URL PROMPT``: one run from any agent server, live in the terminal or as JSONL.

The run is the one every front end runs (``nb_agent.conversation``): the admin's policy checked
(``nb_agent.policy``), the turn metered into the usage ledger (its ``this turn: ...`` line, a
``turn_usage`` event in JSONL), recorded into ``--recording FILE`` and replayed from it
(``--replay auto|strict|off``, as ``%agent``'s), approvals answered by ``--approve`` or on the
terminal through the same one path as the widget's clicks.

Exit status: 0 when the run finishes with reason ``stop``; otherwise non-zero with the reason
on stderr (1 error, 2 usage, 3 length, 4 input required, 130 cancelled); a strict replay that
could not answer is an error.

Whatever any command writes to stdout and stderr passes ``render.terminal.safe_output``: text from
an agent or a server never reaches the terminal as control characters (``--jsonl`` lines carry
them JSON-escaped).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import traceback
from collections.abc import Sequence

from nb_agent import cli_models
from nb_agent.connect.config import AgentConfig
from nb_agent.connect.options import add_arguments, to_config
from nb_agent.conversation import elicitation
from nb_agent.conversation.controller import Ask, Conversation, Push
from nb_agent.conversation.policy_check import enforce
from nb_agent.conversation.replay_file import file_tape
from nb_agent.conversation.result import AgentResult
from nb_agent.errors import NbAgentError, UsageError
from nb_agent.events import ApprovalAnswered, ApprovalRequested, Decision, Event, UserMessage
from nb_agent.gate import automatic
from nb_agent.protocols import PROTOCOL_CHOICES, takes_command
from nb_agent.render.terminal import json_line_safe, safe_output
from nb_agent.render.text import TextRenderer, approval_warnings, label
from nb_agent.render.unseen import inline
from nb_agent.wire.http import parse_header

EXIT = {"stop": 0, "error": 1, "length": 3, "input_required": 4, "cancel": 130}


def _header(value: str) -> tuple[str, str]:
    """One ``--header`` (``wire.http.parse_header``), its error in argparse's words."""
    try:
        return parse_header(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nb-agent", description="AI agents in Jupyter, and on the command line.")
    sub = parser.add_subparsers(dest="command", required=True)
    stream = sub.add_parser("stream", help="send one prompt to an agent server and stream the run")
    stream.add_argument("url", nargs="?", help="the agent server's URL (none with --agent)")
    stream.add_argument("prompt", help="what to ask")
    stream.add_argument("--agent", metavar="CMD", help='an ACP agent command to run, e.g. "opencode acp"')
    stream.add_argument("--protocol", choices=PROTOCOL_CHOICES, default="auto")
    stream.add_argument("--header", action="append", type=_header, default=[], metavar="K:V")
    stream.add_argument("--session", help="continue this session / context / thread id")
    stream.add_argument(
        "--mode",
        metavar="ID",
        help="ACP: the agent's mode to set before the first prompt (e.g. Claude Code's default, acceptEdits, "
        "plan; Gemini CLI's default, autoEdit, yolo); an unknown id lists the agent's modes",
    )
    stream.add_argument("--jsonl", action="store_true", help="one JSON event per line on stdout")
    stream.add_argument(
        "--recording",
        metavar="FILE",
        help="keep the run's recording in FILE, and answer from it (--replay auto, the default: when it "
        "holds this prompt's run; strict: only from it, no agent contacted; off: always live)",
    )
    add_arguments(stream, "stream")  # --approve, --replay, ...: the options %agent shares (connect.options)
    serve = sub.add_parser("serve", help="serve the built-in agent (Goose /reply and AG-UI) on 127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    serve.add_argument("--model", help="the model (default: NB_AGENT_MODEL or the provider's default)")
    serve.add_argument("--provider", help="auto, openai, anthropic or local (default: NB_AGENT_PROVIDER or auto)")
    serve.add_argument(
        "--max-sessions", type=int, help="sessions kept in memory (default 256, or NB_AGENT_SERVE_MAX_SESSIONS)"
    )
    serve.add_argument("--idle-minutes", type=float, help="evict sessions idle this long (default 30)")
    acp = sub.add_parser(
        "acp", help="serve the built-in agent as an ACP agent on stdio, or --ws (Zed, JupyterLab, marimo)"
    )
    acp.add_argument("--model", help="the model (default: NB_AGENT_MODEL or the provider's default)")
    acp.add_argument("--provider", help="auto, openai, anthropic or local (default: NB_AGENT_PROVIDER or auto)")
    acp.add_argument(
        "--mode", choices=["approve", "auto", "chat"], default="approve", help="tool permissions (default: approve)"
    )
    acp.add_argument("--max-turns", type=int, help="model calls per prompt (default 1000, or the recipe's)")
    acp.add_argument("--recipe", metavar="FILE", help="a Goose recipe: instructions, settings, MCP extensions")
    acp.add_argument(
        "--allow-stdio-mcp",
        action="store_true",
        help="start the stdio MCP servers (commands) a client names in session/new or session/load; "
        "without it they are refused (http MCP servers are always allowed)",
    )
    acp.add_argument(
        "--load-session",
        action="append",
        default=[],
        metavar="ID",
        help="also let session/load open this stored session (e.g. a notebook's); by default only "
        "sessions made by nb-agent acp can be loaded",
    )
    acp.add_argument(
        "--ws",
        action="store_true",
        help="serve ACP on a WebSocket on 127.0.0.1 instead of stdio (browser clients such as marimo); "
        "a token, printed at start, is required",
    )
    acp.add_argument("--port", type=int, default=0, help="with --ws: the port on 127.0.0.1 (default: a free one)")
    cli_models.add_parser(sub)  # nb-agent models pull | list | rm | info
    return parser


def terminal_ask(approve: str) -> Ask:
    """``--approve always|never`` answers at once (``gate.automatic``); ``ask`` asks on the terminal,
    and denies where there is none."""

    async def ask(ev: ApprovalRequested) -> Decision:
        decision = automatic(approve)
        if decision is not None:
            return decision
        if not sys.stdin.isatty():
            print(f"nb-agent: denied {ev.name}: stdin is not a terminal (use --approve always)", file=sys.stderr)
            return "deny"
        # written through sys.stdout (cleaned there), not as input()'s prompt, which readline writes raw
        # what "always" covers: the agent's own option says it (ACP); nb-agent's gates remember the tool
        own = [o.name for o in ev.options if o.kind == "allow_always"]
        scope = own[0] if own else None if ev.options else f"{ev.display_name}, any call"
        always = f"[a]lways ({scope}) / " if scope else ""  # an agent offering no "always": none asked
        # the card's rule (render.unseen): hidden characters as escapes, and what the card had to say about them
        for warning in approval_warnings(ev):
            sys.stdout.write(f"{warning}\n")
        arguments = inline(json.dumps(ev.arguments, ensure_ascii=False))
        sys.stdout.write(f"Allow {label(ev.display_name)} {arguments}? [y]es / {always}[N]o: ")
        sys.stdout.flush()
        answer = (await asyncio.to_thread(input)).strip().lower()
        choices: dict[str, Decision] = {
            "y": "allow_once",
            "yes": "allow_once",
        }
        if always:
            choices.update({"a": "allow_always", "always": "allow_always"})
        return choices.get(answer, "deny")

    return ask


def _target(args: argparse.Namespace) -> tuple[str, str]:
    """(protocol, URL or command): ``--agent CMD`` runs a local ACP agent instead of calling a server."""
    if args.agent is not None:
        if args.url is not None:
            raise UsageError("give either an agent server's URL or --agent CMD, not both")
        if args.protocol != "auto" and not takes_command(args.protocol):
            raise UsageError(f"--agent runs an ACP agent; --protocol {args.protocol} needs a URL")
        return "acp" if args.protocol == "auto" else args.protocol, args.agent
    if args.url is None:
        raise UsageError("the agent server's URL is missing (or run a local ACP agent with --agent CMD)")
    return args.protocol, args.url


def stream_config(args: argparse.Namespace) -> AgentConfig:
    """What ``nb-agent stream``'s options describe, as the magics' configuration (``connect.config``):
    its own (the target, headers, an ACP mode) and those of the shared table (``connect.options``)."""
    protocol, target = _target(args)
    own = AgentConfig(url=target, protocol=protocol, headers=dict(args.header), acp_mode=args.mode, kernel=False)
    return own.merged(**to_config(args, "stream"))


async def run_stream(args: argparse.Namespace) -> int:
    config = stream_config(args)
    enforce(config)  # the admin's floor, before anything starts (the run checks it again)
    if args.recording is None and (config.replay == "strict" or config.replay_approvals):
        raise UsageError(
            "--replay strict and --replay-approvals answer from a recording: name it with --recording FILE"
        )
    tape = file_tape(args.recording, args.prompt, config) if args.recording is not None else None
    conv = Conversation(config, session_id=args.session)
    result = AgentResult(args.prompt)
    try:
        if tape is None:  # a server that cannot be detected: said here, as usage (a replay may need none)
            await conv.ensure_client()
        await conv.run(
            args.prompt,
            result,
            terminal_push(args.jsonl),
            ask=terminal_ask(config.approve),
            tape=tape,
            elicit=elicitation.for_text(),  # asked on the terminal, else declined
        )
    finally:
        await conv.close()
    if tape is not None:
        tape.save()
        if (line := tape.summary()) is not None:
            print(line, file=sys.stderr)
        if tape.failed:
            print(f"nb-agent replay (strict): {tape.problem or tape.diverged}", file=sys.stderr)
            return EXIT["error"]
    reason = result.reason or "error"
    if reason != "stop":
        print(f"nb-agent: run finished: {reason}", file=sys.stderr)
    return EXIT.get(reason, 1)


def terminal_push(jsonl: bool) -> Push:
    """The run's events on stdout: one JSON event a line, or read as text (``render.text``)."""
    renderer = TextRenderer(lambda s: (sys.stdout.write(s), sys.stdout.flush()))

    def push(events: list[Event]) -> None:
        for ev in events:
            if isinstance(ev, UserMessage):  # the prompt the user typed: not echoed
                continue
            if jsonl:
                sys.stdout.write(json_line_safe(json.dumps(ev.model_dump(mode="json"), ensure_ascii=False)) + "\n")
                sys.stdout.flush()
            elif isinstance(ev, ApprovalAnswered):
                print(f"  → {ev.decision}", flush=True)
            else:
                renderer.render(ev)

    return push


def run_serve(args: argparse.Namespace) -> int:
    """``nb-agent serve``: one built-in agent per session, until Ctrl-C. Needs nb-agent[serve]."""
    try:
        from nb_agent.agent.servers.http import serve
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.select import builtin_agent

    def factory(session_id: str) -> Agent:
        return builtin_agent(args.model, args.provider, session_id=session_id)

    factory("check")  # a missing key or model fails here, not at the first request
    from nb_agent.connect.builtin import open_store  # evicted sessions resume from the notebooks' store

    idle = None if args.idle_minutes is None else args.idle_minutes * 60
    serve(factory, port=args.port, store=open_store(), max_sessions=args.max_sessions, idle_timeout=idle)
    return 0


def run_acp(args: argparse.Namespace) -> int:
    """``nb-agent acp``: ACP on stdin/stdout until the client closes stdin; logs go to stderr only."""
    import logging

    from nb_agent.agent.loop import Agent
    from nb_agent.agent.permissions import Permissions
    from nb_agent.agent.select import builtin_agent

    try:
        from nb_agent.agent.servers.acp.stdio import claim_stdout, serve_acp
    except ImportError as exc:
        raise UsageError(f"nb-agent acp needs the acp extra: pip install 'nb-agent[acp]' ({exc})") from None
    if args.max_turns is not None and args.max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if args.port and not args.ws:
        raise UsageError("--port is for --ws (ACP on a WebSocket); without it nb-agent acp speaks on stdio")
    out = None if args.ws else claim_stdout()  # on stdio, from here on whatever prints goes to stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="nb-agent acp: %(levelname)s %(message)s")

    recipe = None
    if args.recipe:
        from nb_agent.agent.recipes import load_recipe

        recipe = load_recipe(args.recipe, {})

    def factory(session_id: str) -> Agent:
        permissions = Permissions(args.mode)
        agent = builtin_agent(args.model, args.provider, recipe=recipe, session_id=session_id, permissions=permissions)
        if args.max_turns is not None:
            agent.settings.max_turns = args.max_turns
        return agent

    factory("check")  # a missing key or model fails here, before the client sends anything
    from nb_agent.connect.builtin import open_store  # the notebooks' store; session/load is limited (acp_trust)

    trust = {"allow_stdio_mcp": args.allow_stdio_mcp, "loadable": args.load_session}
    if out is not None:
        asyncio.run(serve_acp(factory, open_store(), out=out, **trust))
        return 0
    from nb_agent.agent.servers.acp.ws import serve_ws

    serve_ws(factory, open_store(), port=args.port, **trust)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    with safe_output():
        try:
            return _main(argv)
        except Exception:  # a bug's traceback may quote a server: print it here, cleaned, not after
            traceback.print_exc()
            return 1


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return run_serve(args)
        if args.command == "acp":
            return run_acp(args)
        if args.command == "models":
            return cli_models.run(args)
        return asyncio.run(run_stream(args))
    except UsageError as exc:
        print(f"nb-agent: {exc}", file=sys.stderr)
        return 2
    except NbAgentError as exc:
        print(f"nb-agent: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        print("nb-agent: run finished: cancel", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
