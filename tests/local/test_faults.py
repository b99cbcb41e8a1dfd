"""Failing an origin and restoring it, through the supervisor and the control channel:
the supervisor stops, replaces or freezes the process and brings it back itself, and
stopping the topology afterwards leaves no process and every port free."""

from __future__ import annotations

import http.client
import socket
import threading
from pathlib import Path

import pytest

from local.control import ControlError, ControlServer, Operator, control_socket_in, request
from local.faults import ERROR_STATUS, FaultError, FaultInjector
from local.supervisor import ServiceSpec, Supervisor, free_ports, group_alive, port_is_free


def _origin(port: int) -> ServiceSpec:
    return ServiceSpec(name="origin-eu-west-1", argv=("-m", "http.server", str(port), "--bind", "127.0.0.1"),
                       port=port, port_option="--base-port")


def _get(port: int, timeout_s: float = 3.0) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.fixture
def running(tmp_path: Path):
    port = free_ports(1)[0]
    supervisor = Supervisor(tmp_path / "logs")
    supervisor.start_all([_origin(port)])
    injector = FaultInjector(supervisor, {"eu-west-1": _origin(port)})
    try:
        yield supervisor, injector, port
    finally:
        supervisor.stop_all()


def _nothing_left(supervisor: Supervisor, pids: list[int], port: int) -> None:
    supervisor.stop_all()
    assert not any(group_alive(pid) for pid in pids)
    assert port_is_free(port)


def test_stop_refuses_connections_and_restore_starts_the_origin_again(running) -> None:
    supervisor, injector, port = running
    first = supervisor.services["origin-eu-west-1"].pid
    injector.fail("eu-west-1", "stop")
    with pytest.raises(ConnectionRefusedError):
        _get(port)
    injector.restore("eu-west-1")
    assert _get(port) == 200
    restarted = supervisor.services["origin-eu-west-1"].pid
    assert restarted != first and not group_alive(first)
    _nothing_left(supervisor, [first, restarted], port)


def test_error_mode_answers_502_until_restored(running) -> None:
    supervisor, injector, port = running
    injector.fail("eu-west-1", "error")
    assert _get(port) == ERROR_STATUS
    failing = supervisor.services["origin-eu-west-1-failing"].pid
    injector.restore("eu-west-1")
    assert _get(port) == 200
    assert not group_alive(failing)
    _nothing_left(supervisor, [failing, supervisor.services["origin-eu-west-1"].pid], port)


def test_hang_mode_accepts_and_never_answers_until_restored(running) -> None:
    supervisor, injector, port = running
    injector.fail("eu-west-1", "hang")
    with pytest.raises((TimeoutError, socket.timeout)):
        _get(port, timeout_s=1.0)
    injector.restore("eu-west-1")
    assert _get(port) == 200


@pytest.mark.parametrize("mode", ["hang", "error", "stop"])
def test_stopping_the_topology_while_a_region_is_failed_leaves_nothing(running, mode: str) -> None:
    supervisor, injector, port = running
    injector.fail("eu-west-1", mode)
    pids = supervisor.pids()
    _nothing_left(supervisor, pids, port)


def test_a_fault_that_cannot_be_done_says_why(running) -> None:
    _, injector, _ = running
    with pytest.raises(FaultError, match="not an origin region of this topology; the regions are eu-west-1"):
        injector.fail("eu-wset-1")
    with pytest.raises(FaultError, match="mode 'explode' is not one of stop, error, hang"):
        injector.fail("eu-west-1", "explode")
    with pytest.raises(FaultError, match="not failed"):
        injector.restore("eu-west-1")
    injector.fail("eu-west-1", "hang")
    with pytest.raises(FaultError, match="already failed"):
        injector.fail("eu-west-1", "stop")
    injector.restore("eu-west-1")


def test_the_control_channel_runs_requests_on_the_pumping_thread(running, tmp_path: Path) -> None:
    supervisor, injector, port = running
    clock = [0.0]
    operator = Operator(injector, clock=lambda: clock[0])
    threads: list[str] = []

    def handle(req: dict) -> dict:
        threads.append(threading.current_thread().name)
        return operator.handle(req)

    path = control_socket_in(tmp_path)
    server = ControlServer(path, handle)
    answers: list[dict] = []
    try:
        def ask(payload: dict) -> None:
            answers.append(request(path, payload))

        for payload in ({"op": "fail", "region": "eu-west-1", "mode": "stop", "for_s": 30},
                        {"op": "fail", "region": "eu-west-1"}):
            asker = threading.Thread(target=ask, args=(payload,))
            asker.start()
            assert server.pump(10.0)
            asker.join(10)
        assert answers[0]["ok"] and "restored in 30 s" in answers[0]["message"]
        assert answers[0]["faults"][0]["region"] == "eu-west-1" and answers[0]["faults"][0]["mode"] == "stop"
        assert answers[1] == {"ok": False, "error": answers[1]["error"]} and "already failed" in answers[1]["error"]
        assert set(threads) == {threading.current_thread().name}
        # The time given with --for passes: the pumping thread restores it.
        assert operator.tick() == []
        clock[0] = 31.0
        assert operator.tick() == ["restored the origin of eu-west-1: it answers again"]
        assert _get(port) == 200
    finally:
        server.close()
    assert not path.exists()
    with pytest.raises(ControlError, match="no running topology answers"):
        request(path, {"op": "faults"})


def test_the_status_pages_operator_forms_fail_and_restore_through_the_running_up(running, tmp_path: Path) -> None:
    import httpx
    from starlette.applications import Starlette

    from local.status import OperatorActions
    from tests.local.conftest import serve

    supervisor, injector, port = running
    path = control_socket_in(tmp_path)
    server = ControlServer(path, Operator(injector).handle)
    try:
        actions = OperatorActions(path, "http://127.0.0.1:1/", ["eu-west-1"])
        view = actions.view()
        assert view.faults == {} and not view.available
        with serve(Starlette(routes=actions.routes())) as status_port:
            url = f"http://127.0.0.1:{status_port}/operator/"
            answers: list[httpx.Response] = []

            def post(action: str, form: dict, headers: dict | None = None) -> None:
                answers.append(httpx.post(url + action, data=form, headers=headers or {}, timeout=30))

            # Another site's page, or a form without this page's token, is refused before anything runs.
            post("fail", {"region": "eu-west-1", "token": actions.form_token}, {"origin": "http://evil.example"})
            post("fail", {"region": "eu-west-1", "token": "guess"})
            assert [a.status_code for a in answers] == [403, 403]
            for action, form in (("fail", {"region": "eu-west-1", "mode": "error"}), ("restore", {"region": "eu-west-1"})):
                asker = threading.Thread(target=post, args=(action, {**form, "token": actions.form_token},
                                                            {"origin": "http://127.0.0.1:1"}))
                asker.start()
                assert server.pump(20.0)
                asker.join(30)
                if action == "fail":
                    assert _get(port) == ERROR_STATUS
                    view = actions.view()  # answered at once, without the pumping thread
                    assert view.faults == {"eu-west-1": "error"}
                    assert "failed (error)" in render_page_of(view) and "Restore" in render_page_of(view)
            assert [a.status_code for a in answers[2:]] == [303, 303]
            assert "answers%20every%20request%20502" in answers[2].headers["location"].replace("+", "%20")
            assert _get(port) == 200
    finally:
        server.close()
    assert "unavailable: no running topology answers" in render_page_of(actions.view())


def render_page_of(view) -> str:
    from local.status import Snapshot, render_page

    return render_page(Snapshot(stack="prod", server_id="s", generated_at="now", probe_regions=[], targets=[],
                                alerts=[]), {}, view)


@pytest.mark.parametrize("mode", ["stop", "error"])
def test_a_region_fails_and_comes_back_on_every_instance_of_its_origin(tmp_path: Path, mode: str) -> None:
    ports = free_ports(2)
    specs = [ServiceSpec(name=f"origin-eu-west-1{'-2' if i else ''}",
                         argv=("-m", "http.server", str(port), "--bind", "127.0.0.1"), port=port,
                         port_option="--base-port") for i, port in enumerate(ports)]
    supervisor = Supervisor(tmp_path / "logs")
    try:
        supervisor.start_all(specs)
        injector = FaultInjector(supervisor, {"eu-west-1": specs})
        injector.fail("eu-west-1", mode)
        for port in ports:
            if mode == "stop":
                with pytest.raises(ConnectionRefusedError):
                    _get(port)
            else:
                assert _get(port) == ERROR_STATUS
        injector.restore("eu-west-1")
        assert [_get(port) for port in ports] == [200, 200]
    finally:
        supervisor.stop_all()
    assert all(port_is_free(port) for port in ports)
