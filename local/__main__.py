"""``python -m local``: the whole stack on this machine.

    python -m local up [--stack prod|PATH] [--edge-port 8400] [--base-port 8401] [--origin-instances 2]
                       [--probe-interval SECONDS] [--default-country CC] [--retry-delay SECONDS]
                       [--token-lifetime SECONDS] [--consent] [--trust-ca PEM]
    python -m local token [--client local-dev] [--scope SCOPES]   # a bearer token from the running dev issuer
    python -m local client [--oauth|--browser] [--mode auto|legacy] [--tool NAME] [--args JSON] [--country CC]
    python -m local fail REGION [--mode stop|error|hang] [--for SECONDS]   # fail an origin of the running topology
    python -m local restore REGION                                        # and bring it back
    python -m local explain                          # what differs from AWS, and why

Every command prints a short message and exits non-zero when it cannot do what it was
asked (``--debug`` shows the traceback instead).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from local.control import ControlServer, Operator, control_socket_in, request
from local.faults import MODES
from local.first_look import FirstLook, Tool, fail_lines, first_look, new_notices, try_lines
from local.oauth.issuer import DEFAULT_TOKEN_LIFETIME_S
from local.plan import (
    DEFAULT_BASE_PORT,
    DEFAULT_EDGE_PORT,
    DEFAULT_ORIGIN_INSTANCES,
    DEV_CLIENT_ID,
    LOCAL_DIFFERENCES,
    LocalPlan,
    Options,
    PlanError,
    default_run_dir,
    plan_file_in,
)
from local.supervisor import PortInUseError, ServiceFailedError
from stack_config.checks import ConfigError
from stack_config.loading import StackFileError


def _country(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z]{2}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO 3166-1 alpha-2 country code like DE or JP")
    return value.upper()


def _port(value: str) -> int:
    port = int(value)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port")
    return port


def _lifetime(value: str) -> int:
    seconds = int(value)
    if not 5 <= seconds <= 86400:
        raise argparse.ArgumentTypeError("must be between 5 and 86400 seconds")
    return seconds


def _instances(value: str) -> int:
    count = int(value)
    if not 1 <= count <= 8:
        raise argparse.ArgumentTypeError("must be between 1 and 8")
    return count


def _positive(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return number


def _run_dir_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", default="prod", help="stack file Pulumi.<stack>.yaml (default: prod)")
    p.add_argument("--run-dir", type=Path, help="where the running topology keeps its state (default: .local/<stack>)")


def _plan(args: argparse.Namespace) -> LocalPlan:
    path = plan_file_in(args.run_dir or default_run_dir(args.stack))
    if not path.exists():
        raise SystemExit(f"no local topology for stack {args.stack!r} ({path} is missing): start it with "
                         f"scripts/run-local --stack {args.stack}")
    try:
        return LocalPlan.read(path)
    except PlanError as exc:
        raise SystemExit(str(exc)) from None


def banner(plan: LocalPlan, tools: Sequence[Tool] | None = None) -> str:
    """What is up and what to try: suggestions for what this server has (``tools``, from
    ``first_look``; None when unknown) and regions this stack has."""
    stack = "" if plan.stack == "prod" else f" --stack {plan.stack}"
    origins = "\n".join(f"  origin {o.region:<16} {o.url}{plan.server.get('path') or plan.mcp_path}"
                         + (f"  (+{len(o.extra_ports)} more instance{'s' if len(o.extra_ports) > 1 else ''}: "
                            f"{', '.join(map(str, o.extra_ports))})" if o.extra_ports else "")
                         for o in plan.origins)
    kvs = f"\n  region health store     {plan.kvs_url}  (CloudFront KeyValueStore)" if plan.health_store else ""
    tries = "\n".join(try_lines(stack, tools, plan.regions, plan.default_region))
    fails = "\n".join(fail_lines(stack, plan.regions, plan.default_region))
    return f"""
Local topology of stack '{plan.stack}' is up ({len(plan.regions)} regions, probes from {len(plan.probe_regions)}).

  MCP endpoint (edge)     {plan.mcp_url}
  status page             {plan.status_url}
  dev OAuth issuer        {plan.issuer.issuer}  (token endpoint {plan.issuer.token_url})
  OAuth clients           no token needed: they follow the 401 to the issuer (code + PKCE, registration)
  AWS emulator (moto)     {plan.moto_url}{kvs}
{origins}

Try it (another terminal):
{tries}
  TOKEN=$(scripts/run-local token{stack})
  curl -s -X POST {plan.mcp_url} -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \\
       -H 'accept: application/json, text/event-stream' -H 'cloudfront-viewer-country: DE' \\
       -d '{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"curl","version":"1"}}}}}}' -i

{fails}

Logs: {plan.run_dir}/logs/   Ctrl-C stops everything.
"""


def _first_look(plan: LocalPlan) -> FirstLook:
    """The server's tools and manner, from one handshake through the edge (never raises)."""
    from local.plan import token_for

    try:
        token = token_for(plan)
    except (SystemExit, Exception) as exc:  # the issuer is up, but a run-local must never fail here
        logging.getLogger(__name__).warning("no token for the first look at the server: %s", exc)
        return FirstLook(None)
    look = first_look(plan.mcp_url, token)
    if look.problem:
        logging.getLogger(__name__).info("first look at the server: %s", look.problem)
    return look


def _print_notices(folder: Path, printed: set[str]) -> None:
    """What the Function URLs noticed of the server (functions/probe/advice.py), once each."""
    for notice in new_notices(folder, printed):
        print(f"warning: {notice}\n", file=sys.stderr, flush=True)


class Progress:
    """Prints ``what`` with the seconds elapsed every ``every_s`` seconds while the block runs."""

    def __init__(self, what: str, every_s: float = 10.0, out: Any = None):
        self.what, self.every_s, self.out = what, every_s, out
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.started = time.monotonic()

    def _tick(self) -> None:
        while not self.done.wait(self.every_s):
            print(f"{self.what} ({time.monotonic() - self.started:.0f} s)", file=self.out or sys.stderr, flush=True)

    def __enter__(self) -> Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(timeout=1)


def quiet_console() -> None:
    """Warnings and errors only on the console; everything else goes to the run's log
    (``Topology.prepare`` adds it), as every child's output goes to its own."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", force=True)
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.WARNING)


def cmd_up(args: argparse.Namespace) -> int:
    from local.plan import PlanError, build_plan
    from local.topology import Topology

    options = Options(stack=args.stack, edge_port=args.edge_port, base_port=args.base_port,
                      probe_interval_s=args.probe_interval, default_country=args.default_country,
                      retry_delay_s=args.retry_delay, run_dir=args.run_dir, token_lifetime_s=args.token_lifetime,
                      consent=args.consent, trusted_ca_file=str(args.trust_ca) if args.trust_ca else None,
                      origin_instances=args.origin_instances)
    print(f"==> running the program for stack {args.stack!r} under mocks (names, edge code, schedules; the first "
          "run also builds the function packages, which takes a few minutes)...", file=sys.stderr, flush=True)
    try:
        with Progress("    still running the program under mocks"):
            plan = build_plan(options)
    except (ConfigError, StackFileError, PlanError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    quiet_console()
    topology = Topology(plan)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"==> starting {len(plan.origins)} origins, the edge, the issuer, the emulator and "
          f"{len(plan.functions)} functions...", file=sys.stderr, flush=True)
    try:
        topology.start()
    except PortInUseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except ServiceFailedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    operator = Operator(topology.faults)

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        answer = operator.handle(req)
        if req.get("op") in ("fail", "restore"):
            print(f"==> {answer['message']}" if answer["ok"] else f"refused: {answer['error']}",
                  file=sys.stderr, flush=True)
        return answer

    control = ControlServer(control_socket_in(plan.run_dir), handle)
    try:
        look = _first_look(plan)
        print(banner(plan, look.tools), flush=True)
        noticed: set[str] = set()
        _print_notices(topology.notices_dir, noticed)
        reported: set[str] = set()
        while not stop.is_set():
            _print_notices(topology.notices_dir, noticed)
            control.pump(1.0)  # fail/restore run here: a child dies with the thread that started it
            for message in operator.tick():
                print(f"==> {message}", file=sys.stderr, flush=True)
            for service in topology.supervisor.exited():
                if service.spec.name not in reported:
                    reported.add(service.spec.name)
                    print(f"warning: {service.spec.name} exited with code {service.process.returncode}; "
                          f"log: {service.log_path}", file=sys.stderr, flush=True)
    finally:
        print("\n==> stopping every process...", file=sys.stderr, flush=True)
        started = time.monotonic()
        control.close()
        topology.stop()
        print(f"==> stopped ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from local.plan import token_for

    print(token_for(_plan(args), args.client, args.scope))
    return 0


def cmd_client(args: argparse.Namespace) -> int:
    from local.client import demo
    from local.plan import token_for

    plan = _plan(args)
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--args must be a JSON object: {exc}") from None
    url = args.url or plan.mcp_url
    if args.oauth or args.browser:
        from local.oauth.client import BrowserAuthorization, oauth_provider

        # No token: the SDK's OAuth provider follows the 401 to the issuer and registers itself.
        browser = BrowserAuthorization() if args.browser else None
        try:
            anyio.run(lambda: demo(url, None, mode=args.mode, tool=args.tool, arguments=arguments,
                                   country=args.country, auth=oauth_provider(url, authorization=browser)))
        finally:
            if browser is not None:
                browser.close()
        return 0
    anyio.run(lambda: demo(url, token_for(plan, args.client, args.scope), mode=args.mode, tool=args.tool,
                           arguments=arguments, country=args.country))
    return 0


def _control(args: argparse.Namespace, payload: dict[str, Any]) -> int:
    plan = _plan(args)
    answer = request(control_socket_in(plan.run_dir), payload)
    if not answer.get("ok"):
        print(f"error: {answer.get('error')}", file=sys.stderr)
        return 1
    print(answer["message"])
    return 0


def cmd_fail(args: argparse.Namespace) -> int:
    payload: dict[str, Any] = {"op": "fail", "region": args.region, "mode": args.mode}
    if args.for_s is not None:
        payload["for_s"] = args.for_s
    return _control(args, payload)


def cmd_restore(args: argparse.Namespace) -> int:
    return _control(args, {"op": "restore", "region": args.region})


def cmd_explain(args: argparse.Namespace) -> int:
    print("What the local topology does differently from AWS, and why:\n")
    for line in LOCAL_DIFFERENCES:
        print(f"- {line}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/run-local", description="The whole MCP edge on this machine, no AWS account.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Without a command, scripts/run-local runs 'up'. 'scripts/run-local COMMAND --help' shows a "
               "command's options.\nThe dev client's secret and the issuer's key are in the run folder "
               "(.local/<stack>/plan.json, issuer-key.pem; owner-only).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     title="commands (up, token, client, fail, restore, explain)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")

    up = commands.add_parser("up", help="start the local topology (Ctrl-C stops it)", parents=[common])
    _run_dir_args(up)
    up.add_argument("--edge-port", type=_port, default=DEFAULT_EDGE_PORT, help=f"edge port (default {DEFAULT_EDGE_PORT})")
    up.add_argument("--base-port", type=_port, default=DEFAULT_BASE_PORT,
                    help=f"issuer at this port, emulator +1, status page +2, KeyValueStore +3, origins +10, +11... "
                         f"(default {DEFAULT_BASE_PORT})")
    up.add_argument("--probe-interval", type=_positive, metavar="SECONDS",
                    help="seconds between probe rounds (default: the stack's rounds workflow, probeIntervalSeconds)")
    up.add_argument("--default-country", type=_country,
                    help="viewer country when a request has no CloudFront-Viewer-Country header "
                         "(default: none, which routes to the stack's default region)")
    up.add_argument("--retry-delay", type=_positive, default=5.0, metavar="SECONDS",
                    help="seconds before a message the consumer failed is delivered again (default 5)")
    up.add_argument("--token-lifetime", type=_lifetime, default=DEFAULT_TOKEN_LIFETIME_S, metavar="SECONDS",
                    help=f"lifetime of the dev issuer's access tokens (default {DEFAULT_TOKEN_LIFETIME_S}; short "
                         "values show clients refreshing)")
    up.add_argument("--consent", action="store_true",
                    help="the dev issuer shows a consent page for every authorization (without it, only for "
                         "redirect URIs off loopback)")
    up.add_argument("--trust-ca", type=Path, metavar="PEM",
                    help="extra CA certificates the dev issuer trusts when it fetches https client ID metadata "
                         "documents (e.g. mkcert's root)")
    up.add_argument("--origin-instances", type=_instances, default=DEFAULT_ORIGIN_INSTANCES, metavar="N",
                    help=f"processes of the server per origin region, taken in turn by each request as Lambda's "
                         f"instances are (default {DEFAULT_ORIGIN_INSTANCES}: a server that keeps sessions in memory "
                         "fails here as on AWS; 1 hides that)")
    up.set_defaults(run=cmd_up)

    token = commands.add_parser("token", help="print a bearer token from the running dev issuer", parents=[common])
    _run_dir_args(token)
    token.add_argument("--client", default=DEV_CLIENT_ID, help=f"OAuth client id (default {DEV_CLIENT_ID})")
    token.add_argument("--scope", help="space-separated scopes (default: the issuer's default, mcp)")
    token.set_defaults(run=cmd_token)

    client = commands.add_parser("client", help="list tools and call one through the local edge", parents=[common])
    _run_dir_args(client)
    client.add_argument("--client", default=DEV_CLIENT_ID, help=f"OAuth client id (default {DEV_CLIENT_ID})")
    client.add_argument("--mode", default="auto", help="auto, legacy or a protocol version (default auto)")
    client.add_argument("--tool", help="tool to call (default: countdown, which reports progress)")
    client.add_argument("--args", default="{}", help="tool arguments as a JSON object")
    client.add_argument("--country", type=_country, help="send CloudFront-Viewer-Country (routing)")
    client.add_argument("--url", help="MCP URL (default: the local edge)")
    client.add_argument("--oauth", action="store_true",
                        help="start with no token: the SDK's OAuth client provider discovers the issuer from the 401, "
                             "registers and authorizes (code + PKCE) on its own")
    client.add_argument("--browser", action="store_true",
                        help="like --oauth, but print the authorization URL for a browser and receive the redirect "
                             "on a loopback port (for a topology run with --consent)")
    client.add_argument("--scope", help="scopes of the client-credentials token (default: the issuer's default)")
    client.set_defaults(run=cmd_client)

    fail = commands.add_parser("fail", help="fail a region's origin in the running topology", parents=[common])
    _run_dir_args(fail)
    fail.add_argument("region", help="origin region, e.g. eu-west-1")
    fail.add_argument("--mode", choices=MODES, default="stop",
                      help="stop: connections refused; error: every request answered 502; hang: connections "
                           "accepted, never answered (default stop)")
    fail.add_argument("--for", dest="for_s", type=_positive, metavar="SECONDS",
                      help="restore it on its own after this many seconds (default: until restore)")
    fail.set_defaults(run=cmd_fail)

    restore = commands.add_parser("restore", help="bring a failed region's origin back", parents=[common])
    _run_dir_args(restore)
    restore.add_argument("region", help="origin region, e.g. eu-west-1")
    restore.set_defaults(run=cmd_restore)

    explain = commands.add_parser("explain", help="what differs from AWS, and why", parents=[common])
    explain.set_defaults(run=cmd_explain)

    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.debug:
            raise
        from local.errors import for_people

        message = for_people(exc) or f"{type(exc).__name__}: {exc}"
        print(f"error: {message}\n(scripts/run-local {args.command} --debug shows the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
