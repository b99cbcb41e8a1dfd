"""The origin as a container image: one ECR repository per origin region, and the
image in it, pinned by digest.

Lambda pulls a function's image only from ECR in the function's own region, so each
origin region has its own repository (scan on push, immutable tags, a lifecycle
policy, a policy letting Lambda pull), and the function names the image by digest
in that repository. The image comes one of two ways:
- built from the server's folder (``mcp-edge:server.image``: its Dockerfile, the folder
  as the build context, unchanged) for linux/arm64 and pushed by the program with
  pulumi-docker-build (``docker_build.Image``), one push per region; the build gets
  ``LWA_VERSION``, the Web Adapter image tag of the stack's lwaLayerVersion, as a build arg;
- already pushed by a pipeline, given by digest (``mcp-edge:server.imageDigest``): the
  same digest in every region's repository (a push of one image to several
  repositories keeps its digest).

The image is the user's: it starts its server itself (ENTRYPOINT/CMD) on $PORT, with the
adapter copied to /opt/extensions (``COPY --from=public.ecr.aws/awsguru/aws-lambda-adapter:<tag>
/lambda-adapter /opt/extensions/lambda-adapter``).
"""

from __future__ import annotations

import hashlib
import json
import os
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
# Images a repository keeps: the newest pushes, enough to roll back a few releases.
KEEP_IMAGES = 20
UNTAGGED_EXPIRE_DAYS = 7


def lwa_image(layer_version: int) -> str:
    """The Web Adapter's published image of the same release as ``layer_version``."""
    return f"public.ecr.aws/awsguru/aws-lambda-adapter:{LWA_IMAGE_TAGS[layer_version]}"


def repository_name_for(server_id: str, stack: str | None = None) -> str:
    # The same name in every region: a pipeline pushes to <account>.dkr.ecr.<region>.amazonaws.com/<name>.
    return physical_name(server_id, "origin", limit=ECR_REPOSITORY, stack=stack)


def lifecycle_policy() -> str:
    return json.dumps({"rules": [
        {"rulePriority": 1, "description": f"untagged images (superseded pushes) after {UNTAGGED_EXPIRE_DAYS} days",
         "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                       "countNumber": UNTAGGED_EXPIRE_DAYS},
         "action": {"type": "expire"}},
        {"rulePriority": 2, "description": f"keep the {KEEP_IMAGES} newest images",
         "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": KEEP_IMAGES},
         "action": {"type": "expire"}},
    ]}, sort_keys=True)


def lambda_pull_policy(region: str, account_id: str, function_name: str) -> str:
    """Lambda (for this function only) may pull from the repository."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "LambdaPull",
        "Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
        "Condition": {"StringLike": {"aws:sourceArn": f"arn:aws:lambda:{region}:{account_id}:function:{function_name}"}},
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
            image_tag_mutability="IMMUTABLE",
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

        token = aws.ecr.get_authorization_token_output(registry_id=self.repository.registry_id, region=region)
        self.image = docker_build.Image(
            f"{name}-image",
            context=docker_build.BuildContextArgs(location=build_location(context)),
            dockerfile=docker_build.DockerfileArgs(location=build_location(context / DOCKERFILE)),
            # One platform, and no attestation (the provider turns off buildx's default
            # provenance): a single image manifest, as Lambda requires (it refuses an index).
            platforms=[docker_build.Platform.LINUX_ARM64],
            build_args={"LWA_VERSION": LWA_IMAGE_TAGS[lwa_layer_version]},
            # A new tag exactly when the contents change.
            tags=[pulumi.Output.concat(self.repository.repository_url, ":", context_digest(context)[:16])],
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

