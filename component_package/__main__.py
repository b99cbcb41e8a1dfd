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
    from pulumi.provider import main as serve

    from components.provider import component_provider

    # What the SDK's component_provider_host does, with the provider that checks raw inputs
    # against the schema: reads the engine's address from the command line, serves on a
    # loopback port and prints it, as the engine expects.
    serve(component_provider(), sys.argv[1:])


if __name__ == "__main__":
    main()
