"""The origin as a container image: one ECR repository per origin region, and the
image in it, pinned by digest.

Lambda pulls a function's image only from ECR in the function's own region, so each
origin region has its own repository (scan on push, immutable tags, a lifecycle
policy, a policy letting Lambda pull), and the function names the image by digest
in that repository. The image comes one of two ways:
- built from the server's folder (``mcp-edge:server.image``: its Dockerfile, the folder
  as the build context, unchanged) for linux/arm64 and pushed by the program with
  pulumi-docker-build (``docker_build.Image``), one push per region, under the tag
  ``build-<hash of every build input>``; the build gets ``LWA_VERSION``, the Web Adapter
  image tag of the stack's lwaLayerVersion, as a build arg;
- already pushed by a pipeline, given by digest (``mcp-edge:server.imageDigest``): the
  same digest in every region's repository (a push of one image to several
  repositories keeps its digest).

What a repository keeps: tags are immutable except ``latest`` (a pipeline may move it),
and the lifecycle policy expires only the program's own ``build-*`` images beyond the
newest few, of which the deployed one is always the newest. A pipeline's images, tagged
or pushed by digest alone, are never expired by the stack, so no digest a function
version names can disappear under it (Lambda would answer ``ImageDeleted``).

The image is the user's: it starts its server itself (ENTRYPOINT/CMD) on $PORT, with the
adapter copied to /opt/extensions (``COPY --from=public.ecr.aws/awsguru/aws-lambda-adapter:<tag>
/lambda-adapter /opt/extensions/lambda-adapter``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws

from components.naming import physical_name

# Web Adapter layer version (LambdaAdapterLayerArm64) -> the same release's published
# image tag (public.ecr.aws/awsguru/aws-lambda-adapter), from the adapter's release
# notes; 29 was cut by a release that was withdrawn.
LWA_IMAGE_TAGS = {22: "0.8.3", 23: "0.8.4", 24: "0.9.0", 25: "0.9.1", 26: "1.0.0-rc1", 27: "1.0.0", 28: "1.0.1",
                  30: "1.1.0"}
# A pushed image's digest (what docker push and ECR report).
IMAGE_DIGEST_PATTERN = r"sha256:[0-9a-f]{64}"
DOCKERFILE = "Dockerfile"
PLATFORM = "linux/arm64"
# ECR repository names: 2-256 characters (CreateRepository).
ECR_REPOSITORY = 256
# The program's own builds are tagged build-<hash>; a pipeline's tags must not start so.
BUILD_TAG_PREFIX = "build-"
# The one tag a pipeline may move (IMMUTABLE_WITH_EXCLUSION): every other tag is immutable.
MOVING_TAGS = ("latest",)
# The program's builds a repository keeps: the newest ones, enough to roll back a few releases.
KEEP_IMAGES = 20


def lwa_image(layer_version: int) -> str:
    """The Web Adapter's published image of the same release as ``layer_version``."""
    return f"public.ecr.aws/awsguru/aws-lambda-adapter:{LWA_IMAGE_TAGS[layer_version]}"


def repository_name_for(server_id: str, stack: str | None = None) -> str:
    # The same name in every region: a pipeline pushes to <account>.dkr.ecr.<region>.amazonaws.com/<name>.
    return physical_name(server_id, "origin", limit=ECR_REPOSITORY, stack=stack)


def lifecycle_policy() -> str:
    """Expires only the program's own builds beyond the newest KEEP_IMAGES. Nothing untagged
    or pushed by a pipeline is expired: a pipeline's digest (server.imageDigest) may be what
    the live version runs, and ECR's lifecycle rules cannot see which images Lambda uses."""
    return json.dumps({"rules": [
        {"rulePriority": 1, "description": f"the program's builds beyond the {KEEP_IMAGES} newest",
         "selection": {"tagStatus": "tagged", "tagPrefixList": [BUILD_TAG_PREFIX],
                       "countType": "imageCountMoreThan", "countNumber": KEEP_IMAGES},
         "action": {"type": "expire"}},
    ]}, sort_keys=True)


# ECR lifecycle policy rules, as AWS documents them
# (https://docs.aws.amazon.com/AmazonECR/latest/userguide/lifecycle_policy_parameters.html).
_TAG_STATUSES = ("tagged", "untagged", "any")
_COUNT_TYPES = ("imageCountMoreThan", "sinceImagePushed")


def lifecycle_policy_problems(policy_text: str) -> list[str]:
    """What AWS would refuse in a lifecycle policy: each rule has a unique positive integer
    rulePriority, a selection with a known tagStatus (tagged needs exactly one of
    tagPrefixList/tagPatternList, non-empty; the others take neither), a countType with a
    positive integer countNumber (sinceImagePushed also countUnit days, imageCountMoreThan
    none), and the action expire; a rule with tagStatus any has the highest priority number."""
    try:
        rules = json.loads(policy_text)["rules"]
    except (ValueError, KeyError, TypeError):
        return ["the policy must be a JSON object with a rules list"]
    if not isinstance(rules, list) or not rules:
        return ["rules must be a non-empty list"]
    problems: list[str] = []
    priorities = [r.get("rulePriority") if isinstance(r, dict) else None for r in rules]
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        if not isinstance(rule, dict):
            problems.append(f"{where}: must be an object")
            continue
        priority = rule.get("rulePriority")
        if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
            problems.append(f"{where}.rulePriority: must be a positive integer")
        elif priorities.count(priority) > 1:
            problems.append(f"{where}.rulePriority: {priority} is not unique")
        selection = rule.get("selection")
        if not isinstance(selection, dict):
            problems.append(f"{where}.selection: must be an object")
            continue
        status = selection.get("tagStatus")
        lists = [k for k in ("tagPrefixList", "tagPatternList") if k in selection]
        if status not in _TAG_STATUSES:
            problems.append(f"{where}.selection.tagStatus: must be one of {', '.join(_TAG_STATUSES)}")
        elif status == "tagged":
            if len(lists) != 1 or not isinstance(selection[lists[0]], list) or not selection[lists[0]]:
                problems.append(f"{where}.selection: tagStatus tagged needs exactly one non-empty tagPrefixList or "
                                "tagPatternList")
        elif lists:
            problems.append(f"{where}.selection: {lists[0]} is only for tagStatus tagged")
        if status == "any" and isinstance(priority, int) and priority != max(p for p in priorities if isinstance(p, int)):
            problems.append(f"{where}: a rule with tagStatus any must have the highest rulePriority")
        count_type, number = selection.get("countType"), selection.get("countNumber")
        if count_type not in _COUNT_TYPES:
            problems.append(f"{where}.selection.countType: must be one of {', '.join(_COUNT_TYPES)}")
        elif count_type == "sinceImagePushed" and selection.get("countUnit") != "days":
            problems.append(f"{where}.selection.countUnit: sinceImagePushed counts days")
        elif count_type == "imageCountMoreThan" and "countUnit" in selection:
            problems.append(f"{where}.selection.countUnit: imageCountMoreThan takes none")
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            problems.append(f"{where}.selection.countNumber: must be a positive integer")
        if (rule.get("action") or {}).get("type") != "expire":
            problems.append(f"{where}.action.type: must be expire")
    return problems


def lambda_pull_policy(region: str, account_id: str, function_name: str) -> str:
    """Lambda (for this function only) may pull from the repository. Lambda checks the
    repository policy with aws:sourceArn set to the function it creates or updates, and
    AWS's own statements for Lambda's pulls name ``function:*``-style ARNs
    (https://docs.aws.amazon.com/lambda/latest/dg/images-create.html#configuration-images-permissions):
    so the function's unqualified ARN and every qualified one (its versions and the alias
    live), not other functions of the account."""
    function_arn = f"arn:aws:lambda:{region}:{account_id}:function:{function_name}"
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "LambdaPull",
        "Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
        "Condition": {"StringLike": {"aws:sourceArn": [function_arn, f"{function_arn}:*"]}},
    }]}, sort_keys=True)


def context_digest(folder: Path) -> str:
    """Hash of every file of a build context (names and bytes, dot-folders left out): the
    image's tag, so a new tag exactly when the contents change."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(root) / name
            h.update(path.relative_to(folder).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def build_tag(context: str, dockerfile: bytes, build_args: Mapping[str, str], platforms: tuple[str, ...]) -> str:
    """The image's tag: a hash of everything that goes into the build (the context's
    digest, the Dockerfile, the build args, the platforms), so a change of any of them
    pushes a new tag (an immutable tag cannot take another image) and the same inputs
    give the same tag."""
    inputs = {"context": context, "dockerfile": hashlib.sha256(dockerfile).hexdigest(),
              "buildArgs": dict(sorted(build_args.items())), "platforms": list(platforms)}
    return BUILD_TAG_PREFIX + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BuildHost:
    """What decides whether this machine's Docker can build for another CPU: the OS, the
    CPU (platform.machine()), the binfmt_misc entries (name -> content) and DOCKER_HOST."""

    system: str
    machine: str
    binfmt: Mapping[str, str] = field(default_factory=dict)
    docker_host: str = ""


BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
# platform.machine() spellings of each build platform's CPU, and its binfmt_misc entry
# (what `docker run --privileged --rm tonistiigi/binfmt --install <arch>` registers).
_NATIVE_MACHINES = {"linux/arm64": ("aarch64", "arm64"), "linux/amd64": ("x86_64", "amd64")}
_BINFMT_ENTRIES = {"linux/arm64": "qemu-aarch64", "linux/amd64": "qemu-x86_64"}


def build_host() -> BuildHost:
    """This machine, as build_host_problem reads it."""
    entries: dict[str, str] = {}
    if BINFMT_MISC.is_dir():
        for entry in BINFMT_MISC.iterdir():
            if entry.name not in ("register", "status"):
                try:
                    entries[entry.name] = entry.read_text()
                except OSError:
                    continue
    return BuildHost(platform.system(), platform.machine(), entries, os.environ.get("DOCKER_HOST", ""))


def build_host_problem(host: BuildHost, target: str = PLATFORM) -> str | None:
    """Why Docker on ``host`` cannot build a ``target`` image, with the fix; None when it can:
    the CPU is the target's, or a Linux kernel has an enabled QEMU binfmt_misc entry for it.
    Docker Desktop (macOS, Windows) brings its own emulation, and a remote DOCKER_HOST is
    another machine, so neither is judged here."""
    if host.machine.lower() in _NATIVE_MACHINES.get(target, ()):
        return None
    if host.system != "Linux" or (host.docker_host and not host.docker_host.startswith("unix://")):
        return None
    entry = _BINFMT_ENTRIES.get(target)
    if entry is None:
        return None
    content = host.binfmt.get(entry, "")
    if content.splitlines()[:1] == ["enabled"]:
        return None
    arch = target.partition("/")[2]
    state = "is disabled" if content else "is missing"
    return (f"building the origin image for {target} on this {host.machine} machine needs QEMU emulation, and the "
            f"binfmt_misc entry {BINFMT_MISC / entry} {state}; install it with "
            f"`docker run --privileged --rm tonistiigi/binfmt --install {arch}` (lost on reboot), or run `pulumi up` "
            f"on an {arch} machine, or push the image from a pipeline and set server.imageDigest")


def build_location(path: Path) -> str:
    """A path as docker-build's inputs hold it: relative to the program's directory when
    inside it, so that the state does not depend on where the checkout lives."""
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


class OriginImage:
    """One region's repository and image; ``uri`` is the image by digest."""

    def __init__(self, name: str, *, region: str, server_id: str, function_name: str, context: Path | None,
                 lwa_layer_version: int, digest: pulumi.Input[str] | None, parent: pulumi.Resource):
        child = pulumi.ResourceOptions(parent=parent)
        self.repository = aws.ecr.Repository(
            f"{name}-images",
            region=region,
            name=repository_name_for(server_id),
            # Every tag but the moving ones is immutable: a build's tag and a pipeline's
            # release tags always name the image they first named.
            image_tag_mutability="IMMUTABLE_WITH_EXCLUSION",
            image_tag_mutability_exclusion_filters=[
                aws.ecr.RepositoryImageTagMutabilityExclusionFilterArgs(filter=tag, filter_type="WILDCARD")
                for tag in MOVING_TAGS],
            # A destroyed stack takes its images with it (a repository holding images
            # cannot be deleted otherwise); the name never changes, so no replacement does.
            force_delete=True,
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            opts=child,
        )
        aws.ecr.LifecyclePolicy(f"{name}-images-lifecycle", region=region, repository=self.repository.name,
                                policy=lifecycle_policy(), opts=child)
        account = aws.get_caller_identity_output().account_id
        pull = aws.ecr.RepositoryPolicy(
            f"{name}-images-lambda-pull", region=region, repository=self.repository.name,
            policy=account.apply(lambda a: lambda_pull_policy(region, a, function_name)), opts=child)
        # What the function must wait for: Lambda checks it may pull when it is created.
        self.policies: list[pulumi.Resource] = [pull]
        self.image: pulumi.CustomResource | None = None
        if digest is None:
            if context is None:
                raise ValueError("an origin image needs a build context (server.image) or a digest (server.image_digest)")
            digest = self._build(name, region, context, lwa_layer_version, child)
        self.digest = pulumi.Output.from_input(digest)
        self.uri = pulumi.Output.concat(self.repository.repository_url, "@", self.digest)

    def _build(self, name: str, region: str, context: Path, lwa_layer_version: int,
               child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        import pulumi_docker_build as docker_build

        if not pulumi.runtime.is_dry_run():  # a preview builds nothing, so needs no emulation
            problem = build_host_problem(build_host())
            if problem:
                raise RuntimeError(problem)
        build_args = {"LWA_VERSION": LWA_IMAGE_TAGS[lwa_layer_version]}
        tag = build_tag(context_digest(context), (context / DOCKERFILE).read_bytes(), build_args, (PLATFORM,))
        token = aws.ecr.get_authorization_token_output(registry_id=self.repository.registry_id, region=region)
        self.image = docker_build.Image(
            f"{name}-image",
            context=docker_build.BuildContextArgs(location=build_location(context)),
            dockerfile=docker_build.DockerfileArgs(location=build_location(context / DOCKERFILE)),
            # One platform, and no attestation (the provider turns off buildx's default
            # provenance): a single image manifest, as Lambda requires (it refuses an index).
            platforms=[docker_build.Platform.LINUX_ARM64],
            build_args=build_args,
            # A new tag exactly when an input of the build changes.
            tags=[pulumi.Output.concat(self.repository.repository_url, ":", tag)],
            push=True,
            # A preview (code review, CI without Docker) shows the digest as unknown
            # instead of building; `pulumi up` builds and pushes.
            build_on_preview=False,
            registries=[docker_build.RegistryArgs(address=self.repository.repository_url,
                                                  username=token.user_name,
                                                  password=pulumi.Output.secret(token.password))],
            opts=child,
        )
        return self.image.digest

