import sys

from mailbus.cli import main

sys.exit(main())
