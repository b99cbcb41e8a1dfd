"""``python -m review.contracts``: see the package docstring."""

import sys

from review.contracts import main

sys.exit(main())
