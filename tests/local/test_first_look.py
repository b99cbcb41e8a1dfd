"""What scripts/run-local learns of the user's server and suggests (issue 39): the banner
suggests what the server has, and the Function URLs' notices are printed once each."""

from __future__ import annotations

from pathlib import Path

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from local.first_look import Tool, example_arguments, fail_lines, first_look, new_notices, try_lines
from tests.local.conftest import serve

NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def quickstart(**options: object):  # type: ignore[no-untyped-def]
    server = MCPServer("weather")

    @server.tool()
    def get_forecast(latitude: float, longitude: float) -> str:
        return "sunny"

    @server.tool()
    def get_alerts(state: str) -> str:
        return "none"

    return server.streamable_http_app(transport_security=NO_HOST_CHECK, **options)  # type: ignore[arg-type]


def test_a_stateless_server_shows_its_tools() -> None:
    with serve(quickstart(stateless_http=True)) as port:
        look = first_look(f"http://127.0.0.1:{port}/mcp", "a-token")
    assert not look.stateful and [t.name for t in look.tools or ()] == ["get_forecast", "get_alerts"]


def test_a_stateful_server_is_seen_as_such() -> None:
    with serve(quickstart()) as port:
        look = first_look(f"http://127.0.0.1:{port}/mcp", "a-token")
    assert look.stateful


def test_an_unreachable_server_is_a_problem_not_an_error() -> None:
    look = first_look("http://127.0.0.1:9/mcp", "a-token", timeout_s=2)
    assert look.tools is None and look.problem


def test_the_banner_suggests_countdown_only_for_a_server_that_has_it() -> None:
    demo = try_lines("", [Tool("countdown"), Tool("whoami")], ["us-east-1", "eu-west-1"], "us-east-1")
    assert "call countdown with progress" in demo[0]
    weather = [Tool("get_forecast", {"properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}},
                                     "required": ["latitude", "longitude"]}), Tool("get_alerts")]
    mine = "\n".join(try_lines(" --stack mine", weather, ["eu-west-1"], "eu-west-1"))
    assert "countdown" not in mine and "call get_forecast" in mine
    assert ("scripts/run-local client --stack mine --tool get_forecast --args "
            "'{\"latitude\": 1, \"longitude\": 1}'") in mine
    assert "--country" not in mine  # one region: nothing to route between
    assert "countdown" not in "\n".join(try_lines("", None, ["eu-west-1"], "eu-west-1"))


def test_the_banner_fails_a_region_the_stack_has() -> None:
    one = "\n".join(fail_lines("", ["ap-south-1"], "ap-south-1"))
    assert "fail ap-south-1" in one and "eu-west-1" not in one and "the only region" in one
    two = "\n".join(fail_lines(" --stack x", ["us-east-1", "sa-east-1"], "us-east-1"))
    assert "scripts/run-local fail sa-east-1 --stack x" in two and "restore sa-east-1 --stack x" in two


def test_example_arguments_follow_the_schemas_required_types() -> None:
    schema = {"properties": {"q": {"type": "string"}, "n": {"type": "integer"}, "flag": {"type": "boolean"},
                             "opt": {"type": "string"}}, "required": ["q", "n", "flag"]}
    assert example_arguments(schema) == {"q": "text", "n": 1, "flag": True}
    assert example_arguments({}) == {}


def test_each_kind_of_notice_is_printed_once_whichever_region_saw_it(tmp_path: Path) -> None:
    printed: set[str] = set()
    assert new_notices(tmp_path / "none-yet", printed) == []
    (tmp_path / "stateful.eu-west-1").write_text("make it stateless\n")
    (tmp_path / "stateful.us-east-1").write_text("make it stateless\n")
    assert new_notices(tmp_path, printed) == ["origin in eu-west-1: make it stateless"]
    (tmp_path / "host-check.us-east-1").write_text("allow the host\n")
    assert new_notices(tmp_path, printed) == ["origin in us-east-1: allow the host"]
    assert new_notices(tmp_path, printed) == []
