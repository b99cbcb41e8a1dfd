"""The shipped CloudFront Function in JavaScript engines other than the local edge's, as separate
processes: njs (nginx's JavaScript engine, Debian's ``njs`` package: an interpreter,
the closest to CloudFront's runtime we can run) and Node.js with ``--jitless``.

A script is the runtime's stand-ins (``cloudfront_runtime.js`` beside this module: the
``cloudfront`` module; Buffer is the engine's own), the function as
``in_process.runnable_code`` makes it (the import line bound to the stand-in,
every other byte as shipped), then a driver. ``run_events`` runs a batch of events,
each with its KeyValueStore snapshot, and returns what the handler resolved to (or
what it threw), one process per batch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.edge_runtimes.in_process import runnable_code, runtime_js

BATCH_TIMEOUT_S = 120.0

# Prints a string for ``emitted``: njs's console.log cuts lines at 2048 bytes, so in
# ASCII-only pieces.
EMIT_JS = r"""
function __emit(s) {
  s = s.replace(/[\u007f-\uffff]/g, function (c) {
    return '\\u' + ('000' + c.charCodeAt(0).toString(16)).slice(-4);
  });
  for (var i = 0; i < s.length; i += 1000) console.log('__OUT__' + s.slice(i, i + 1000));
}
"""

_DRIVER = EMIT_JS + r"""
var __cases = JSON.parse(%s);
async function __main() {
  var out = [];
  for (var i = 0; i < __cases.length; i++) {
    __cf.__store(__cases[i].kvs);
    try {
      var r = await handler(__cases[i].event);
      out.push({result: r === undefined ? null : r});
    } catch (e) {
      out.push({threw: String(e)});
    }
  }
  __emit(JSON.stringify(out));
}
__main();
"""


@dataclass(frozen=True)
class Engine:
    name: str
    command: tuple[str, ...]

    def missing(self) -> str | None:
        """Why the engine cannot run here, or None."""
        if shutil.which(self.command[0]) is None:
            hint = " (apt-get install njs; scripts/env.sh installs it where apt works)" if self.command[0] == "njs" else ""
            return f"{self.command[0]} is not installed{hint}"
        return None

    def run_script(self, script: str, timeout_s: float = BATCH_TIMEOUT_S) -> str:
        """Run a script file in the engine; its standard output."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "function.js"
            path.write_text(script, encoding="utf-8")
            done = subprocess.run([*self.command, str(path)], capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout


NJS = Engine("njs", ("njs", "-q"))
NODE_JITLESS = Engine("node --jitless", ("node", "--jitless"))


def function_script(code: str, kvs_associated: bool = True) -> str:
    """The runtime's stand-ins, then the function as a plain engine runs it."""
    associate = f"__cf.__associate({json.dumps(kvs_associated)});\n"
    return runtime_js() + "\n" + associate + runnable_code(code) + "\n"


def run_events(engine: Engine, code: str, cases: Sequence[tuple[dict[str, Any], dict[str, Any] | None]]) -> list[dict[str, Any]]:
    """Each (event, KeyValueStore snapshot) through the handler, in one process:
    ``{"result": ...}`` or ``{"threw": message}`` per case."""
    payload = json.dumps([{"event": event, "kvs": kvs} for event, kvs in cases])
    out = engine.run_script(function_script(code) + _DRIVER % json.dumps(payload))
    results: list[dict[str, Any]] = emitted(engine, out)
    return results


def emitted(engine: Engine, out: str) -> Any:
    """The JSON a script printed with ``__emit`` (``EMIT_JS``)."""
    pieces = [line.removeprefix("__OUT__") for line in out.splitlines() if line.startswith("__OUT__")]
    if not pieces:
        raise RuntimeError(f"{engine.name} printed no results: {out[-2000:]}")
    return json.loads("".join(pieces))
