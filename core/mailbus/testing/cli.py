"""`mailbus test PATH`: run a folder of tests of a Mailbus system with the testing kit.

It is pytest with the kit's options spelt short: `--transport`, `--config`, `--seed`,
`--update`, and `--junit-xml FILE`, whose test cases carry each expectation's observed
latency as a property (`mailbus topic sensors/temp` = seconds). Anything after `--` goes
to pytest as it is. The exit status is pytest's (0 passed, 1 failed, ...).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

TRANSPORTS = ("inprocess", "postoffice", "mail")


def _kit_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("--transport", choices=TRANSPORTS, default=default("inprocess"))
    parser.add_argument(
        "--config",
        dest="test_config",
        metavar="FILE",
        help="your system's options",
        default=default(None),
    )
    parser.add_argument(
        "--junit-xml", metavar="FILE", help="write a JUnit XML report", default=default(None)
    )
    parser.add_argument(
        "--seed", type=int, help="the seed of every faults() call", default=default(None)
    )
    parser.add_argument(
        "--update", action="store_true", help="rewrite golden files", default=default(False)
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="only tests matching EXPR",
        default=default(None),
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "test",
        help="run the tests of a system built on Mailbus (pytest with mailbus.testing)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="test files or folders")
    _kit_options(parser)
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then pytest options")
    parser.set_defaults(handler=run_tests)


def lift_options(args: Any) -> None:
    """The kit's options given after the paths (`mailbus test tests --transport mail`):
    argparse hands everything after the first path to pytest; take ours back, up to a
    `--`, and leave the rest for pytest. After a `--` that follows the paths directly,
    argparse lists pytest's options among the paths: they go to pytest too."""
    paths = list(args.paths)
    cut = next((i for i, p in enumerate(paths) if p.startswith("-")), len(paths))
    args.paths, after_dashes = paths[:cut], paths[cut:]
    extra = list(args.pytest_args)
    cut = extra.index("--") if "--" in extra else len(extra)
    head, tail = extra[:cut], extra[cut + 1 :]
    late = argparse.ArgumentParser(add_help=False)
    _kit_options(late, defaults=False)
    given, rest = late.parse_known_args(head)
    for name, value in vars(given).items():
        setattr(args, name, value)
    args.pytest_args = rest + after_dashes + tail


def pytest_arguments(args: Any) -> list[str]:
    argv = [*args.paths, f"--mailbus-transport={args.transport}"]
    if args.test_config:
        argv.append(f"--mailbus-config={args.test_config}")
    if args.junit_xml:
        # xunit1: the family whose test cases may carry properties.
        argv += [f"--junitxml={args.junit_xml}", "-o", "junit_family=xunit1"]
    if args.seed is not None:
        argv.append(f"--mailbus-seed={args.seed}")
    if args.update:
        argv.append("--mailbus-update")
    if args.keyword:
        argv += ["-k", args.keyword]
    extra = list(args.pytest_args)
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        argv += ["-p", "mailbus.testing.plugin"]
    return argv + extra


def run_tests(args: Any) -> int:
    lift_options(args)
    if not args.paths:
        print("mailbus test: give a test file or folder before --", file=sys.stderr)
        return 2
    # A path may name one test: `tests/test_x.py::test_y` (pytest's node id).
    missing = [p for p in args.paths if not Path(p.split("::")[0]).exists()]
    if missing:
        print(f"mailbus test: no such file or folder: {missing[0]}", file=sys.stderr)
        return 2
    try:
        import pytest
    except ImportError:
        print("mailbus test needs pytest: pip install 'mailbus[test]'", file=sys.stderr)
        return 2
    return int(pytest.main(pytest_arguments(args)))
