"""`mailbus completion bash|zsh|fish`: the script a shell sources to complete mailbus's
commands and options.

argcomplete rather than shtab: shtab writes static scripts for bash, zsh and tcsh but
not fish, while argcomplete (maintained, used by pip, pipx and the AWS CLI) answers all
three from the parser itself, so a new subcommand or option completes with no script to
regenerate. It is imported only when a shell asks for completions or for the script.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

SHELLS = ("bash", "zsh", "fish")

EXAMPLE = """examples:
  eval "$(mailbus completion bash)"                  # in ~/.bashrc
  mailbus completion zsh >> ~/.zshrc
  mailbus completion fish > ~/.config/fish/completions/mailbus.fish"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh or fish)",
        description="Print the script that completes mailbus's commands in your shell.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(handler=_print_script)


def _print_script(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode(["mailbus"], shell=args.shell), end="")
    return 0


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit, when this run is one."""
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(parser)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    complete_if_asked(parser)
    return parser.parse_args(argv)


LISTEN_S = 1.5  # how long a Tab listens to the running system for names


def names_from_system(kind: str) -> Callable[..., list[str]]:
    """An argcomplete completer: the `kind` ("topic" or "service") names the system of
    the command line being completed (its --config, $MAILBUS_CONFIG_FILE or --demo)
    shows in traffic and announcements within LISTEN_S. Nothing if it cannot be
    reached: a Tab never prints an error into the shell."""

    def complete(prefix: str, parsed_args: argparse.Namespace, **_: object) -> list[str]:
        from mailbus import headers as H
        from mailbus.shell.presence_view import Presence
        from mailbus.shell.session import INTERNAL_PREFIX, deadline_after, open_system, traffic_of

        names: set[str] = set()
        presence = Presence()
        args = argparse.Namespace(**{"demo": False, "backlog": False, **vars(parsed_args)})
        try:
            with open_system(args, listen=True) as ctx:
                traffic = traffic_of(ctx)
                deadline = deadline_after(LISTEN_S)
                while (event := traffic.next(deadline)) is not None:
                    if presence.take(event):
                        continue
                    is_call = H.CLIENT_GID in event.headers
                    if is_call == (kind == "service"):
                        names.add(event.name)
        except Exception:
            return []
        names |= presence.services() if kind == "service" else presence.topics()
        return sorted(
            n for n in names if n.startswith(prefix) and not n.startswith(INTERNAL_PREFIX)
        )

    return complete


def complete_names(action: argparse.Action, kind: str) -> None:
    """Complete `action`'s value with `kind` names from the running system."""
    action.completer = names_from_system(kind)  # type: ignore[attr-defined]
