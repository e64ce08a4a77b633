"""`python -m mailbus_workbench` runs the `mailbus` command."""

import sys

from mailbus_workbench.cli import main

sys.exit(main())
