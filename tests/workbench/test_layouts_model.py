"""The layout model without a terminal: TOML that reads back equal, and every bad file
refused with the key and the reason."""

from __future__ import annotations

import pytest
from mailbus_workbench.model.layout import (
    MAX_FIND_QUERIES,
    Layout,
    LayoutError,
    check_layout_name,
    layout_from_toml,
    layout_to_toml,
    remember_query,
)

VIEWS = ("topics", "services", "plot")


def test_a_layout_reads_back_equal() -> None:
    layout = Layout(
        view="plot",
        plot_series=("robot/pose.x", 'lab/cfg["gain.k"]', "rate(a/b)"),
        plot_window_s=60.0,
        plot_axes="per-unit",
        filters={"topics": 'rob "quoted" \\ back', "services": "demo"},
        find_queries=("celsius>25", "/x+/"),
        widths={"topics-left": 42},
        pinned=("robot/pose",),
    )
    text = layout_to_toml(layout)
    assert layout_from_toml(text, source="f", views=VIEWS) == layout


def test_an_empty_file_is_the_default_layout() -> None:
    assert layout_from_toml("", source="f", views=VIEWS) == Layout()


def test_find_queries_keep_the_newest_once() -> None:
    queries = remember_query(remember_query(remember_query((), "a"), "b"), "a")
    assert queries == ("a", "b") and remember_query(queries, "") == queries
    for i in range(50):
        queries = remember_query(queries, str(i))
    assert len(queries) == MAX_FIND_QUERIES and queries[0] == "49"


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("view = [", "f", "not valid TOML"),
        ("version = 2", "f: version", "reads version 1"),
        ("colour = 1", "f: colour", "unknown key"),
        ('view = "nowhere"', "f: view", "is no view"),
        ("view = 3", "f: view", "is no view"),
        ("[plot]\nwindow_s = 0", "f: plot.window_s", "expected seconds"),
        ("[plot]\nwindow_s = nan", "f: plot.window_s", "expected seconds"),
        ("[plot]\nwindow_s = true", "f: plot.window_s", "expected seconds"),
        ('[plot]\naxes = "round"', "f: plot.axes", "expected one of"),
        ('[plot]\nseries = "robot/pose.x"', "f: plot.series", "expected a list"),
        ("[plot]\nseries = [1]", "f: plot.series", "expected text"),
        ('[plot]\nseries = ["a\\u0000b"]', "f: plot.series", "control character"),
        ("[plot]\nzoom = 1", "f: plot.zoom", "unknown key"),
        ("plot = 1", "f: plot", "expected a table"),
        ('[filters]\nlog = "x"', "f: filters.log", "unknown key"),
        ("[filters]\ntopics = 1", "f: filters.topics", "expected text"),
        ("[widths]\ntopics-left = 2", "f: widths.topics-left", "cells"),
        ("[widths]\ntopics-left = 2.5", "f: widths.topics-left", "whole number"),
        ('pinned = ["a\\nb"]', "f: pinned", "control character"),
        ('pinned = [""]', "f: pinned", "topic"),
        (f"find = {['q'] * (MAX_FIND_QUERIES + 1)!r}", "f: find", "at most"),
    ],
)
def test_a_bad_file_is_refused_with_the_key_and_the_reason(
    text: str, where: str, says: str
) -> None:
    with pytest.raises(LayoutError) as caught:
        layout_from_toml(text, source="f", views=VIEWS)
    assert caught.value.key == where
    assert says in str(caught.value) and str(caught.value).startswith(where + ": ")


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "a..b", "x" * 65, "a b", "é"])
def test_a_name_that_cannot_be_a_file_is_refused(name: str) -> None:
    with pytest.raises(LayoutError, match="not a layout name"):
        check_layout_name(name)


@pytest.mark.parametrize("name", ["poses", "team-2", "a.b_c", "X" * 64])
def test_good_names(name: str) -> None:
    assert check_layout_name(name) == name
