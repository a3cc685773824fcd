import sys

from uqcal.cli import main

sys.exit(main())
