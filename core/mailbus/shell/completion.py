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
from collections.abc import Sequence

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
