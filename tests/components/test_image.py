"""The origin as a container image (originPackageType image): the Dockerfile read with
dockerfile-parse, the build context the program renders against the zip it would
upload, and the ECR repositories, images and functions under mocks, both ways (built
and pushed by the program, or already pushed and given by digest)."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from components.image import KEEP_IMAGES, LWA_IMAGE_TAGS, lwa_image, repository_name_for
from components.origin import DEFAULT_LWA_LAYER_VERSION, SERVER_SOURCE, McpOriginArgs, check_origin_args
from components.validation import ComponentArgsError
from review.variants import VARIANTS
from stack_config.loading import load_from_stack_file
from tests.components.test_origin import environment_of, function_of, minimal_origin_args, origin_of, unsecret
from tests.harness import ACCOUNT_ID, ProgramRun, run_program

PROD = load_from_stack_file("prod")
REGIONS = PROD.regions
DOCKERFILE = SERVER_SOURCE / "Dockerfile"
IMAGE = "docker-build:index:Image"
REPOSITORY = "aws:ecr/repository:Repository"
PUSHED = "sha256:" + "ab" * 32


def parsed(build_args: dict[str, str] | None = None) -> DockerfileParser:
    return DockerfileParser(fileobj=io.BytesIO(DOCKERFILE.read_bytes()), build_args=build_args or {})


def instructions(parser: DockerfileParser) -> list[tuple[str, str]]:
    return [(i["instruction"], i["value"]) for i in parser.structure if i["instruction"] != "COMMENT"]


@pytest.fixture(scope="module")
def image_run() -> ProgramRun:
    return run_program("prod", config_overrides=VARIANTS["image"])


@pytest.fixture(scope="module")
def pushed_run() -> ProgramRun:
    return run_program("prod", config_overrides={**VARIANTS["image"], "originImageDigest": PUSHED})


# --- the Dockerfile ---------------------------------------------------------------------------


def test_dockerfile_builds_on_the_lambda_python_313_base_for_arm64():
    parser = parsed()
    assert parser.baseimage == "public.ecr.aws/lambda/python:3.13"
    froms = [value for op, value in instructions(parser) if op == "FROM"]
    assert froms and all(value.startswith("--platform=linux/arm64 ") for value in froms)


def test_dockerfile_copies_the_adapter_from_its_published_image_of_the_layers_release():
    # The default ARG is the default layer's release; the program's build arg picks the stack's.
    assert parsed().parent_images[0] == lwa_image(DEFAULT_LWA_LAYER_VERSION)
    for layer, tag in LWA_IMAGE_TAGS.items():
        assert parsed({"LWA_VERSION": tag}).parent_images[0] == lwa_image(layer)
    ops = instructions(parsed())
    assert ("COPY", "--from=adapter /lambda-adapter /opt/extensions/lambda-adapter") in ops


def test_dockerfile_installs_dependencies_in_a_layer_before_the_source():
    ops = instructions(parsed())
    index = {value: i for i, (_, value) in enumerate(ops)}
    requirements = index["mcp_server/requirements.txt /tmp/requirements.txt"]
    install = next(i for i, (op, value) in enumerate(ops) if op == "RUN" and "pip install" in value)
    source = index["mcp_server/ ${LAMBDA_TASK_ROOT}/mcp_server/"]
    assert requirements < install < source
    assert index["run.sh ${LAMBDA_TASK_ROOT}/run.sh"] > install


def test_dockerfile_entry_point_is_run_sh_as_the_zip_starts_it():
    ops = instructions(parsed())
    assert ops[-1] == ("ENTRYPOINT", '["/var/task/run.sh"]')
    assert not [op for op, _ in ops if op == "CMD"]


# --- the build context against the zip -----------------------------------------------------------


def context_of(run: ProgramRun, region: str) -> Path:
    (image,) = [i for i in run.descendants_of(origin_of(run, region), IMAGE)]
    return Path(image["context"]["location"]).resolve()


def test_image_holds_what_the_zip_holds_requirements_run_sh_and_app(image_run: ProgramRun, prod: ProgramRun):
    context = context_of(image_run, "us-east-1")
    shipped = {p.relative_to(context).as_posix(): p.read_bytes() for p in context.rglob("*") if p.is_file()}
    assert shipped.pop("Dockerfile") == DOCKERFILE.read_bytes()
    with zipfile.ZipFile(function_of(prod, "us-east-1")["code"].path) as zf:
        own = {n: zf.read(n) for n in zf.namelist()
               if (n.startswith("mcp_server/") and "/__pycache__/" not in n) or n == "run.sh"}
    assert shipped == own
    assert "mcp_server/requirements.txt" in shipped
    assert stat.S_IMODE((context / "run.sh").stat().st_mode) == 0o755


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


def test_image_function_has_the_zip_functions_environment_without_the_layers_wrapper(
        image_run: ProgramRun, prod: ProgramRun):
    for region in REGIONS:
        _, image_env = environment_of(image_run, region)
        _, zip_env = environment_of(prod, region)
        assert image_env == {k: v for k, v in zip_env.items() if k != "AWS_LAMBDA_EXEC_WRAPPER"}


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
    args: McpOriginArgs = minimal_origin_args(package_type="image", cold_start="snapstart", lwa_layer_version=29,
                                              image_digest="latest")
    with pytest.raises(ComponentArgsError) as refused:
        check_origin_args("o", args)
    text = str(refused.value)
    assert "cannot be combined with cold_start 'snapstart'" in text
    assert "image_digest = 'latest': must be sha256:" in text
    assert "lwa_layer_version = 29: has no known Web Adapter image" in text
    with pytest.raises(ComponentArgsError, match="image_digest = .*needs package_type 'image'"):
        check_origin_args("o", minimal_origin_args(image_digest=PUSHED))
    check_origin_args("o", minimal_origin_args(package_type="image", image_digest=PUSHED))
