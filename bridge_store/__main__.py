"""``python -m bridge_store`` is the ``bridge-store`` command."""

import sys

from .cli import main

sys.exit(main())
