"""The component package's entry point: the Pulumi engine starts it to serve the
components to programs in any language.

The Python language host runs this folder (``python <this folder> [flags] <engine
address>``, from the engine's working directory), so Python puts this folder, not the
repository, first on ``sys.path``: the repository root goes there so that the
components import as they do in the program.
"""

import sys
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    sys.path.insert(0, str(REPOSITORY_ROOT))
    from pulumi.provider.experimental import component_provider_host

    from components.provider import COMPONENTS, PACKAGE, VERSION

    # Reads the engine's address from the command line, serves on a loopback port and
    # prints it, as the engine expects.
    component_provider_host(list(COMPONENTS), PACKAGE, version=VERSION)


if __name__ == "__main__":
    main()
