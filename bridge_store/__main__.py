"""``python -m bridge_store`` is the ``bridge-store`` command."""

import sys

from .entry import main

sys.exit(main())
