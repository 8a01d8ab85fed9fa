"""`python -m tdsl ...`: the command line, the same as the `tdsl` script."""

import sys

from tdsl.compiler.driver.cli import main

sys.exit(main())
