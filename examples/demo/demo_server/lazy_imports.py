"""Modules the origin's libraries import but its request path never uses: loaded on first use.

PyJWT imports ``cryptography.x509`` when it is imported (``from cryptography import
x509``), for keys given as X.509 certificates. The origin takes its keys from a JWKS
(``PyJWK``), so it never reads a certificate, and importing the module costs the cold
start about 14 ms (its name parser's regular expressions are compiled at import, 9 ms
of it). ``importlib.util.LazyLoader`` (the standard library's lazy import) runs such a
module's body on the first access to one of its attributes instead: whatever reads a
certificate later still gets the real module, only later. ``app`` imports this module
before PyJWT; a module already imported is left as it is.
"""

from __future__ import annotations

import importlib.util
import sys

DEFERRED = ("cryptography.x509",)


def defer(name: str) -> bool:
    """Make ``name`` load on first use. False, and nothing changed, when it is imported
    already or cannot be found."""
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)  # imports the parent package (small), not the module
    except ModuleNotFoundError:  # no parent package: nothing to defer, and nothing to fail on
        return False
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return False
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        # ``from parent import child`` then finds it on the package without touching it
        # (the import system reads ``__spec__`` of a module it finds only in sys.modules,
        # which would load it at once).
        setattr(sys.modules[parent], child, module)
    return True


for _name in DEFERRED:
    defer(_name)
