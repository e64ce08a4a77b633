"""`python -m mailbus_workbench` runs the `mailbus` command."""

import sys

from mailbus.cli import main

sys.exit(main())
