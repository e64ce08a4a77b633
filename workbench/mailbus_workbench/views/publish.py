"""Publish: a topic (completed from seen topics), a body, sent once or at a rate;
templates saved in a TOML file."""

from __future__ import annotations

import threading
import time
from typing import Final

from mailbus.errors import ConfigError, MailbusError
from mailbus.names import check_name
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Input, Label, Select, Static, TextArea
from textual.worker import get_current_worker

from mailbus_workbench.model.publish_form import JSON_STARTS, json_problem, parse_headers
from mailbus_workbench.model.settings import Template, load_templates, save_templates
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets.suggest import NameSuggester

MAX_RATE = 100_000.0


class PublishView(View):
    DEFAULT_FOCUS = "#publish-topic"
    HOME_FOCUS = "#publish-once"
    HELP = """\
## Publish
Type a topic (Tab or → accepts the completion from the topics seen), a body, and send
it once (**F5**) or at a rate in messages/s (**F6** starts and stops); both keys work
from the body too. Extra headers go under the body, one `Name: value` a line, checked
with the engine's rules before sending. A body that starts like JSON (`{`, `[`, `"`) but
is not JSON is flagged as you type; sending it asks for F5 (or F6) once more. Typing on
the template list types into the body. Templates: pick
one to fill the form; **Save template** stores the form under the name given, in the
templates file (`[workbench] templates`, default `~/.config/mailbus/templates.toml`).
"""
    BINDINGS = [
        # Priority: the body's TextArea binds F6 (select line) for itself.
        Binding("f5", "send_once", "Send", id="publish.send", priority=True),
        Binding("f6", "toggle_rate", "Start/stop rate", id="publish.rate", priority=True),
    ]
    DEFAULT_CSS = """
    PublishView Horizontal { height: auto; }
    PublishView Label { padding: 1 1 0 0; }
    #publish-topic { width: 1fr; }
    #publish-template { width: 30; }
    #publish-body { height: 1fr; }
    #publish-headers { height: 4; }
    #publish-check { height: 1; padding: 0 1; }
    #publish-rate { width: 14; }
    #publish-template-name { width: 24; }
    #publish-status { height: 2; padding: 0 1; }
    """

    class Published(Message):
        """The engine published the form's message (the publishing worker's result)."""

        def __init__(self, topic: str, message_id: str) -> None:
            super().__init__()
            self.topic: Final = topic
            self.message_id: Final = message_id

    class PublishFailed(Message):
        """The engine refused or failed a publish (a publishing worker's result)."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error: Final = error

    class Failed(Message):
        """Nothing was published: the form was refused or the publish failed."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error: Final = error

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.templates: list[Template] = []
        self.sent_at_rate = 0
        self._rate_stop: threading.Event | None = None
        self._rate_target = 0.0
        # A body that is not JSON, confirmed by pressing send again: sent as it is.
        self._confirmed_body: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("topic")
            yield Input(
                placeholder="topic to publish on, e.g. sensors/temperature",
                id="publish-topic",
                suggester=NameSuggester(lambda: self.parts.model.topics.stats),
            )
        yield TextArea("", id="publish-body", soft_wrap=True)
        yield Static("", id="publish-check", markup=False)
        yield TextArea(
            "",
            id="publish-headers",
            soft_wrap=True,
            placeholder="extra headers, one a line, e.g.  Lab-Run: 7",
        )
        with Horizontal():
            yield Button("Send once (F5)", id="publish-once", variant="primary")
            yield Label("rate/s")
            yield Input("10", id="publish-rate", type="number")
            yield Button("Start at rate (F6)", id="publish-start")
        # Templates come after the send keys: Tab goes topic, body, send.
        with Horizontal():
            yield Select[str]([], prompt="template", id="publish-template")
            yield Input(placeholder="template name", id="publish-template-name")
            yield Button("Save template", id="publish-save")
        yield Static("", id="publish-status", markup=False)

    def on_mount(self) -> None:
        self.reload_templates()

    def reload_templates(self) -> None:
        try:
            self.templates = load_templates(self.parts.settings.templates_file)
        except ConfigError as exc:
            self.templates = []
            self._status(Text(str(exc), style="red"))
        select = self.query_one("#publish-template", Select)
        select.set_options([(t.name, t.name) for t in self.templates])

    def _status(self, text: str | Text) -> None:
        # Literal text only: topics, errors and paths may hold "[...]" (Rich markup).
        self.query_one("#publish-status", Static).update(text)

    def _form(self) -> tuple[str, str, dict[str, str]] | None:
        topic = self.query_one("#publish-topic", Input).value.strip()
        body = self.query_one("#publish-body", TextArea).text
        if not topic:
            self._failed("Type a topic to publish on first.")
            return None
        try:
            check_name(topic, "topic")
            headers = parse_headers(self.query_one("#publish-headers", TextArea).text)
        except MailbusError as exc:
            self._status(Text(str(exc), style="red"))
            self.post_message(self.Failed(str(exc)))
            return None
        if self.parts.engine is None:
            self._status(Text("No engine: this workbench shows recorded data only.", style="red"))
            self.post_message(self.Failed("no engine"))
            return None
        problem = json_problem(body)
        if problem is not None and self._confirmed_body != body:
            self._confirmed_body = body
            self._failed(
                f"The body is not valid JSON ({problem}): press the key again to send it as it is."
            )
            return None
        return topic, body, headers

    @on(TextArea.Changed, "#publish-body")
    def _body_changed(self, event: TextArea.Changed) -> None:
        body = event.text_area.text
        problem = json_problem(body)
        check = self.query_one("#publish-check", Static)
        if problem is not None:
            check.update(Text(f"not JSON: {problem}", style="yellow"))
        elif body.lstrip().startswith(JSON_STARTS):
            check.update(Text("valid JSON", style="green"))
        else:
            check.update("")

    def on_key(self, event: events.Key) -> None:
        """Text typed on the template list is meant for the body: it goes there (a `:`
        in JSON would otherwise open the command palette, a digit switch views and take
        the rest). No key typed into the form leaves it; Escape does, to the send key."""
        if (
            event.is_printable
            and event.character is not None
            and self.app.focused is self.query_one("#publish-template", Select)
        ):
            event.stop()
            event.prevent_default()
            body = self.query_one("#publish-body", TextArea)
            body.focus()
            body.insert(event.character)

    @on(Select.Changed, "#publish-template")
    def _template_chosen(self, event: Select.Changed) -> None:
        for template in self.templates:
            if template.name == event.value:
                self.query_one("#publish-topic", Input).value = template.topic
                self.query_one("#publish-body", TextArea).text = template.body
                self.query_one("#publish-template-name", Input).value = template.name

    @on(Button.Pressed, "#publish-once")
    def action_send_once(self) -> None:
        form = self._form()
        if form is not None:
            self._publish(*form)

    @work(thread=True, group="publish")
    def _publish(self, topic: str, body: str, headers: dict[str, str]) -> None:
        engine = self.parts.engine
        assert engine is not None
        try:
            message_id = engine.publish(topic, body, headers)
        except MailbusError as exc:
            self.post_message(self.PublishFailed(str(exc)))
            return
        self.post_message(self.Published(topic, message_id))

    @on(Published)
    def _published(self, published: Published) -> None:
        self._status(
            Text.assemble("published on ", (published.topic, "bold"), f"  {published.message_id}")
        )

    @on(PublishFailed)
    def _publish_failed(self, failed: PublishFailed) -> None:
        self._failed(failed.error)

    def _failed(self, error: str) -> None:
        self._status(Text(error, style="red"))
        self.post_message(self.Failed(error))

    @on(Button.Pressed, "#publish-start")
    def action_toggle_rate(self) -> None:
        button = self.query_one("#publish-start", Button)
        if self._rate_stop is not None:
            self._rate_stop.set()
            self._rate_stop = None
            button.label = "Start at rate (F6)"
            self._status(f"stopped after {self.sent_at_rate} messages")
            return
        try:
            rate = float(self.query_one("#publish-rate", Input).value)
        except ValueError:
            rate = 0.0
        if not 0 < rate <= MAX_RATE:
            self._failed(f"rate must be more than 0 and at most {MAX_RATE:g} messages/s")
            return
        form = self._form()
        if form is None:
            return
        self._rate_stop = threading.Event()
        self._rate_target = rate
        self.sent_at_rate = 0
        button.label = "Stop (F6)"
        self._publish_at_rate(*form, rate, self._rate_stop)

    @property
    def publishing_at_rate(self) -> bool:
        return self._rate_stop is not None

    @work(thread=True, group="publish-rate")
    def _publish_at_rate(
        self,
        topic: str,
        body: str,
        headers: dict[str, str],
        rate: float,
        stop: threading.Event,
    ) -> None:
        engine = self.parts.engine
        assert engine is not None
        worker = get_current_worker()
        period = 1.0 / rate
        next_at = time.monotonic()
        while not stop.is_set() and not worker.is_cancelled:
            try:
                engine.publish(topic, body, headers)
            except MailbusError as exc:
                self.post_message(self.PublishFailed(str(exc)))
                return
            self.sent_at_rate += 1
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                stop.wait(delay)  # the pace of the stream, interruptible by Stop

    def refresh_view(self, now: float) -> None:
        if self._rate_stop is not None:
            self._status(f"publishing at {self._rate_target:g}/s: {self.sent_at_rate} sent")

    @on(Button.Pressed, "#publish-save")
    def save_template(self) -> None:
        name = self.query_one("#publish-template-name", Input).value.strip()
        topic = self.query_one("#publish-topic", Input).value.strip()
        body = self.query_one("#publish-body", TextArea).text
        if not name:
            self._failed("give the template a name")
            return
        try:
            check_name(topic, "topic")
            template = Template(name, topic, body)
            kept = [t for t in self.templates if t.name != name] + [template]
            save_templates(self.parts.settings.templates_file, kept)
        except (MailbusError, OSError) as exc:
            self._failed(f"cannot save the template: {exc}")
            return
        self.reload_templates()
        self._status(
            Text.assemble(
                "template ", (name, "bold"), f" saved to {self.parts.settings.templates_file}"
            )
        )

    def on_unmount(self) -> None:
        if self._rate_stop is not None:
            self._rate_stop.set()
