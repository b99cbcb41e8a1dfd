"""The offline plan: the committed plan is the program's, the text is deterministic,
covers every resource, output, edge code and package, and never shows a secret."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pulumi
import pytest

from devkit.mock_program import ProgramRun, Resource
from review import plan as plan_module
from review.plan import (
    SECRET,
    Redactor,
    flatten,
    looks_generated,
    package_digest,
    plan_diff,
    plan_path,
    refresh_command,
    render_plan,
)
from review.resources import GLOBAL, get_path, placement, takes_region
from review.variants import VARIANTS
from tests.harness import run_program

SECRET_ENVELOPE = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}


def secret(value):
    return {**SECRET_ENVELOPE, "value": value}


def test_committed_prod_plan_is_the_programs_plan(prod: ProgramRun):
    path = plan_path("prod")
    committed = path.read_text() if path.exists() else ""
    diff = plan_diff(committed, render_plan(prod), "prod")
    assert not diff, (
        f"plans/prod.txt differs from the plan of the program as it is now.\n"
        f"If the change is intended, refresh it with:\n    {refresh_command('prod')}\n"
        f"and commit it with the change. Diff (committed -> program):\n{diff}"
    )


def test_plan_text_is_identical_across_runs(one_region: ProgramRun):
    # Resources register in a different order on every run; the text must not change.
    again = run_program("prod", config_overrides=VARIANTS["one-region"])
    assert render_plan(again) == render_plan(one_region)


def test_plan_lists_every_resource_output_and_component(prod: ProgramRun):
    text = render_plan(prod)
    for resource in prod.resources:
        if resource.custom:
            assert f"  {resource.type} {resource.name}\n" in text, resource.name
        else:
            assert f"{resource.type} {resource.name}" in text, resource.name
    for key in prod.outputs:
        assert f"\n{key}" in text.split("## Stack outputs", 1)[1], key


def test_plan_digests_every_function_package_and_edge_function(prod: ProgramRun):
    text = render_plan(prod)
    packages = text.split("## Function packages (Lambda)", 1)[1]
    for fn in prod.of_type("aws:lambda/function:Function"):
        zip_path = Path(fn.inputs["code"].path)
        digest = hashlib.sha256((zip_path if zip_path.is_absolute() else plan_module.PROJECT_ROOT / zip_path).read_bytes())
        assert f"{fn.name}: sha256 {digest.hexdigest()} " in packages
    edge = text.split("## Edge code (CloudFront Functions)", 1)[1].split("## Function packages", 1)[0]
    for fn in prod.of_type("aws:cloudfront/function:Function"):
        assert f"{fn.name}: sha256 {hashlib.sha256(fn.inputs['code'].encode()).hexdigest()} " in edge


def test_plan_never_shows_a_configured_client_secret():
    configured = "configured-client-secret-7f3a9c2e5b1d4f608a2c"
    run = run_program("prod", config_overrides={"probeClientSecret": configured, "probeClientSecretName": None})
    text = render_plan(run)
    assert configured not in text
    assert configured[:16] not in text
    assert SECRET in text


def test_secret_input_is_shown_leaf_by_leaf_with_secrets_redacted():
    redact = Redactor(["s3cr3t-value-000"])
    env = secret({"variables": {"MODE": "stream", "ORIGIN": "s3cr3t-value-000", "API_TOKEN": "abc",
                                "SEED": "Xk29fLq0ZpW8vBn3RtY7uM"}})
    lines = dict(flatten("environment", env, redact))
    assert lines["environment"] == "(secret input: secret values redacted)"
    assert lines["environment.variables.MODE"] == "stream"  # not a secret: reviewers see it
    assert lines["environment.variables.ORIGIN"] == SECRET  # a known secret value
    assert lines["environment.variables.API_TOKEN"] == SECRET  # named like a credential
    assert lines["environment.variables.SEED"] == SECRET  # looks generated
    assert "s3cr3t" not in "".join(lines.values())


def test_custom_header_named_like_a_secret_is_redacted_inside_a_secret_input():
    origins = secret([{"domainName": "abc.lambda-url.eu-west-1.on.aws",
                       "customHeaders": [{"name": "x-mcp-edge-origin-secret", "value": "whatever-it-is"}]}])
    lines = dict(flatten("origins", origins, Redactor([])))
    assert lines["origins[0].domainName"] == "abc.lambda-url.eu-west-1.on.aws"
    assert lines["origins[0].customHeaders[0].value"] == SECRET
    assert "whatever-it-is" not in "".join(lines.values())


@pytest.mark.parametrize(
    ("text", "generated"),
    [("mock-fbe7071b31389ca66fa0445ed0ad34efc36de63e", False), ("Xk29fLq0ZpW8vBn3RtY7uM1a", True),
     ("acme-mcp-origin-ap-northeast-1", False), ("32ee4d44e429bd1226d73fed3cf9fdde", False),
     ("arn:aws:sqs:eu-west-1:123456789012:Queue1", False)],
)
def test_generated_looking_strings(text: str, generated: bool):
    assert looks_generated(text) is generated


def test_a_secret_value_is_redacted_wherever_it_appears():
    redact = Redactor(["hunter2-hunter2"])
    lines = dict(flatten("origins", [{"customHeaders": [{"name": "x-secret", "value": "hunter2-hunter2"}]}], redact))
    assert lines == {"origins[0].customHeaders[0].name": "x-secret", "origins[0].customHeaders[0].value": SECRET}


def test_json_policies_are_flattened_and_numbers_are_plain():
    policy = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": "arn:q"}]}'
    lines = dict(flatten("policy", policy, Redactor([])))
    assert lines["policy(json).Statement[0].Action"] == "[sqs:SendMessage]"
    assert lines["policy(json).Statement[0].Resource"] == "arn:q"
    assert dict(flatten("memorySize", 1024.0, Redactor([]))) == {"memorySize": "1024"}
    assert dict(flatten("targetValue", 0.7, Redactor([]))) == {"targetValue": "0.7"}


def test_long_strings_show_as_digest():
    text = "x" * 500
    [(path, shown)] = flatten("code", text, Redactor([]))
    assert shown == f"sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]} (500 chars)"


def test_global_services_and_provider_default_region_are_told_apart():
    def resource(typ: str, **inputs) -> Resource:
        return Resource(type=typ, name="r", inputs=inputs, outputs={}, id="", urn="")

    assert not takes_region("aws:iam/role:Role") and not takes_region("aws:cloudfront/distribution:Distribution")
    assert takes_region("aws:lambda/function:Function") and takes_region("aws:sqs/queue:Queue")
    assert placement(resource("aws:iam/role:Role"), "prod") == (GLOBAL, False)
    assert placement(resource("aws:sqs/queue:Queue", region="eu-west-1"), "prod") == ("eu-west-1", False)
    # prod's aws:region is us-east-1
    assert placement(resource("aws:sqs/queue:Queue"), "prod") == ("us-east-1", True)


def test_get_path_descends_lists_and_unwraps_secrets():
    inputs = {"origins": [{"c": {"t": 60.0}}, {"c": secret({"t": 30.0})}, {"other": 1}]}
    assert get_path(inputs, "origins[].c.t") == [("origins[0].c.t", 60), ("origins[1].c.t", 30)]
    assert get_path(inputs, "missing[].x") == []


def test_package_digest_hashes_the_zip_bytes(tmp_path: Path):
    zip_path = tmp_path / "p.zip"
    with zipfile.ZipFile(zip_path, "w") as zf:
        zf.writestr("a.py", "print(1)")
        zf.writestr("b/c.py", "print(2)")
    digest = package_digest(zip_path)
    assert digest.sha256 == hashlib.sha256(zip_path.read_bytes()).hexdigest()
    assert digest.files == 2
    with pytest.raises(plan_module.PlanError, match="does not exist"):
        package_digest(tmp_path / "missing.zip")


def test_asset_inputs_render_as_digests(tmp_path: Path):
    zip_path = tmp_path / "p.zip"
    with zipfile.ZipFile(zip_path, "w") as zf:
        zf.writestr("a.py", "x")
    [(_, shown)] = flatten("code", pulumi.FileArchive(str(zip_path)), Redactor([]))
    assert shown.startswith(f"package sha256:{hashlib.sha256(zip_path.read_bytes()).hexdigest()[:16]} ")


def test_cli_write_then_check_then_stale(prod: ProgramRun, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setattr(plan_module, "run_program", lambda stack, **_: prod)
    assert plan_module.main(["--stack", "prod", "--write", "--plans-dir", str(tmp_path)]) == 0
    assert (tmp_path / "prod.txt").read_text() == render_plan(prod)
    assert plan_module.main(["--stack", "prod", "--check", "--plans-dir", str(tmp_path)]) == 0
    (tmp_path / "prod.txt").write_text("stale\n")
    capsys.readouterr()
    assert plan_module.main(["--stack", "prod", "--check", "--plans-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("--- plans/prod.txt (committed)") and "-stale" in out
    assert refresh_command("prod") in err


def test_snapstart_and_image_variants_plan_their_new_resources(variant_runs: dict[str, ProgramRun]):
    snapstart = render_plan(variant_runs["snapstart"])
    assert snapstart.count("snapStart.applyOn: PublishedVersions") == 4
    assert "ProvisionedConcurrencyConfig" not in snapstart and "appautoscaling" not in snapstart
    image = render_plan(variant_runs["image"])
    for region in ("us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1"):
        assert f"aws:ecr/repository:Repository acme-mcp-origin-{region}-images" in image
        assert f"imageUri: 123456789012.dkr.ecr.{region}.amazonaws.com/acme-mcp-prod-origin@sha256:{'ab' * 32}" in image
    assert image.count("imageScanningConfiguration.scanOnPush: true") == 4
    # Pushed by a pipeline: nothing is built.
    assert "docker-build:index:Image" not in image


def test_cli_prints_a_variant_but_never_writes_it(capsys):
    assert plan_module.main(["--variant", "snapstart"]) == 0
    assert "snapStart.applyOn: PublishedVersions" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        plan_module.main(["--variant", "image", "--write"])
