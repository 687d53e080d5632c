"""``python -m models.pipeline``: see :mod:`models.pipeline.scaling`."""

import sys

from .scaling import main

sys.exit(main())
