"""`Monitor`: a live view of a context's traffic in a notebook cell (anywidget), and the
cell-side actions (publish, call, record) with rich results.

The trace listener only feeds a `MonitorModel`; one daemon thread pushes a snapshot to
the browser at most `update_hz` times per second (default 4, at most 20), so the kernel
is never flooded whatever the message rate. Creating a new Monitor on the same context
(re-running the cell) stops the previous one; so do `stop()`, closing the widget and
the kernel's exit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from mailbus.context import Context
from mailbus.demo import DemoSystem
from mailbus.errors import ServiceTimeoutError
from mailbus.extras import needs_extra, require
from mailbus.notebook.model import DEFAULT_MAX_EVENTS, DEFAULT_WINDOW_S, MonitorModel
from mailbus.notebook.pacing import UpdatePacer
from mailbus.notebook.results import CallResult, Published
from mailbus.sessions.recorder import Recorder
from mailbus.sessions.secrets import context_secrets

with needs_extra("mailbus.notebook", "notebook"):
    import polars as pl

DEFAULT_UPDATE_HZ = 4.0
_ESM = (Path(__file__).with_name("monitor.js")).read_text(encoding="utf-8")
# One live monitor per context, and per notebook cell: a re-run cell replaces, never
# doubles, the listener (and the demo it started).
_LIVE: weakref.WeakValueDictionary[int, Monitor] = weakref.WeakValueDictionary()
_BY_CELL: weakref.WeakValueDictionary[str, Monitor] = weakref.WeakValueDictionary()
_cell = {"id": "", "hooked": False}


def _on_pre_run_cell(info: Any) -> None:
    """IPython's pre_run_cell event: which cell runs (front ends that send a cell id)."""
    _cell["id"] = getattr(info, "cell_id", None) or ""


def _hook_cells() -> None:
    if _cell["hooked"]:
        return
    _cell["hooked"] = True
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.events.register("pre_run_cell", _on_pre_run_cell)


@cache
def widget_class() -> type[Any]:
    """The anywidget class behind Monitor, made on first use: anywidget comes with the
    `notebook` extra, which the workbench's own install does not have."""
    anywidget = require("anywidget", "notebook", "mailbus.notebook's live widget")
    traitlets = require("traitlets", "notebook", "mailbus.notebook's live widget")

    class MonitorWidget(anywidget.AnyWidget):  # type: ignore[misc, name-defined]
        _esm = _ESM
        snapshot = traitlets.Dict().tag(sync=True)
        selected = traitlets.Unicode("").tag(sync=True)
        fields = traitlets.List(traitlets.Unicode()).tag(sync=True)
        updates = traitlets.Int(0).tag(sync=True)
        # live, paused (the browser's button or monitor.pause()) or stopped
        state = traitlets.Unicode("live").tag(sync=True)
        paused = traitlets.Bool(False).tag(sync=True)
        seen = traitlets.Int(0).tag(sync=True)  # events counted, sent while paused too
        update_hz = traitlets.Float(DEFAULT_UPDATE_HZ).tag(sync=True)
        stopped_at = traitlets.Unicode("").tag(sync=True)  # wall clock, HH:MM:SS

        def __init__(self, on_close: Callable[[], None]) -> None:
            super().__init__()
            self._on_close = on_close

        def close(self) -> None:  # closing the widget stops its monitor
            self._on_close()
            super().close()

    return MonitorWidget


class Monitor:
    """Watch `context` live: `Monitor(ctx)`, `Monitor.demo()` or `Monitor.from_options(path)`.
    Shown in a cell, it displays its widget (`monitor.widget`)."""

    def __init__(
        self,
        context: Context,
        *,
        fields: Iterable[str] = (),
        update_hz: float = DEFAULT_UPDATE_HZ,
        window_s: float = DEFAULT_WINDOW_S,
        max_events: int = DEFAULT_MAX_EVENTS,
        owns_context: bool = False,
        demo: DemoSystem | None = None,
    ) -> None:
        self.widget = widget_class()(self.stop)
        self.context = context
        self.model = MonitorModel(
            window_s=window_s,
            max_events=max_events,
            secrets=context_secrets(context.options),
        )
        self._pacer = UpdatePacer(update_hz)
        self.widget.update_hz = update_hz
        self._owns_context = owns_context
        self._demo = demo
        self._stop = threading.Event()
        self._stopped = False
        self._stop_lock = threading.Lock()
        _hook_cells()
        self._cell_id = str(_cell["id"])
        for previous in (_LIVE.get(id(context)), _BY_CELL.get(self._cell_id)):
            if previous is not None:
                previous.stop()
        _LIVE[id(context)] = self
        if self._cell_id:
            _BY_CELL[self._cell_id] = self
        self._detach = context.tracer.add_listener(self.model.listener)
        for spec in fields:
            self.watch(spec)
        self._thread = threading.Thread(target=self._push, name="mailbus-monitor", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def demo(cls, *, speed: float = 1.0, seed: int | None = None, **kwargs: Any) -> Monitor:
        """An in-process context running the built-in demo; `stop()` ends both."""
        widget_class()  # without the extra, fail before starting anything
        context = Context().init()
        system = DemoSystem(context, speed=speed, seed=seed)
        monitor = cls(context, owns_context=True, demo=system, **kwargs)
        system.start()
        return monitor

    @classmethod
    def from_options(
        cls, path: str | os.PathLike[str], *, topics: Iterable[str] = (), **kwargs: Any
    ) -> Monitor:
        """A context from an options file, subscribed to `topics` so their messages arrive."""
        from mailbus.options import load_options

        widget_class()  # without the extra, fail before connecting
        context = Context(load_options(path)).init()
        try:
            for topic in topics:
                context.subscription(topic)
        except BaseException:
            context.shutdown()
            raise
        return cls(context, owns_context=True, **kwargs)

    # -- the live view -----------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def snapshot(self) -> dict[str, Any]:
        """What the browser was last sent."""
        return dict(self.widget.snapshot)

    @property
    def updates(self) -> int:
        return int(self.widget.updates)

    @property
    def fields(self) -> list[str]:
        return list(self.widget.fields)

    @property
    def selected(self) -> str:
        """The topic picked in the browser (its latest message is shown)."""
        return str(self.widget.selected)

    @selected.setter
    def selected(self, topic: str) -> None:
        self.widget.selected = topic

    @property
    def paused(self) -> bool:
        """Paused, the widget keeps what it shows; counting goes on and is shown on resume."""
        return bool(self.widget.paused)

    def pause(self) -> None:
        self.widget.paused = True

    def resume(self) -> None:
        self.widget.paused = False

    def watch(self, spec: str) -> None:
        """Chart a numeric JSON field, e.g. 'robot/pose.x', from now on."""
        self.model.watch_field(spec)
        self.widget.fields = self.model.fields

    def unwatch(self, spec: str) -> None:
        self.model.unwatch_field(spec)
        self.widget.fields = self.model.fields

    def _push(self) -> None:
        pacer = self._pacer
        while not self._stop.is_set():
            now = time.monotonic()
            if pacer.due(now):
                try:
                    widget = self.widget
                    if widget.paused:
                        widget.state = "paused"
                    else:
                        widget.snapshot = self.model.snapshot(widget.selected)
                        widget.updates = pacer.sent
                        widget.state = "live"
                    widget.seen = self.model.seen
                except Exception:  # a closed comm at kernel exit: stop quietly
                    if self._stop.is_set():
                        return
                    raise
            self._stop.wait(pacer.wait_s(time.monotonic()))

    @property
    def running(self) -> bool:
        return not self._stopped

    def stop(self) -> None:
        """Detach from the context and stop pushing (and stop the demo and the context
        this monitor made). Safe to call more than once."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        self._stop.set()
        self._detach()
        if threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        with contextlib.suppress(Exception):  # the widget closed, or the kernel exiting
            widget = self.widget
            widget.snapshot = self.model.snapshot(widget.selected)
            widget.seen = self.model.seen
            widget.stopped_at = time.strftime("%H:%M:%S")
            widget.state = "stopped"
        if self._demo is not None:
            self._demo.stop()
        if self._owns_context and self.context.is_initialized:
            self.context.shutdown()
        if _LIVE.get(id(self.context)) is self:
            del _LIVE[id(self.context)]
        if self._cell_id and _BY_CELL.get(self._cell_id) is self:
            del _BY_CELL[self._cell_id]
        atexit.unregister(self.stop)

    def close(self) -> None:
        """Stop, and close the widget in the browser."""
        self.widget.close()

    def to_test(
        self,
        path: str | os.PathLike[str],
        *,
        topic: str | None = None,
        service: str | None = None,
        start: Sequence[tuple[str, Sequence[str]]] = (),
    ) -> Path:
        """Write a pytest file from what the monitor saw and return its path: with
        `service`, a test that calls it with the latest answered request and expects a
        response like the one seen; else a test that expects a message like the latest on
        `topic` (default: the selected topic). Either sends first what this context sent
        before (the inputs that led to it) and leaves out fields that change between runs.
        `start`: the participants the test starts first, as `(command, ready)` pairs
        (docs/testing-your-system.md). An existing file is never replaced."""
        from mailbus.testing.codegen import call_test, inputs_from_trace, message_test

        if service is not None:
            call = self.model.latest_call(service)
            if call is None:
                raise ValueError(f"no answered call to {service!r} seen yet")
            inputs = inputs_from_trace(self.model.traced(), service=service)
            source = call_test(service, call[0], call[1], start=start, inputs=inputs)
        else:
            name = topic or self.selected
            body = self.model.latest_body(name) if name else None
            if body is None:
                raise ValueError(f"no message on {name!r} seen yet" if name else "select a topic")
            inputs = inputs_from_trace(self.model.traced(), topic=name)
            source = message_test(name, body, start=start, inputs=inputs)
        target = Path(path)
        with target.open("x", encoding="utf-8") as out:
            out.write(source)
        return target

    # -- data --------------------------------------------------------------------------
    def frame(self, topic: str | None = None, last: int | None = None) -> pl.DataFrame:
        """What the monitor has kept, with a recording's columns (newest `last` rows)."""
        return self.model.frame(topic, last)

    def services(self) -> pl.DataFrame:
        """Calls seen, paired with their responses: latency (rtt_ms) and status."""
        return self.model.services()

    # -- driving -----------------------------------------------------------------------
    def publish(self, topic: str, body: str | dict[str, Any] | list[Any]) -> Published:
        text = body if isinstance(body, str) else json.dumps(body)
        message_id = self.context.publisher(topic).publish(text)
        return Published(topic, text, message_id)

    def call(
        self, service: str, body: str | dict[str, Any] | list[Any], timeout: float = 5.0
    ) -> CallResult:
        """Call `service`; a timeout is a result (status 'timeout'), not an exception."""
        text = body if isinstance(body, str) else json.dumps(body)
        client = self.context.client(service)
        started = time.perf_counter()
        try:
            response = client.call(text, timeout)
        except ServiceTimeoutError:
            latency = (time.perf_counter() - started) * 1e3
            return CallResult(service, text, None, latency, "", "", "", "timeout")
        finally:
            client.close()
        latency = (time.perf_counter() - started) * 1e3
        request_id = response.in_reply_to
        return CallResult(
            service,
            text,
            response.body,
            latency,
            request_id,
            response.email.message_id,
            response.in_reply_to,
            "answered",
        )

    @contextlib.contextmanager
    def record(self, directory: str | os.PathLike[str], **options: Any) -> Iterator[Recorder]:
        """`with monitor.record("dir"):` records the context's traffic meanwhile to a
        session directory (open it with `mailbus.sessions.reader.open_session`, the
        analysis or the workbench)."""
        recorder = Recorder(directory, context=self.context, **options)
        try:
            yield recorder
        finally:
            recorder.stop()
