"""Registers `mailbus topic`, `mailbus service` and `mailbus participant`. Imports only
argparse here: a command's own module is loaded when it runs, and none of them loads
polars, pyarrow or textual."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from mailbus.shell import participant, service, topic
    from mailbus.shell.session import ShellParser, add_common

    common = argparse.ArgumentParser(add_help=False)
    add_common(common)
    for name, module, text in (
        ("topic", topic, "list, echo, measure and publish topics (like ros2 topic)"),
        ("service", service, "list, call and watch services"),
        ("participant", participant, "the participants that announce themselves"),
    ):
        parser = sub.add_parser(name, help=text, description=text)
        actions = parser.add_subparsers(
            dest="action", metavar="ACTION", required=True, parser_class=ShellParser
        )
        module.register(actions, common)
