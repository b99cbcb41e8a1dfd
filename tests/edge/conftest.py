from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from devkit.shipped import ViewerFunction, load_router, router_zip, viewer_function_resource
from tests.harness import ProgramRun


@pytest.fixture(scope="session")
def viewer(prod: ProgramRun) -> Iterator[ViewerFunction]:
    """The prod stack's CloudFront Function, exactly as the program uploads it."""
    function = ViewerFunction(viewer_function_resource(prod).inputs["code"])
    yield function
    function.close()


@pytest.fixture(scope="session")
def router(prod: ProgramRun) -> ModuleType:
    """The prod stack's geo-router, imported from the package the program uploads."""
    return load_router(router_zip(prod))
