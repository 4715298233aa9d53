"""``python -m dslab.cli``, as the ``dslab`` console script."""

import sys

from . import main

sys.exit(main())
