"""Sessions: a view of three panes, one per module (recording, playback with its
timeline, analysis launch)."""

from mailbus_workbench.model.session_control import default_directory, sessions_available
from mailbus_workbench.views.analysis import AnalysisScreen
from mailbus_workbench.views.sessions.view import SessionsView

__all__ = ["AnalysisScreen", "SessionsView", "default_directory", "sessions_available"]
