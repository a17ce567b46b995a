"""``%agent`` / ``%%agent`` and ``%agent_config``.

Options come first (``--name value``); everything after them is the prompt, verbatim (a prompt
like ``what's in df?`` must not go through shell-style quoting). ``{name}`` in a prompt is replaced
by a short summary of the kernel variable ``name`` (a picture, or ``{cell:ID}``, goes with it:
``kernel.attach``). A top-level ``%agent`` keeps its cell busy until the run ends
(``nb_agent.ui.awaiting``); ``--background`` returns at once instead.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError as IPythonUsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from nb_agent import policy
from nb_agent.agent.recipes import load_recipe
from nb_agent.connect.config import AgentConfig, lookup_option
from nb_agent.connect.options import Surface, to_config
from nb_agent.conversation import elicitation, history, picks
from nb_agent.conversation.controller import Conversation
from nb_agent.conversation.describe import in_use, next_model
from nb_agent.conversation.policy_check import enforce
from nb_agent.conversation.replay import CellTape, cell_tape, check, publish
from nb_agent.conversation.result import AgentResult
from nb_agent.errors import NbAgentError, UsageError
from nb_agent.kernel.attach import Cells, attachments, cell_ids, read_cells
from nb_agent.kernel.failures import Failure
from nb_agent.kernel.variables import interpolate
from nb_agent.render.transcript import to_markdown, to_text
from nb_agent.secrets import MIN_CHARS, redact
from nb_agent.ui import awaiting, fix
from nb_agent.ui.headless import LoopThread, headless_ask, plain_push
from nb_agent.ui.interrupt import live_runs
from nb_agent.ui.kernel_host import KERNEL
from nb_agent.ui.magic_help import HELP_FLAGS, only_questions, print_usage, prompt_after
from nb_agent.ui.magic_options import live_parser, table_arguments

_NAME = re.compile(r"\s*(--[\w-]+|-h(?=\s|$))")
_DOLLAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_VALUE = re.compile(r"(?:=|\s+)(\"[^\"]*\"|'[^']*'|\S+)")
Prepared = tuple[Conversation, str, Any, Failure | None]  # what _prepare hands a run


def option_names(parser: argparse.ArgumentParser) -> tuple[frozenset[str], frozenset[str]]:
    """(options that take a value, flags), read from ``parser``: the one place options are declared."""
    values: set[str] = set()
    flags: set[str] = set()
    for action in parser._actions:  # argparse has no public list of its actions
        names = [name for name in action.option_strings if name.startswith("--")]
        (flags if action.nargs == 0 else values).update(names)
    return frozenset(values), frozenset(flags)


def _agent_options() -> tuple[frozenset[str], frozenset[str]]:
    return option_names(live_parser(AgentMagics.agent))


def split_options(line: str) -> tuple[list[str], str]:
    """``(["--url", "X", "--new"], "the prompt")``: options end at the first word that is not one.

    Which words are options, and which take a value, comes from ``%agent``'s own argparse
    definitions, so the two cannot drift. Values are unquoted here and handed to argparse as
    tokens, never re-split.
    """
    valued, flags = _agent_options()
    flags |= HELP_FLAGS  # `%agent --new --help`: help, not a prompt (``nb_agent.ui.magic_help``)
    pos, tokens = 0, []
    while (m := _NAME.match(line, pos)) is not None:
        name = m.group(1)
        if name in flags:
            tokens.append(name)
            pos = m.end()
        elif name in valued and (v := _VALUE.match(line, m.end())) is not None:
            value = v.group(1)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            tokens += [name, value]
            pos = v.end()
        else:
            break
    return tokens, line[pos:].strip()


def expand_names(value: str, namespace: dict[str, Any]) -> str:
    """``$name`` / ``${name}`` in an option value: the variable's text (URLs kept in variables)."""

    def replace(m: re.Match[str]) -> str:
        key = m.group(1) or m.group(2)
        return str(namespace[key]) if key in namespace else m.group(0)

    return _DOLLAR.sub(replace, value)


def unexpander(tokens: list[str], expanded: list[str]) -> Callable[[str], str]:
    """For error messages about options: each ``$name`` shown as typed, never its (secret) text."""
    pairs = sorted(
        ((e, t) for t, e in zip(tokens, expanded, strict=True) if e != t and len(e) >= MIN_CHARS),
        key=lambda p: -len(p[0]),
    )

    def undo(message: str) -> str:
        for value, typed in pairs:
            message = message.replace(value, typed).replace(repr(value)[1:-1], typed)
        return redact(message)

    return undo


def with_options(config: AgentConfig, args: Any, surface: Surface = "agent") -> AgentConfig:
    """The options given on a magic's line, over ``config``."""
    merged = config.merged(**to_config(args, surface))
    enforce(merged)  # the admin's floor (nb_agent.policy): refused here, before anything is kept
    return merged


def _interactive(shell: Any) -> bool:
    """A front end that can show the widget and send its clicks: not ``jupyter execute`` / nbval."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return False
    parent = kernel.get_parent() if hasattr(kernel, "get_parent") else getattr(kernel, "_parent_header", {})
    return bool((parent or {}).get("content", {}).get("allow_stdin"))


@magics_class
class AgentMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.defaults = AgentConfig.from_env()
        self.conversations: dict[str, Conversation] = {}
        self._loop_thread: LoopThread | None = None
        self._noted_background = False
        awaiting.install(shell, _interactive)  # top-level %agent cells wait for their run

    @property
    def ns(self) -> dict[str, Any]:
        assert self.shell is not None
        return self.shell.user_ns  # type: ignore[no-any-return]

    @magic_arguments()
    @table_arguments("agent")  # --url, --acp, --protocol, --model, --approve, ... (nb_agent.connect.options)
    @argument("--session", help="continue the named conversation (default: the notebook's current one)")
    @argument("--new", action="store_true", help="start a fresh conversation")
    @argument("--sessions", action="store_true", help="ACP: list the agent's past sessions for this folder")
    @argument("--resume", metavar="ID", help="ACP: continue the agent's past session ID (see --sessions)")
    @argument("--wait", action="store_true", help="wait for the run, streaming plain text")
    @argument(
        "--background", action="store_true", help="with the widget: return at once, the run goes on (_agent.wait())"
    )
    @argument("--fix", action="store_true", help="fix the failed cell (the last, or --cell ID); or %%agent fix")
    @argument("--cell", help="with --fix: the id of the failed cell to fix")
    @no_var_expand  # {name} means a summary of the variable, not its str(); see variables.py
    @prompt_after(lambda line: split_options(line)[0])  # `--help` counts among the options, not in the prompt
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Ask an agent: %agent [options] PROMPT, or %%agent [options] with the prompt in the cell.

        {name} in the prompt stands for a short summary of the variable name; the prompt may end
        with "?". Without --url or --acp the built-in agent answers. %agent fix (or --fix) asks it
        to fix the last cell that failed. The run is in _agent (.text, .tool_calls, .usage, ...).
        """
        # The docstring is the usage `%agent --help` prints (``nb_agent.ui.magic_help``). A line prompt
        # may end with "?": ``nb_agent.ui.questions`` keeps IPython from reading it as a help request.
        # Where the kernel can wait (``nb_agent.ui.awaiting``), a top-level %agent runs as agent_in_cell.
        prepared = self._prepare(line, cell)
        if prepared is None:
            return
        conv, prompt, args, failure = prepared
        interactive = _interactive(self.shell)
        tape = cell_tape(self.shell, prompt, conv.config, interactive)
        if interactive and not args.wait and not conv.config.quiet:
            if not args.background and not self._noted_background:
                reason = awaiting.why_not(self.shell)
                if reason is not None:
                    self._noted_background = True
                    print(f"nb-agent: this cell returns before the run ends ({reason}): `await _agent.wait()` waits")
            self._start_live(conv, prompt, tape, failure)
        else:
            self._run_waiting(conv, prompt, tape, failure)
            check(tape)

    async def agent_in_cell(self, line: str, cell: str | None = None) -> None:
        """A top-level ``%agent`` in a front end whose kernel can wait: the cell stays busy until the
        run ends, while the widget's buttons still reach the agent (``nb_agent.ui.awaiting``)."""
        cells = await read_cells(cell_ids(cell if cell is not None else line))  # {cell:ID}: the page's pictures
        prepared = self._prepare(line, cell, cells)
        if prepared is None:
            return
        conv, prompt, args, failure = prepared
        tape = cell_tape(self.shell, prompt, conv.config, True)
        if args.wait or conv.config.quiet:  # plain text (or nothing), as a headless run shows it
            task = self._start_plain(conv, prompt, tape, failure)
        elif args.background:
            self._start_live(conv, prompt, tape, failure)
            return
        else:
            task = self._start_live(conv, prompt, tape, failure, background=False)
        await awaiting.finish(task, lambda: _cancel(conv))
        check(tape)

    def _prepare(self, line: str, cell: str | None, cells: Cells | None = None) -> Prepared | None:
        """The conversation, the prompt, the parsed options and the failed cell a fix run is for;
        ``None`` (a message printed) if unusable."""
        tokens, rest = split_options(line)
        if HELP_FLAGS.intersection(tokens) or only_questions(cell if cell is not None else rest):
            print_usage(self.agent)  # `%agent --help`, `%agent ?`, `%%agent` with a body of "?"
            return None
        expanded = [expand_names(t, self.ns) for t in tokens]
        shown = unexpander(tokens, expanded)
        try:
            args = live_parser(self.agent).parse_args(expanded)
        except IPythonUsageError as exc:
            print(f"nb-agent: {shown(str(exc))}")
            return None
        prompt = cell if cell is not None else rest
        prompt, pictures = attachments(prompt.strip(), self.ns, cells, lambda note: print(f"nb-agent: {note}"))
        prompt = interpolate(prompt, self.ns)
        failure = None
        try:
            if args.fix or fix.is_fix(prompt):  # the failed cell, its traceback and variables are the prompt
                failure = fix.find(args.cell)
                prompt = fix.prompt(failure, self.ns, extra="" if fix.is_fix(prompt) else prompt)
            config = with_options(self.defaults, args)
            if not prompt and config.recipe and not config.url:  # the recipe's own prompt
                prompt = load_recipe(config.recipe, config.params).prompt or ""
        except UsageError as exc:
            print(f"nb-agent: {shown(str(exc))}")
            return None
        name = args.session or "default"
        if args.sessions:
            self._list_sessions(self._conversation(name, config, fresh=False))
            return None
        if not prompt:
            print_usage(self.agent)
            return None
        if (earlier := self.conversations.get(name)) is not None:
            earlier.picks.explicit(args)  # the line's own options win over the widget's
        conv = self._conversation(name, config, fresh=args.new)
        conv.reopen = args.resume
        conv.attach = tuple(pictures)
        return conv, prompt, args, failure

    def _list_sessions(self, conv: Conversation) -> None:
        """``--sessions``: the agent's past sessions for this folder, printed (the agent started if needed)."""
        if self._loop_thread is None:
            self._loop_thread = LoopThread()
        listed = history.listed(conv.ensure_client(), str(conv.config.url))
        try:
            print(asyncio.run_coroutine_threadsafe(listed, self._loop_thread.loop).result())
        except NbAgentError as exc:
            print(f"nb-agent: {exc}")

    def _conversation(self, name: str, config: AgentConfig, *, fresh: bool) -> Conversation:
        conv = self.conversations.get(name)
        if fresh or conv is None or (conv.config.url, conv.config.protocol) != (config.url, config.protocol):
            if conv is not None:
                conv.end_soon()  # the conversation it replaces ends: an ACP agent's session is closed
            conv = self.conversations[name] = Conversation(config, name, fresh=fresh, host=KERNEL)
        conv.configure(config)
        return conv

    # -- live, in a widget ------------------------------------------------------------------------
    def _start_live(
        self,
        conv: Conversation,
        prompt: str,
        tape: CellTape | None = None,
        failure: Failure | None = None,
        *,
        background: bool = True,
    ) -> asyncio.Task[Any]:
        """The run as a task on the kernel's loop, shown in a widget; a background run (the cell has
        returned) is cancelled by a kernel interrupt through ``live_runs``, an awaited one by its cell."""
        from nb_agent.ui.chat import LiveChat

        handle: Any = None
        started: list[asyncio.Task[Any]] = []
        in_background = [background]  # follow-ups sent from the widget always are

        def on_start(result: AgentResult, task: asyncio.Task[Any]) -> None:
            self.ns["_agent"] = result  # bound now, so the next cell can `await _agent.wait()`
            started.append(task)
            if in_background[0]:
                live_runs.add(task, live.cancel)  # a kernel interrupt cancels it

        def on_events() -> None:
            if in_background[0]:
                live_runs.guard()  # ipykernel restores its own SIGINT handler after each cell

        def prepare(text: str, cells: Cells | None) -> str:  # a follow-up typed in the widget (its cell has
            in_background[0] = True  # returned): {fig}, {cell:ID} go with it (what is not attached: in its text)
            text, pictures = attachments(text, self.ns, cells)
            conv.attach = tuple(pictures)
            return interpolate(text, self.ns)

        def on_finish() -> None:
            if handle is not None:
                shown: Any = live.widget._repr_mimebundle_() or {}
                bundle = dict(shown[0] if isinstance(shown, tuple) else shown)
                transcript = live.widget.transcript
                bundle.update({"text/markdown": to_markdown(transcript), "text/plain": to_text(transcript)})
                recorded = tape.metadata() if tape is not None else {}  # the cell's run's recording
                handle.update(bundle, raw=True, metadata=recorded)

        live = LiveChat(
            conv,
            loop=asyncio.get_running_loop(),
            on_start=on_start,
            on_finish=on_finish,
            on_events=on_events,
            prepare=prepare,
        )
        handle = display(live.widget, display_id=True)
        fixing = failure.cell_id if failure is not None else None
        live.start(prompt, tape=tape, fix=fixing)  # on the loop's own thread: the task has started when this returns
        return started[-1]

    def _start_plain(
        self, conv: Conversation, prompt: str, tape: CellTape, failure: Failure | None
    ) -> asyncio.Task[Any]:
        """An awaited ``--wait`` / ``--quiet`` run: a task on the kernel's loop, printing plain text."""
        result = AgentResult(prompt)
        self.ns["_agent"] = result
        push = plain_push(conv.config.quiet)
        fixing = failure.cell_id if failure is not None else None

        async def run() -> None:
            ask = headless_ask(conv.config.approve)
            ran = conv.run(prompt, result, push, ask=ask, tape=tape, fix=fixing, elicit=elicitation.for_text())
            await (fix.reporting(ran, failure) if failure is not None else ran)
            publish(tape)

        return asyncio.get_running_loop().create_task(run())

    # -- waiting, as plain text ---------------------------------------------------------------------
    def _run_waiting(self, conv: Conversation, prompt: str, tape: CellTape, failure: Failure | None) -> None:
        if self._loop_thread is None:
            self._loop_thread = LoopThread()
        result = AgentResult(prompt)
        self.ns["_agent"] = result

        push = plain_push(conv.config.quiet)
        fixing = failure.cell_id if failure is not None else None
        ask = headless_ask(conv.config.approve)
        run = conv.run(prompt, result, push, ask=ask, tape=tape, fix=fixing, elicit=elicitation.for_text())
        if failure is not None:
            run = fix.reporting(run, failure)
        self._loop_thread.run(run, lambda: _cancel(conv))
        publish(tape)

    # -- configuration ------------------------------------------------------------------------------
    @magic_arguments()
    @table_arguments("agent_config")  # the options %agent takes (nb_agent.connect.options)
    @argument("--lookup", action="store_true", help="built-in agent: look for a local model server again")
    @argument("--no-lookup", action="store_true", help="built-in agent: never look for a local model server")
    @argument("--reset", action="store_true", help="back to the NB_AGENT_* environment defaults")
    @no_var_expand  # $name is expanded after quoting (a key may hold quotes), and errors show $name
    @line_magic
    def agent_config(self, line: str) -> None:
        """Show or set this kernel's defaults for %agent (secrets masked)."""
        shown: Callable[[str], str] = redact
        try:
            tokens = shlex.split(line)
            expanded = [expand_names(t, self.ns) for t in tokens]
            shown = unexpander(tokens, expanded)
            args = live_parser(self.agent_config).parse_args(expanded)
            if args.reset:
                self.defaults = AgentConfig.from_env()
            self.defaults = with_options(self.defaults, args, "agent_config")
            if args.lookup or args.no_lookup:
                self.defaults = lookup_option(self.defaults, on=args.lookup and not args.no_lookup)
        except (UsageError, IPythonUsageError, ValueError) as exc:  # ValueError: unbalanced quotes
            print(f"nb-agent: {shown(str(exc))}")
            if isinstance(exc, policy.PolicyError):
                print(policy.current().describe())
            return
        print(self.defaults.describe(model=next_model(self.defaults)))
        if not self.defaults.url and self.defaults.provider in ("auto", "local"):  # which local model, why, whence
            from nb_agent.agent.models.default import choose_local

            print(choose_local(self.defaults.model).describe())
        for line in in_use(self.conversations):
            print(line)
        if chosen := picks.describe({name: conv.picks for name, conv in self.conversations.items()}):
            print(chosen)
        print(policy.current().describe())


async def _cancel(conv: Conversation) -> None:  # the run ends with reason ``cancel``
    await conv.cancel()
