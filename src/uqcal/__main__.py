"""`python -m uqcal`: the `uqcal` command."""

import sys

from uqcal.cli import main

sys.exit(main())
