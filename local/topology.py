"""Bring the plan up as processes on loopback, and take it down again.

Order (every port checked first): each origin's package is built for this machine
(``local.origins``, once per content); the emulator, the issuer and the KeyValueStore
start together; once the issuer answers, the origins' first instances (each origin behind
its local Function URL), the edge and the status page; then the origins' other instances; once the emulator answers, the stack's resources
are created in it; then the global-table replicator and one worker per Lambda function
and region (probes, consumers) start. ``stop`` takes everything down newest first, so
workers never outlive what they call. ``faults`` fails and restores origins while it
runs (``local.faults``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from local.aws.function_url import SETTINGS_ENV as FUNCTION_URL_SETTINGS_ENV
from local.aws.resources import provision
from local.cloudfront.http_protocol import EDGE_HTTP_PROTOCOL
from local.cloudfront.key_value_store import KeyValueStore
from local.cloudfront.proxy import SETTINGS_ENV as EDGE_SETTINGS_ENV
from local.faults import FaultInjector
from local.files import write_private
from local.launch import EXEC_OPTION
from local.oauth.issuer import SETTINGS_ENV as ISSUER_SETTINGS_ENV
from local.oauth.issuer import generate_key_file
from local.origins import PACKAGE_BUILDER, ServerSpec, env_argv, port_hint, server_spec, start_command
from local.plan import FUNCTIONS_ROOT, LOOPBACK, FunctionSpec, HealthStoreSpec, LocalPlan
from local.status import PLAN_ENV
from local.supervisor import ServiceSpec, Supervisor, check_ports

GRACEFUL_S = "3"


def _uvicorn(app: str, port: int, *extra: str, factory: bool = False) -> tuple[str, ...]:
    args = ["-m", "uvicorn", app, "--host", LOOPBACK, "--port", str(port), "--timeout-graceful-shutdown", GRACEFUL_S]
    if factory:
        args.append("--factory")
    return (*args, *extra)


def seed_store(spec: HealthStoreSpec) -> None:
    """A fresh store holding what the program seeds (as its KeyvaluestoreKey resources do
    when the stack is created)."""
    path = Path(spec.file)
    path.unlink(missing_ok=True)
    store = KeyValueStore(path, spec.arn)
    for key, value in spec.items.items():
        store.put(spec.arn, key, value, store.describe(spec.arn)["_etag"])


class Topology:
    def __init__(self, plan: LocalPlan):
        self.plan = plan
        self.run_dir = Path(plan.run_dir)
        self.ready_dir = self.run_dir / "ready"
        # What the Function URLs notice of the server (local.aws.function_url), for scripts/run-local.
        self.notices_dir = self.run_dir / "notices"
        self.supervisor = Supervisor(self.run_dir / "logs")
        self.faults = FaultInjector(self.supervisor, {})
        self.log_handler: logging.FileHandler | None = None
        self.server: ServerSpec = server_spec({"server": plan.server or None})
        self._package_dir: Path | None = None

    @property
    def package_dir(self) -> Path:
        """The server's package for this machine, built on first use (every region runs it)."""
        if self._package_dir is None:
            self._package_dir = PACKAGE_BUILDER(self.server)
        return self._package_dir

    def origin_service(self, region: str, instance: int = 0) -> ServiceSpec:
        """One instance of a region's origin as the Web Adapter starts it: the package's run.sh,
        with the function's environment and nothing else (``origin-<region>``, then
        ``origin-<region>-2``, ...). A process that listens elsewhere than on $PORT is named
        within seconds (``ServiceSpec.expected_port_hint``)."""
        (origin,) = [o for o in self.plan.origins if o.region == region]
        port = origin.ports[instance]
        argv, env = start_command(self.server, self.package_dir, port, origin.environment)
        name = f"origin-{origin.region}" + (f"-{instance + 1}" if instance else "")
        return ServiceSpec(name=name, argv=(EXEC_OPTION, *env_argv(argv, env)),
                           port=port, port_option="--base-port", ready_path=origin.readiness_path,
                           port_hint=port_hint(self.server.command))

    def origin_services(self, region: str) -> list[ServiceSpec]:
        """Every instance of a region's origin."""
        (origin,) = [o for o in self.plan.origins if o.region == region]
        return [self.origin_service(region, i) for i in range(len(origin.ports))]

    # --- the services ------------------------------------------------------------------
    def front_services(self) -> list[ServiceSpec]:
        plan, ports = self.plan, self.plan.ports
        specs = [
            ServiceSpec(name="aws-emulator", argv=("-m", "local.aws.moto_server", "--host", LOOPBACK, "--port",
                                                    str(ports.moto)),
                        port=ports.moto, port_option="--base-port", ready_path="/moto-api/"),
            ServiceSpec(name="issuer", argv=_uvicorn("local.oauth.issuer:create_app", ports.issuer, "--log-level",
                                                      "warning", factory=True),
                        port=ports.issuer, port_option="--base-port", ready_path="/healthz",
                        env={ISSUER_SETTINGS_ENV: plan.issuer.to_json()}),
        ]
        specs += [spec for origin in plan.origins for spec in self.origin_services(origin.region)]
        for origin in plan.origins:
            # The origin's Function URL (AWS_IAM): verifies the SigV4 signature against the
            # local credentials, then forwards to the origin process.
            url_port = ports.urls()[origin.region]
            specs.append(ServiceSpec(
                name=f"function-url-{origin.region}",
                # Lambda's URL passes the function's own Date and Server on (uvicorn's would make two).
                argv=_uvicorn("local.aws.function_url:create_app", url_port, "--no-access-log", "--log-level",
                              "warning", "--no-date-header", "--no-server-header", factory=True),
                port=url_port, port_option="--base-port", ready_path=None,
                env={**plan.aws_environment(origin.region),
                     FUNCTION_URL_SETTINGS_ENV: json.dumps({
                         "region": origin.region, "origins": origin.urls, "host": origin.host or None,
                         "notices": str(self.notices_dir),
                         "authorizationSource": origin.environment.get("AWS_LWA_AUTHORIZATION_SOURCE")})},
            ))
        if plan.health_store is not None:
            store = plan.health_store
            specs.append(ServiceSpec(
                name="kvs", argv=("-m", "local.cloudfront.key_value_store", "--host", LOOPBACK, "--port", str(ports.kvs),
                                  "--file", store.file, "--arn", store.arn),
                port=ports.kvs, port_option="--base-port", ready_path=None,
            ))
        specs += [
            ServiceSpec(name="edge", argv=_uvicorn("local.cloudfront.proxy:create_app", ports.edge, "--no-access-log",
                                                    "--log-level", "warning",
                                                    # httptools: the C parser, a cheaper second hop than
                                                    # h11, and no head limit of its own below CloudFront's
                                                    # 20,480 bytes, so the edge itself answers 413; its
                                                    # writes in one loop turn sent as one (http_protocol.py).
                                                    "--http", EDGE_HTTP_PROTOCOL,
                                                    # uvloop: libuv's loop and transports, about 0.3 ms
                                                    # less a request than asyncio's (bench/local_bench.py)
                                                    "--loop", "uvloop",
                                                    # CloudFront passes the origin's Date on (uvicorn's own
                                                    # would make two), names itself on its own answers
                                                    # (EdgeProxy), and takes the viewer's address from the
                                                    # connection, never from a viewer's X-Forwarded-For.
                                                    "--no-date-header", "--no-server-header", "--no-proxy-headers",
                                                    factory=True),
                        port=ports.edge, port_option="--edge-port", ready_path=None,
                        # The local credentials: what Lambda@Edge gives the gate's role, here
                        # the emulator's fake ones the local Function URLs verify against.
                        env={EDGE_SETTINGS_ENV: "@" + str(self.run_dir / "edge.json"),
                             **plan.aws_environment(plan.default_region)}),
            ServiceSpec(name="status", argv=_uvicorn("local.status:create_app", ports.status, "--no-access-log",
                                                      "--log-level", "warning", factory=True),
                        port=ports.status, port_option="--base-port", ready_path="/healthz",
                        env={PLAN_ENV: str(self.plan.plan_file), **plan.aws_environment(plan.regions[0])}),
        ]
        return specs

    def function_service(self, fn: FunctionSpec) -> ServiceSpec:
        ready = self.ready_dir / fn.service_name
        env = {
            **fn.environment,
            **self.plan.aws_environment(fn.region),
            # What the Lambda runtime sets for every function.
            "AWS_LAMBDA_FUNCTION_NAME": fn.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_mb),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{fn.name}",
            "LAMBDA_TASK_ROOT": str(FUNCTIONS_ROOT),
            "_HANDLER": fn.handler,
        }
        return ServiceSpec(
            name=fn.service_name,
            argv=("-m", "local.aws.lambda_worker", "--plan", str(self.plan.plan_file), "--function", fn.name,
                  "--region", fn.region, "--ready-file", str(ready)),
            ready_file=ready, env=env,
        )

    def back_services(self) -> list[ServiceSpec]:
        ready = self.ready_dir / "replicator"
        specs = []
        if any(t.replica_regions for t in self.plan.tables):
            specs.append(ServiceSpec(
                name="replicator",
                argv=("-m", "local.aws.resources", "replicate", "--plan", str(self.plan.plan_file),
                      "--ready-file", str(ready)),
                ready_file=ready, env=self.plan.aws_environment(self.plan.regions[0]),
            ))
        return specs + [self.function_service(fn) for fn in self.plan.functions]

    # --- up and down ---------------------------------------------------------------------
    def prepare(self) -> None:
        """Fresh run directory: plan, edge settings, issuer key (all private to this user)."""
        for stale in (self.ready_dir, self.run_dir / "logs", self.run_dir / "ledger", self.notices_dir):  # a previous run's
            if stale.exists():
                shutil.rmtree(stale)
        self.ready_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)
        # This process's own records (the seeded store's ETags, resources created in the
        # emulator) go to its log, like every child's; the console keeps warnings only.
        self.log_handler = logging.FileHandler(self.run_dir / "logs" / "run-local.log")
        self.log_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root = logging.getLogger()
        root.addHandler(self.log_handler)
        root.setLevel(min(root.level or logging.INFO, logging.INFO))
        generate_key_file(Path(self.plan.issuer.key_file))
        self.plan.write()
        write_private(self.run_dir / "edge.json", self.plan.edge.to_json())
        if self.plan.health_store is not None:
            seed_store(self.plan.health_store)

    def start(self) -> None:
        front = self.front_services()  # builds the server's package first (local.origins)
        check_ports(front)  # before writing or starting anything
        self.prepare()
        # The issuer first: an origin's warm-up fetches its keys (JWKS), and one started
        # before it logs a refused connection and an incomplete warm-up.
        first = [s for s in front if s.name in ("aws-emulator", "issuer", "kvs")]
        names = {o.region: {s.name for s in self.origin_services(o.region)} for o in self.plan.origins}
        origins = {region: [s for s in front if s.name in wanted] for region, wanted in names.items()}
        self.faults = FaultInjector(self.supervisor, origins)
        try:
            self.supervisor.start_all(first)
            # An origin's further instances once its first is ready: a server that binds a port of
            # its own is then named by its first instance, not refused the port by its second.
            extra = [s for specs in origins.values() for s in specs[1:]]
            self.supervisor.start_all([s for s in front if s not in first and s not in extra])
            if extra:
                self.supervisor.start_all(extra)
            provision(self.plan)
            self.supervisor.start_all(self.back_services())
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.supervisor.stop_all()
        if self.log_handler is not None:
            logging.getLogger().removeHandler(self.log_handler)
            self.log_handler.close()
            self.log_handler = None

    def __enter__(self) -> Topology:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
