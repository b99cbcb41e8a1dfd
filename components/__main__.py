"""Entry point of the component provider (``PulumiPlugin.yaml`` ``main``).

The Pulumi engine runs this file to serve the components to programs in any
language; ``python -m components --schema`` prints the inferred schema and
``--write-schema`` refreshes the committed snapshot (``components/schema.json``).
"""

import sys
from pathlib import Path

# Run as a file by the language host, Python puts this folder first on sys.path, where
# packaging.py would shadow the `packaging` distribution the SDK imports: import from
# the package's root instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))


def run() -> None:
    from components.provider import main

    main(sys.argv[1:])


if __name__ == "__main__":
    run()
