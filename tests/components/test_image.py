"""The origin as a container image (mcp-edge:server image or imageDigest): the ECR
repositories, images and functions under mocks, both ways (built from the server's own
folder and pushed by the program, or already pushed and given by digest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.image import KEEP_IMAGES, LWA_IMAGE_TAGS, context_digest, repository_name_for
from components.origin import McpOriginArgs, check_origin_args
from components.validation import ComponentArgsError
from stack_config.loading import load_from_stack_file
from tests.components.test_origin import environment_of, function_of, minimal_origin_args, origin_of, unsecret
from tests.harness import ACCOUNT_ID, ProgramRun, run_program

PROD = load_from_stack_file("prod")
REGIONS = PROD.regions
IMAGE_SERVER = "tests/components/fixtures/image_server"
IMAGE = "docker-build:index:Image"
REPOSITORY = "aws:ecr/repository:Repository"
PUSHED = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def image_run() -> ProgramRun:
    return run_program("prod", config_overrides={"server": {"image": IMAGE_SERVER}})


@pytest.fixture(scope="module")
def pushed_run() -> ProgramRun:
    return run_program("prod", config_overrides={"server": {"imageDigest": PUSHED}})


def test_the_image_is_built_from_the_servers_folder_unchanged(image_run: ProgramRun):
    folder = Path(IMAGE_SERVER)
    for region in REGIONS:
        (image,) = image_run.descendants_of(origin_of(image_run, region), IMAGE)
        assert image["context"]["location"] == IMAGE_SERVER
        assert image["dockerfile"]["location"] == f"{IMAGE_SERVER}/Dockerfile"
        assert image["tags"][0].endswith(":" + context_digest(folder)[:16])


# --- the resources ---------------------------------------------------------------------------------


def test_every_origin_region_has_its_repository_scanned_on_push_with_a_lifecycle(image_run: ProgramRun):
    for region in REGIONS:
        origin = origin_of(image_run, region)
        (repo,) = image_run.descendants_of(origin, REPOSITORY)
        assert repo.region == region and repo["name"] == repository_name_for("acme-mcp", "prod")
        assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
        assert repo["imageTagMutability"] == "IMMUTABLE" and repo["forceDelete"] is True
        (lifecycle,) = image_run.descendants_of(origin, "aws:ecr/lifecyclePolicy:LifecyclePolicy")
        rules = json.loads(lifecycle["policy"])["rules"]
        assert {r["selection"]["tagStatus"] for r in rules} == {"untagged", "any"}
        assert any(r["selection"].get("countNumber") == KEEP_IMAGES for r in rules)
        (policy,) = image_run.descendants_of(origin, "aws:ecr/repositoryPolicy:RepositoryPolicy")
        (statement,) = json.loads(policy["policy"])["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}
        assert statement["Condition"]["StringLike"]["aws:sourceArn"] == (
            f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:acme-mcp-prod-origin-{region}")


def test_built_image_is_pushed_to_its_regions_repository_for_arm64(image_run: ProgramRun):
    for region in REGIONS:
        origin = origin_of(image_run, region)
        (repo,) = image_run.descendants_of(origin, REPOSITORY)
        (image,) = image_run.descendants_of(origin, IMAGE)
        url = repo.outputs["repositoryUrl"]
        assert url.startswith(f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/")
        assert image["push"] is True and image["platforms"] == ["linux/arm64"]
        assert image["buildOnPreview"] is False  # previews need no Docker
        assert [t.rpartition(":")[0] for t in image["tags"]] == [url]
        secret, registries = unsecret(image["registries"])
        assert secret and [r["address"] for r in registries] == [url]  # it holds the ECR password
        assert image["buildArgs"] == {"LWA_VERSION": LWA_IMAGE_TAGS[PROD.lwa_layer_version]}
        assert not Path(image["context"]["location"]).is_absolute()  # state independent of the checkout


def test_function_runs_the_image_by_digest_from_its_own_region_with_no_layers(image_run: ProgramRun):
    for region in REGIONS:
        fn = function_of(image_run, region)
        (image,) = image_run.descendants_of(origin_of(image_run, region), IMAGE)
        (repo,) = image_run.descendants_of(origin_of(image_run, region), REPOSITORY)
        assert fn["packageType"] == "Image" and fn["architectures"] == ["arm64"]
        assert fn["imageUri"] == f"{repo.outputs['repositoryUrl']}@{image.outputs['digest']}"
        for absent in ("layers", "runtime", "handler", "code"):
            assert not fn.inputs.get(absent), absent


def test_image_function_has_the_zip_functions_environment_with_port_instead_of_the_layers_wrapper(
        image_run: ProgramRun, prod: ProgramRun):
    for region in REGIONS:
        _, image_env = environment_of(image_run, region)
        _, zip_env = environment_of(prod, region)
        assert image_env == {**{k: v for k, v in zip_env.items() if k != "AWS_LAMBDA_EXEC_WRAPPER"}, "PORT": "8080"}


def test_a_pushed_image_is_used_by_digest_and_nothing_is_built(pushed_run: ProgramRun):
    assert not pushed_run.of_type(IMAGE)
    for region in REGIONS:
        fn = function_of(pushed_run, region)
        (repo,) = pushed_run.descendants_of(origin_of(pushed_run, region), REPOSITORY)
        assert fn["imageUri"] == f"{repo.outputs['repositoryUrl']}@{PUSHED}"
    assert pushed_run.outputs["originImageRepositories"] == {
        region: f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/acme-mcp-prod-origin" for region in REGIONS}


def test_zip_stacks_have_no_repositories_and_no_image_output(prod: ProgramRun):
    assert not prod.of_type(REPOSITORY) and not prod.of_type(IMAGE)
    assert "originImageRepositories" not in prod.outputs


def test_a_component_refuses_an_image_with_snapstart_a_bad_digest_or_an_unknown_adapter_image():
    with pytest.raises(ComponentArgsError) as refused:
        check_origin_args("o", minimal_origin_args(cold_start="snapstart", lwa_layer_version=30,
                                                   server={"image_digest": "latest"}))
    text = str(refused.value)
    assert "cannot be combined with a container image" in text
    assert "server.image_digest = 'latest': must be sha256:" in text
    with pytest.raises(ComponentArgsError, match="lwa_layer_version = 29: has no known Web Adapter image"):
        check_origin_args("o", minimal_origin_args(lwa_layer_version=29, server={"image": IMAGE_SERVER}))
    with pytest.raises(ComponentArgsError, match="server.runtime = 'python3.13': is for a folder server"):
        check_origin_args("o", minimal_origin_args(server={"image_digest": PUSHED, "runtime": "python3.13"}))
    with pytest.raises(ComponentArgsError, match="server.image = .*must be a folder holding a Dockerfile"):
        check_origin_args("o", minimal_origin_args(server={"image": "examples/fastmcp"}))
    args: McpOriginArgs = minimal_origin_args(server={"image_digest": PUSHED})
    check_origin_args("o", args)
