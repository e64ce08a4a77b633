"""A library of a missing extra is reported with the extra to install."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest
from mailbus.cli import run
from mailbus.extras import EXTRA_OF, MissingExtra, missing_extra, needs_extra, require


def test_an_import_in_the_block_names_the_extra_of_the_missing_library() -> None:
    with pytest.raises(MissingExtra) as caught, needs_extra("mailbus.sessions"):
        raise ModuleNotFoundError("No module named 'polars.io'", name="polars.io")
    assert caught.value.extra == "sessions"
    assert caught.value.name == "polars"
    assert "mailbus.sessions needs 'polars'" in str(caught.value)
    assert "pip install 'mailbus[sessions]'" in str(caught.value)
    assert isinstance(caught.value, ModuleNotFoundError)  # `except ImportError` still works


def test_the_block_may_name_the_extra_itself() -> None:
    with pytest.raises(MissingExtra, match=r"mailbus\[notebook\]"), needs_extra("x", "notebook"):
        raise ModuleNotFoundError("No module named 'polars'", name="polars")


def test_a_module_no_extra_provides_is_reported_as_it_is() -> None:
    with pytest.raises(ModuleNotFoundError) as caught, needs_extra("mailbus.sessions"):
        raise ModuleNotFoundError("No module named 'mailbus.nothing'", name="mailbus.nothing")
    assert not isinstance(caught.value, MissingExtra)
    assert missing_extra(caught.value, "anything") is None


def test_an_inner_report_is_kept_as_it_is() -> None:
    inner = MissingExtra("pyarrow", "sessions", "mailbus.sessions.schema")
    with pytest.raises(MissingExtra) as caught, needs_extra("mailbus.notebook", "notebook"):
        raise inner
    assert caught.value is inner


def test_require_imports_or_names_the_extra() -> None:
    assert require("json", "sessions", "x").dumps(1) == "1"
    with pytest.raises(MissingExtra, match=r"needs 'no_such_module_x' from the `spark` extra"):
        require("no_such_module_x", "spark", "needs")


def test_every_extra_named_is_one_pyproject_declares() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_OF.values()) <= set(declared)


def _command_raising(
    exc: ModuleNotFoundError,
) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    def handler(args: argparse.Namespace) -> int:
        raise exc

    return argparse.Namespace(command="record", handler=handler), argparse.ArgumentParser()


def test_the_command_names_the_extra_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args, parser = _command_raising(
        ModuleNotFoundError("No module named 'pyarrow'", name="pyarrow")
    )
    assert run(args, parser) == 2
    err = capsys.readouterr().err
    assert err.startswith("mailbus: `mailbus record` needs 'pyarrow' from the `sessions` extra")
    assert "pip install 'mailbus[sessions]'" in err


def test_the_command_lets_any_other_missing_module_through() -> None:
    args, parser = _command_raising(ModuleNotFoundError("No module named 'x.y'", name="x.y"))
    with pytest.raises(ModuleNotFoundError, match=r"x\.y"):
        run(args, parser)
