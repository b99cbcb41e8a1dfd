"""The origin as a container image (mcp-edge:server image or imageDigest): the ECR
repositories, images and functions under mocks, both ways (built from the server's own
folder and pushed by the program, or already pushed and given by digest)."""

from __future__ import annotations

import json
import platform
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.image import (
    BUILD_TAG_PREFIX,
    KEEP_IMAGES,
    LWA_IMAGE_TAGS,
    BuildHost,
    build_host_problem,
    build_tag,
    context_digest,
    lifecycle_policy,
    lifecycle_policy_problems,
    repository_name_for,
)
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
def arm64_host() -> Iterator[None]:
    """This machine as an arm64 one (the program checks the build host for emulation
    before building an arm64 image; components are imported afresh by each run, so the
    standard library's answer is what is patched)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(platform, "machine", lambda: "aarch64")
        yield


@pytest.fixture(scope="module")
def image_run(arm64_host: None) -> ProgramRun:
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
        dockerfile = (folder / "Dockerfile").read_bytes()
        assert image["tags"][0].endswith(":" + build_tag(context_digest(folder), dockerfile, image["buildArgs"],
                                                         tuple(image["platforms"])))


# --- the tag: every build input -----------------------------------------------------------------

BUILD_INPUTS = st.fixed_dictionaries({
    "context": st.text(min_size=1, max_size=20),
    "dockerfile": st.binary(max_size=40),
    "build_args": st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3),
    "platforms": st.lists(st.sampled_from(["linux/arm64", "linux/amd64"]), min_size=1, max_size=2, unique=True).map(tuple),
})


@given(BUILD_INPUTS, BUILD_INPUTS)
def test_the_build_tag_changes_exactly_when_a_build_input_changes(a: dict, b: dict):
    # Same inputs, same tag; any input changed (the build args included), another tag.
    assert build_tag(**a) == build_tag(**dict(a))
    assert (build_tag(**a) == build_tag(**b)) == (a == b)
    assert build_tag(**a).startswith(BUILD_TAG_PREFIX)


@given(st.text(min_size=1, max_size=8).filter(lambda v: v != "1.1.0"))
def test_changing_the_adapter_version_build_arg_changes_the_tag(version: str):
    def tag(lwa_version: str) -> str:
        return build_tag("c", b"FROM x", {"LWA_VERSION": lwa_version}, ("linux/arm64",))

    assert tag("1.1.0") != tag(version)


def test_a_new_lwa_layer_version_pushes_under_a_new_tag(arm64_host: None):
    def tags(layer: int) -> list[str]:
        run = run_program("prod", config_overrides={"server": {"image": IMAGE_SERVER}, "lwaLayerVersion": layer})
        return [image["tags"][0] for image in run.of_type(IMAGE)]

    before, after = tags(28), tags(30)
    assert len(before) == len(REGIONS) and not set(before) & set(after)


# --- the build host: emulation before the build ---------------------------------------------------

ENABLED = "enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: OCF\n"


@pytest.mark.parametrize(("host", "builds"), [
    (BuildHost("Linux", "aarch64"), True),
    (BuildHost("Linux", "arm64"), True),
    (BuildHost("Linux", "x86_64", {"qemu-aarch64": ENABLED}), True),
    (BuildHost("Darwin", "x86_64"), True),  # Docker Desktop brings its own emulation
    (BuildHost("Linux", "x86_64", docker_host="ssh://builder"), True),  # another machine builds
    (BuildHost("Linux", "x86_64"), False),
    (BuildHost("Linux", "x86_64", {"qemu-aarch64": "disabled\n"}), False),
    (BuildHost("Linux", "x86_64", {"qemu-x86_64": ENABLED}), False),
    (BuildHost("Linux", "x86_64", docker_host="unix:///var/run/docker.sock"), False),
])
def test_an_arm64_build_on_another_cpu_needs_qemu_binfmt(host: BuildHost, builds: bool):
    problem = build_host_problem(host)
    assert (problem is None) == builds
    if problem:
        assert "docker run --privileged --rm tonistiigi/binfmt --install arm64" in problem
        assert "/proc/sys/fs/binfmt_misc/qemu-aarch64" in problem and "server.imageDigest" in problem


@pytest.mark.skipif(Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists(),
                    reason="this machine has arm64 emulation installed")
def test_up_on_an_amd64_host_without_emulation_stops_before_the_build_naming_the_fix(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    with pytest.raises(Exception, match="tonistiigi/binfmt --install arm64") as stopped:
        run_program("prod", config_overrides={"server": {"image": IMAGE_SERVER}})
    assert "exec format error" not in str(stopped.value)


# --- the resources ---------------------------------------------------------------------------------


def test_every_origin_region_has_its_repository_scanned_on_push_with_a_lifecycle(image_run: ProgramRun):
    for region in REGIONS:
        origin = origin_of(image_run, region)
        (repo,) = image_run.descendants_of(origin, REPOSITORY)
        assert repo.region == region and repo["name"] == repository_name_for("acme-mcp", "prod")
        assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
        assert repo["forceDelete"] is True
        # Immutable tags, except the one a pipeline may move.
        assert repo["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
        assert repo["imageTagMutabilityExclusionFilters"] == [{"filter": "latest", "filterType": "WILDCARD"}]
        (lifecycle,) = image_run.descendants_of(origin, "aws:ecr/lifecyclePolicy:LifecyclePolicy")
        assert lifecycle_policy_problems(lifecycle["policy"]) == []
        (rule,) = json.loads(lifecycle["policy"])["rules"]
        assert rule["selection"] == {"tagStatus": "tagged", "tagPrefixList": [BUILD_TAG_PREFIX],
                                     "countType": "imageCountMoreThan", "countNumber": KEEP_IMAGES}


def test_lambda_may_pull_for_the_function_and_its_versions_and_aliases_only(image_run: ProgramRun):
    for region in REGIONS:
        (policy,) = image_run.descendants_of(origin_of(image_run, region), "aws:ecr/repositoryPolicy:RepositoryPolicy")
        (statement,) = json.loads(policy["policy"])["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}
        function_arn = f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:acme-mcp-prod-origin-{region}"
        assert statement["Condition"]["StringLike"]["aws:sourceArn"] == [function_arn, f"{function_arn}:*"]
        assert function_of(image_run, region).outputs["arn"] == function_arn


def test_a_pipelines_image_is_never_expired_by_the_lifecycle():
    # The digest a pipeline pushes (tagged or untagged) may be what the live version runs:
    # only the program's own builds, beyond the newest few, are selected for expiry.
    (rule,) = json.loads(lifecycle_policy())["rules"]
    assert rule["selection"]["tagStatus"] == "tagged" and rule["selection"]["tagPrefixList"] == [BUILD_TAG_PREFIX]


@pytest.mark.parametrize(("rules", "problem"), [
    ([{"rulePriority": 1, "selection": {"tagStatus": "tagged", "countType": "imageCountMoreThan", "countNumber": 1},
       "action": {"type": "expire"}}], "needs exactly one non-empty tagPrefixList or tagPatternList"),
    ([{"rulePriority": 1, "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countNumber": 7},
       "action": {"type": "expire"}}], "sinceImagePushed counts days"),
    ([{"rulePriority": 1, "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 5},
       "action": {"type": "expire"}},
      {"rulePriority": 2, "selection": {"tagStatus": "untagged", "countType": "imageCountMoreThan", "countNumber": 1},
       "action": {"type": "expire"}}], "tagStatus any must have the highest rulePriority"),
    ([{"rulePriority": 1, "selection": {"tagStatus": "untagged", "tagPrefixList": ["x"],
                                        "countType": "imageCountMoreThan", "countNumber": 0},
       "action": {"type": "expire"}}], "only for tagStatus tagged"),
])
def test_lifecycle_rules_aws_would_refuse_are_named(rules: list, problem: str):
    assert any(problem in p for p in lifecycle_policy_problems(json.dumps({"rules": rules})))


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


def test_a_component_refuses_a_bad_digest_or_an_unknown_adapter_image():
    with pytest.raises(ComponentArgsError) as refused:
        check_origin_args("o", minimal_origin_args(server={"image_digest": "latest"}))
    assert "server.image_digest = 'latest': must be sha256:" in str(refused.value)
    with pytest.raises(ComponentArgsError, match="lwa_layer_version = 29: has no known Web Adapter image"):
        check_origin_args("o", minimal_origin_args(lwa_layer_version=29, server={"image": IMAGE_SERVER}))
    with pytest.raises(ComponentArgsError, match="server.runtime = 'python3.13': is for a folder server"):
        check_origin_args("o", minimal_origin_args(server={"image_digest": PUSHED, "runtime": "python3.13"}))
    with pytest.raises(ComponentArgsError, match="server.image = .*must be a folder holding a Dockerfile"):
        check_origin_args("o", minimal_origin_args(server={"image": "examples/fastmcp"}))
    args: McpOriginArgs = minimal_origin_args(server={"image_digest": PUSHED})
    check_origin_args("o", args)


def test_snapstart_takes_an_image_whose_adapter_takes_part_in_the_lifecycle():
    # Lambda SnapStart supports container images whose runtime client coordinates the
    # lifecycle: the Web Adapter does from release 1.1.0 (layer 30).
    for server in ({"image_digest": PUSHED}, {"image": IMAGE_SERVER}):
        check_origin_args("o", minimal_origin_args(cold_start="snapstart", lwa_layer_version=30, server=server))
        with pytest.raises(ComponentArgsError, match="lwa_layer_version = 28: must be at least 30"):
            check_origin_args("o", minimal_origin_args(cold_start="snapstart", lwa_layer_version=28, server=server))


def test_a_pushed_image_deploys_under_snapstart_with_its_readiness_check_bounded():
    from review.variants import WITHOUT_PROVISIONED

    run = run_program("prod", config_overrides={**WITHOUT_PROVISIONED, "originColdStart": "snapstart",
                                                "lwaLayerVersion": 30, "server": {"imageDigest": PUSHED}})
    for region in REGIONS:
        fn = function_of(run, region)
        assert fn["packageType"] == "Image" and fn["snapStart"] == {"applyOn": "PublishedVersions"}
        _, env = environment_of(run, region)
        assert env["AWS_LWA_READINESS_CHECK_TIMEOUT_SECONDS"] == "8"
