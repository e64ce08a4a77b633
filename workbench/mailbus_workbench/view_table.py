"""The workbench's views in tab order, the app's own keys and its help text (the app
module holds the behaviour)."""

from __future__ import annotations

from textual.binding import Binding

from mailbus_workbench.views.base import View
from mailbus_workbench.views.broker import BrokerView
from mailbus_workbench.views.caller import CallerView
from mailbus_workbench.views.log import LogView
from mailbus_workbench.views.mailboxes import MailboxesView
from mailbus_workbench.views.participants import ParticipantsView
from mailbus_workbench.views.plot import PlotView
from mailbus_workbench.views.publish import PublishView
from mailbus_workbench.views.queues import QueuesView
from mailbus_workbench.views.services import ServicesView
from mailbus_workbench.views.sessions import SessionsView
from mailbus_workbench.views.tests import TestsView
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.views.waitsets import WaitSetsView

GLOBAL_HELP = """\
# Mailbus workbench

## Everywhere
- **1** to **9**, then **0**, switch views ({views}); in a text field, where digits are typed,
  press **escape** first; or click a tab
- **N** (shift+n) the Participants view: every process that announces itself
- **P** (shift+p) the Plot view: fields, rates and latencies over time
- **T** (shift+t) the Tests view: run a folder of tests against this system; **t** on a
  message (Topics) or a call (Services, Call), **F4** on an open session, saves a test
- **ctrl+p** or **:** command palette (themes, screenshot, every command)
- **ctrl+f** find messages in every topic (text, `/regex/`, `Header=value`, `celsius>25`)
- **F1** or **?** this help
- **F12** save an SVG screenshot
- **q** or **ctrl+q** quit

Keys can be changed in `{keymap}`: a `[keys]` table of binding id = "key", for example
`"topics.pause" = "space"`. Binding ids: {ids}.
"""


# Each view: its id (the tab's and the key binding's), its title, its class. Keys 1-9, 0
# follow this order.
VIEWS: tuple[tuple[str, str, type[View]], ...] = (
    ("topics", "Topics", TopicsView),
    ("services", "Services", ServicesView),
    ("waitsets", "Wait sets", WaitSetsView),
    ("publish", "Publish", PublishView),
    ("call", "Call", CallerView),
    ("queues", "Queues", QueuesView),
    ("broker", "Broker", BrokerView),
    ("mailboxes", "Mailboxes", MailboxesView),
    ("sessions", "Sessions", SessionsView),
    ("log", "Log", LogView),
    ("participants", "Participants", ParticipantsView),  # past the digits: key N
    ("plot", "Plot", PlotView),  # key P
    ("tests", "Tests", TestsView),  # key T
)


APP_BINDINGS: list[Binding] = [
    *(
        Binding(str(n % 10), f"show('{v}')", title, id=f"view.{v}")
        for n, (v, title, _) in enumerate(VIEWS[:10], 1)  # 1-9, then 0
    ),
    # Past the ten digits: N as in `ros2 node list`.
    Binding("N", "show('participants')", "Participants", show=False, id="view.participants"),
    Binding("P", "show('plot')", "Plot", show=False, id="view.plot"),
    Binding("T", "show('tests')", "Tests", show=False, id="view.tests"),
    # In a text field digits are typed: escape leaves the field, then they switch. The
    # key bar shows it only there (WorkbenchApp.check_action), in place of the view keys.
    Binding("escape", "leave_field", "Leave field", id="leave"),
    Binding("f1,question_mark", "help", "Help", id="help"),
    Binding("colon", "command_palette", "Commands", show=False, id="palette"),
    # Any binding to the palette action makes Textual drop its own ctrl+p: keep it,
    # with priority so it also works from a text field (where ':' is typed).
    Binding("ctrl+p", "command_palette", "Commands", show=False, priority=True, id="palette.ctrl"),
    # Priority: a screenshot is wanted most when help, the palette or a dialog is up.
    Binding("f12", "save_svg", "Screenshot", show=False, priority=True, id="screenshot"),
    Binding("q", "quit", "Quit", id="quit"),
    # Priority: Find opens from a text field too.
    Binding("ctrl+f", "find", "Find", show=False, priority=True, id="find"),
]
