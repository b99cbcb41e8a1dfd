"""Cross-resource rules: queues and their consumers, concurrency, Function URL permissions,
async destinations, trust, alarm regions, schedules, global table replicas, name lengths."""

from __future__ import annotations

import json
import re
from typing import Any

from components.image import lifecycle_policy_problems
from devkit.mock_program import Resource
from review.contracts.constraints import (
    ALARM_ACTIONS,
    DESTINATIONS,
    ESM_BATCHING,
    ESM_SQS,
    EXECUTION_ROLE,
    GLOBAL_TABLES,
    IMAGES,
    PROVISIONED,
    SCHEDULE_GROUPS,
    SCHEDULER_ROLE,
    SNAPSTART,
    STATES_LAMBDA,
    URL_AUTH,
    CheckResult,
    rule,
)
from review.contracts.iam import Graph, allows, trusted_services
from review.contracts.resource_types import (
    ALARM,
    ALIAS,
    CF_FUNCTION,
    ECR_LIFECYCLE,
    ECR_POLICY,
    ECR_REPOSITORY,
    ESM,
    INVOKE_CONFIG,
    LAMBDA,
    LOG_GROUP,
    PERMISSION,
    POLICY,
    PROVISIONED_CONFIG,
    QUEUE,
    ROLE,
    ROLE_POLICY,
    SCALING_TARGET,
    SCHEDULE,
    SCHEDULE_GROUP,
    SECRET,
    STATE_MACHINE,
    TABLE,
    TOPIC,
    URL,
)
from review.resources import get_path, output, plain, snapstart_on


def _sqs_mappings(graph: Graph, result: CheckResult) -> list[tuple[Resource, Resource, Resource, str]]:
    """(mapping, queue, function, queue arn) for every SQS event source mapping; a
    mapping whose queue or function the program does not create is a problem."""
    out = []
    for mapping in graph.run.of_type(ESM):
        source = plain(mapping.inputs.get("eventSourceArn"))
        if not isinstance(source, str) or ":sqs:" not in source:
            continue
        result.resources += 1
        queue = graph.by_arn.get(source)
        function, _ = graph.function(plain(mapping.inputs.get("functionName")), mapping.region)
        if queue is None or function is None:
            result.problems.append(f"{mapping.name}: its queue or function is not created by this program: unverifiable")
            continue
        out.append((mapping, queue, function, source))
    return out


@rule("sqs.visibility-6x-consumer-timeout",
      "each SQS source queue's visibility timeout is at least 6x its consumer function's timeout", ESM_SQS)
def _visibility(graph: Graph, result: CheckResult) -> None:
    for mapping, queue, function, _ in _sqs_mappings(graph, result):
        result.values += 1
        visibility = plain(queue.inputs.get("visibilityTimeoutSeconds"))
        visibility = 30 if visibility is None else visibility
        timeout = plain(function.inputs.get("timeout")) or 3
        if visibility < 6 * timeout:
            result.problems.append(
                f"{mapping.name}: queue {queue.name} visibility {visibility} s < 6 x {function.name} timeout "
                f"{timeout} s = {6 * timeout} s"
            )


@rule("sqs.batching", "batch size above 10 needs a batching window; FIFO queues take at most 10", ESM_BATCHING)
def _batching(graph: Graph, result: CheckResult) -> None:
    for mapping, queue, _, _ in _sqs_mappings(graph, result):
        result.values += 1
        size = plain(mapping.inputs.get("batchSize")) or 10
        window = plain(mapping.inputs.get("maximumBatchingWindowInSeconds")) or 0
        if size > 10 and window < 1:
            result.problems.append(f"{mapping.name}: batchSize {size} > 10 needs maximumBatchingWindowInSeconds >= 1")
        if plain(queue.inputs.get("fifoQueue")) and size > 10:
            result.problems.append(f"{mapping.name}: FIFO queue {queue.name} takes batches of at most 10")


@rule("sqs.consumer-can-receive",
      "the consumer's role may receive, delete and read attributes of its source queue", EXECUTION_ROLE)
def _consumer_permissions(graph: Graph, result: CheckResult) -> None:
    for mapping, _, function, arn in _sqs_mappings(graph, result):
        result.values += 1
        role = graph.role_of(function)
        if role is None:
            result.problems.append(f"{mapping.name}: {function.name}'s role is not created by this program")
            continue
        statements = graph.statements(role)
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
            if not allows(statements, action, arn):
                result.problems.append(f"{mapping.name}: role {role.name} does not allow {action} on {arn}")


def _reserved(function: Resource) -> int | None:
    value = plain(function.inputs.get("reservedConcurrentExecutions"))
    return None if value is None or value == -1 else int(value)


RESERVED = "https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html"


@rule("lambda.reserved-not-zero",
      "no function reserves concurrency 0 (Lambda throttles every invocation of such a function)", RESERVED)
def _reserved_not_zero(graph: Graph, result: CheckResult) -> None:
    for function in graph.run.of_type(LAMBDA):
        result.resources += 1
        reserved = _reserved(function)
        if reserved is None:
            continue
        result.values += 1
        if reserved == 0:
            result.problems.append(f"{function.name}: reservedConcurrentExecutions 0 throttles every invocation "
                                   "(leave it unset to reserve none)")


@rule("lambda.provisioned-within-reserved",
      "provisioned concurrency is on a version or alias and at most the function's reserved concurrency", PROVISIONED)
def _provisioned(graph: Graph, result: CheckResult) -> None:
    for config in graph.run.of_type(PROVISIONED_CONFIG):
        result.resources += 1
        result.values += 1
        function, _ = graph.function(plain(config.inputs.get("functionName")), config.region)
        qualifier = plain(config.inputs.get("qualifier"))
        if function is None:
            result.problems.append(f"{config.name}: its function is not created by this program: unverifiable")
            continue
        if not qualifier or qualifier == "$LATEST":
            result.problems.append(f"{config.name}: qualifier {qualifier!r}: needs a published version or alias")
        reserved = _reserved(function)
        provisioned = plain(config.inputs.get("provisionedConcurrentExecutions"))
        if reserved is None:
            result.notes.append(f"{config.name}: {function.name} has no reserved concurrency (account pool applies)")
        elif provisioned > reserved:
            result.problems.append(f"{config.name}: provisioned {provisioned} > reserved {reserved} of {function.name}")


@rule("lambda.autoscaling-within-reserved",
      "provisioned-concurrency auto scaling targets an alias of a program function, min <= max <= reserved",
      PROVISIONED)
def _autoscaling(graph: Graph, result: CheckResult) -> None:
    for target in graph.run.of_type(SCALING_TARGET):
        if plain(target.inputs.get("scalableDimension")) != "lambda:function:ProvisionedConcurrency":
            continue
        result.resources += 1
        result.values += 1
        resource_id = str(plain(target.inputs.get("resourceId")))
        match = re.fullmatch(r"function:([A-Za-z0-9_-]+):([A-Za-z0-9_$-]+)", resource_id)
        if match is None:
            result.problems.append(f"{target.name}: resourceId {resource_id!r} is not function:NAME:QUALIFIER")
            continue
        function = graph.functions.get((target.region, match.group(1)))
        if function is None:
            result.problems.append(f"{target.name}: {resource_id} is not a function of this program in {target.region}")
            continue
        low, high = plain(target.inputs.get("minCapacity")), plain(target.inputs.get("maxCapacity"))
        if low > high:
            result.problems.append(f"{target.name}: minCapacity {low} > maxCapacity {high}")
        reserved = _reserved(function)
        if reserved is not None and high > reserved:
            result.problems.append(f"{target.name}: maxCapacity {high} > reserved concurrency {reserved}")
        aliases = {
            plain(a.inputs.get("name")) for a in graph.run.of_type(ALIAS)
            if a.region == target.region and graph.function(plain(a.inputs.get("functionName")), a.region)[0] is function
        }
        if match.group(2) not in aliases and not match.group(2).isdigit():
            result.problems.append(f"{target.name}: qualifier {match.group(2)} is not an alias of {function.name}")


@rule("lambda.function-url-permissions",
      "a public (NONE) Function URL has lambda:InvokeFunctionUrl (with its auth type) and lambda:InvokeFunction "
      "(invoked_via_function_url) for principal '*'; an AWS_IAM one has no permission for '*', and every role "
      "of the program allowed lambda:InvokeFunctionUrl on it (only under lambda:FunctionUrlAuthType AWS_IAM) "
      "is allowed lambda:InvokeFunction on it too", URL_AUTH)
def _url_permissions(graph: Graph, result: CheckResult) -> None:
    permissions = graph.run.of_type(PERMISSION)
    for url in graph.run.of_type(URL):
        result.resources += 1
        result.values += 1
        function, _ = graph.function(plain(url.inputs.get("functionName")), url.region)
        if function is None:
            result.problems.append(f"{url.name}: its function is not created by this program: unverifiable")
            continue
        qualifier = plain(url.inputs.get("qualifier"))
        auth = plain(url.inputs.get("authorizationType"))
        mine = []
        for permission in permissions:
            target, ref_qualifier = graph.function(plain(permission.inputs.get("function")), permission.region)
            if target is function and (plain(permission.inputs.get("qualifier")) or ref_qualifier) == qualifier:
                mine.append(plain(permission.inputs))
        if auth == "AWS_IAM":
            _iam_url_callers(graph, result, url, function, qualifier, mine)
            continue
        url_perm = [p for p in mine if p.get("action") == "lambda:InvokeFunctionUrl"]
        invoke_perm = [p for p in mine if p.get("action") == "lambda:InvokeFunction" and p.get("invokedViaFunctionUrl")]
        if not any(p.get("functionUrlAuthType") == auth for p in url_perm):
            result.problems.append(f"{url.name}: no lambda:InvokeFunctionUrl permission with functionUrlAuthType {auth}")
        if not invoke_perm:
            result.problems.append(f"{url.name}: no lambda:InvokeFunction permission with invokedViaFunctionUrl")
        if auth == "NONE" and not all(p.get("principal") == "*" for p in url_perm + invoke_perm):
            result.problems.append(f"{url.name}: a public (NONE) URL needs principal '*' on both permissions")


def _iam_url_callers(graph: Graph, result: CheckResult, url: Resource, function: Resource, qualifier: Any,
                     permissions: list[dict[str, Any]]) -> None:
    """An AWS_IAM URL: nobody anonymous, and each caller role holds both grants (AWS requires both)."""
    if any(p.get("principal") == "*" for p in permissions):
        result.problems.append(f"{url.name}: an AWS_IAM URL must not grant principal '*' (anyone could call it)")
    arn = plain(function.outputs.get("arn")) or ""
    target = f"{arn}:{qualifier}" if qualifier else arn
    for role in graph.run.of_type("aws:iam/role:Role"):
        statements = graph.statements(role)
        if not allows(statements, "lambda:InvokeFunctionUrl", target):
            continue
        result.values += 1
        if not allows(statements, "lambda:InvokeFunction", target):
            result.problems.append(f"{url.name}: role {role.name} may call lambda:InvokeFunctionUrl on {target} "
                                   "but not lambda:InvokeFunction (a Function URL needs both)")
        unconditioned = [st for st in statements if st.get("Effect") == "Allow"
                         and allows([st], "lambda:InvokeFunctionUrl", target)
                         and (st.get("Condition") or {}).get("StringEquals", {}).get(
                             "lambda:FunctionUrlAuthType") != "AWS_IAM"]
        if unconditioned:
            result.problems.append(f"{url.name}: role {role.name} may call lambda:InvokeFunctionUrl on {target} "
                                   "without the condition lambda:FunctionUrlAuthType = AWS_IAM")


_DESTINATION_ACTIONS = {"sqs": "sqs:SendMessage", "sns": "sns:Publish", "lambda": "lambda:InvokeFunction",
                        "events": "events:PutEvents", "s3": "s3:PutObject"}


@rule("lambda.async-destinations-writable",
      "asynchronous-invocation destinations exist in the program and the function's role may write to them",
      DESTINATIONS)
def _destinations(graph: Graph, result: CheckResult) -> None:
    for config in graph.run.of_type(INVOKE_CONFIG):
        result.resources += 1
        function, _ = graph.function(plain(config.inputs.get("functionName")), config.region)
        destinations = get_path(config.inputs, "destinationConfig.onSuccess.destination") + get_path(
            config.inputs, "destinationConfig.onFailure.destination"
        )
        if function is None:
            result.problems.append(f"{config.name}: its function is not created by this program: unverifiable")
            continue
        role = graph.role_of(function)
        for where, arn in destinations:
            result.values += 1
            service = str(arn).split(":")[2] if str(arn).startswith("arn:") else ""
            action = _DESTINATION_ACTIONS.get(service)
            if action is None:
                result.problems.append(f"{config.name}: {where} {arn} is not a destination type Lambda supports")
                continue
            if graph.by_arn.get(arn) is None:
                result.problems.append(f"{config.name}: {where} {arn} is not created by this program")
            if role is None or not allows(graph.statements(role), action, arn):
                result.problems.append(f"{config.name}: {function.name}'s role does not allow {action} on {arn}")


def _counted(result: CheckResult, resources: list[Resource]) -> list[Resource]:
    """The resources a rule checks, one value each, counted in its result."""
    result.resources += len(resources)
    result.values += len(resources)
    return resources


@rule("lambda.snapstart-alone",
      "a SnapStart function is a published python3.12+, Java or .NET zip function, or an image, without provisioned "
      "concurrency, with at most 512 MB of ephemeral storage", SNAPSTART)
def _snapstart(graph: Graph, result: CheckResult) -> None:
    provisioned = {(plain(c.inputs.get("functionName")), c.region) for c in graph.run.of_type(PROVISIONED_CONFIG)}
    for function in _counted(result, [f for f in graph.run.of_type(LAMBDA) if snapstart_on(f)]):
        name = plain(function.inputs.get("name")) or function.name
        runtime = str(plain(function.inputs.get("runtime")) or "")
        # An image has no runtime: SnapStart takes it when its runtime client (the Web
        # Adapter, 1.1.0+) coordinates the lifecycle (snapstart-runtime-hooks-custom.html).
        if plain(function.inputs.get("packageType")) == "Image":
            pass
        elif not re.fullmatch(r"python3\.(1[2-9]|[2-9]\d)|java\d+|dotnet\d+", runtime):
            result.problems.append(f"{function.name}: runtime {runtime!r} has no SnapStart (Python 3.12+, Java, .NET)")
        if not plain(function.inputs.get("publish")):
            result.problems.append(f"{function.name}: SnapStart applies to published versions: publish it")
        if (name, function.region) in provisioned:
            result.problems.append(f"{function.name}: SnapStart cannot be combined with provisioned concurrency")
        sizes = get_path(function.inputs, "ephemeralStorage.size")
        storage = plain(sizes[0][1]) if sizes else 512  # Lambda's default
        if storage > 512:
            result.problems.append(f"{function.name}: ephemeral storage {storage} MB: SnapStart allows at most 512 MB")


@rule("lambda.image-by-digest-in-own-region",
      "an image function names its image by digest in an ECR repository of its own region that Lambda may pull from",
      IMAGES)
def _images(graph: Graph, result: CheckResult) -> None:
    repositories = {(str(output(r, "repositoryUrl")), r.region): r for r in graph.run.of_type(ECR_REPOSITORY)}
    pulls = {(plain(p.inputs.get("repository")), p.region): p for p in graph.run.of_type(ECR_POLICY)}
    images = [f for f in graph.run.of_type(LAMBDA) if plain(f.inputs.get("packageType")) == "Image"]
    for function in _counted(result, images):
        uri = str(plain(function.inputs.get("imageUri")))
        found = re.fullmatch(r"(\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com/[^@:]+)@sha256:[0-9a-f]{64}", uri)
        if not found:
            result.problems.append(f"{function.name}: image {uri!r} is not named by digest in an ECR repository")
            continue
        if found.group(2) != function.region:
            result.problems.append(f"{function.name}: image in {found.group(2)}, function in {function.region}: "
                                   "Lambda pulls only from its own region")
            continue
        repository = repositories.get((found.group(1), function.region))
        if repository is None:
            result.notes.append(f"{function.name}: repository {found.group(1)} is not created here: unverifiable")
            continue
        policy = pulls.get((plain(repository.inputs.get("name")), function.region))
        if policy is None or "lambda.amazonaws.com" not in str(plain(policy.inputs.get("policy"))):
            result.problems.append(f"{function.name}: repository {repository.name} has no policy letting Lambda pull")
        if function.inputs.get("layers"):
            result.problems.append(f"{function.name}: an image function takes no layers")


@rule("ecr.lifecycle-policy-rules",
      "every ECR lifecycle policy has rules AWS accepts (priorities, tag selections, counts, expire actions)",
      "https://docs.aws.amazon.com/AmazonECR/latest/userguide/lifecycle_policy_parameters.html")
def _ecr_lifecycle(graph: Graph, result: CheckResult) -> None:
    for policy in _counted(result, graph.run.of_type(ECR_LIFECYCLE)):
        for problem in lifecycle_policy_problems(str(plain(policy.inputs.get("policy")))):
            result.problems.append(f"{policy.name}: {problem}")


@rule("lambda.execution-role-trust", "every function's execution role trusts lambda.amazonaws.com", EXECUTION_ROLE)
def _execution_trust(graph: Graph, result: CheckResult) -> None:
    for function in graph.run.of_type(LAMBDA):
        result.resources += 1
        result.values += 1
        role = graph.role_of(function)
        if role is None:
            result.problems.append(f"{function.name}: role {plain(function.inputs.get('role'))} is not created here")
        elif "lambda.amazonaws.com" not in trusted_services(role):
            result.problems.append(f"{function.name}: role {role.name} does not trust lambda.amazonaws.com")


@rule("cloudwatch.alarm-actions-same-region", "alarm actions name SNS topics in the alarm's own region", ALARM_ACTIONS)
def _alarm_regions(graph: Graph, result: CheckResult) -> None:
    for alarm in graph.run.of_type(ALARM):
        result.resources += 1
        for key in ("alarmActions", "okActions", "insufficientDataActions"):
            for arn in plain(alarm.inputs.get(key)) or []:
                result.values += 1
                parts = str(arn).split(":")
                if len(parts) > 3 and parts[2] == "sns" and parts[3] != alarm.region:
                    result.problems.append(f"{alarm.name}: {key} {arn} is not in {alarm.region}")


@rule("scheduler.target-invocable",
      "each schedule's role trusts scheduler.amazonaws.com and may invoke its Lambda target or start its state "
      "machine", SCHEDULER_ROLE)
def _schedules(graph: Graph, result: CheckResult) -> None:
    for schedule in graph.run.of_type(SCHEDULE):
        result.resources += 1
        target = plain(schedule.inputs.get("target")) or {}
        arn, role_arn = str(target.get("arn") or ""), target.get("roleArn")
        result.values += 1
        role = graph.by_arn.get(role_arn) if isinstance(role_arn, str) else None
        if role is None or role.type != ROLE:
            result.problems.append(f"{schedule.name}: role {role_arn} is not created by this program: unverifiable")
            continue
        if "scheduler.amazonaws.com" not in trusted_services(role):
            result.problems.append(f"{schedule.name}: role {role.name} does not trust scheduler.amazonaws.com")
        if ":lambda:" in arn and not allows(graph.statements(role), "lambda:InvokeFunction", arn):
            result.problems.append(f"{schedule.name}: role {role.name} does not allow lambda:InvokeFunction on {arn}")
        if ":states:" in arn and not allows(graph.statements(role), "states:StartExecution", arn):
            result.problems.append(f"{schedule.name}: role {role.name} does not allow states:StartExecution on {arn}")


def _task_functions(machine: dict[str, Any]) -> list[str]:
    """The FunctionName of every lambda:invoke Task state, Map processors included."""
    found: list[str] = []
    for state in machine.get("States", {}).values():
        if state.get("Type") == "Task" and str(state.get("Resource", "")).startswith("arn:aws:states:::lambda:invoke"):
            found.append(str((state.get("Parameters") or {}).get("FunctionName", "")))
        for inner in (state.get("ItemProcessor"), state.get("Iterator")):
            if isinstance(inner, dict):
                found.extend(_task_functions(inner))
    return found


@rule("states.workflow-invocable",
      "each state machine's definition is JSON, its role trusts states.amazonaws.com and may invoke every Lambda "
      "function its Task states name", STATES_LAMBDA)
def _state_machines(graph: Graph, result: CheckResult) -> None:
    for machine in graph.run.of_type(STATE_MACHINE):
        result.resources += 1
        role_arn = plain(machine.inputs.get("roleArn"))
        role = graph.by_arn.get(role_arn) if isinstance(role_arn, str) else None
        if role is None or role.type != ROLE:
            result.problems.append(f"{machine.name}: role {role_arn} is not created by this program: unverifiable")
            continue
        if "states.amazonaws.com" not in trusted_services(role):
            result.problems.append(f"{machine.name}: role {role.name} does not trust states.amazonaws.com")
        try:
            definition = json.loads(str(plain(machine.inputs.get("definition"))))
        except ValueError as exc:
            result.problems.append(f"{machine.name}: the definition is not JSON ({exc})")
            continue
        for function in _task_functions(definition):
            result.values += 1
            if not allows(graph.statements(role), "lambda:InvokeFunction", function):
                result.problems.append(f"{machine.name}: role {role.name} does not allow lambda:InvokeFunction on "
                                       f"{function}")


@rule("scheduler.group-exists", "each schedule's group is the default group or one this program creates in its region",
      SCHEDULE_GROUPS)
def _schedule_groups(graph: Graph, result: CheckResult) -> None:
    groups = {(g.region, output(g, "name")) for g in graph.run.of_type(SCHEDULE_GROUP)}
    for schedule in graph.run.of_type(SCHEDULE):
        result.resources += 1
        result.values += 1
        group = plain(schedule.inputs.get("groupName")) or "default"
        if group != "default" and (schedule.region, group) not in groups:
            result.problems.append(f"{schedule.name}: group {group} is not created by this program in {schedule.region}")


@rule("dynamodb.global-table-replicas",
      "global-table replicas are other regions, each once, and the table streams NEW_AND_OLD_IMAGES", GLOBAL_TABLES)
def _replicas(graph: Graph, result: CheckResult) -> None:
    for table in graph.run.of_type(TABLE):
        result.resources += 1
        replicas = [r.get("regionName") for r in plain(table.inputs.get("replicas")) or []]
        if not replicas:
            continue
        result.values += 1
        if table.region in replicas:
            result.problems.append(f"{table.name}: replicas include the table's own region {table.region}")
        if len(set(replicas)) != len(replicas):
            result.problems.append(f"{table.name}: a replica region is listed twice: {replicas}")
        inputs = plain(table.inputs)
        if not inputs.get("streamEnabled") or inputs.get("streamViewType") != "NEW_AND_OLD_IMAGES":
            result.problems.append(f"{table.name}: replicas need streamEnabled with streamViewType NEW_AND_OLD_IMAGES")


# Physical-name limits, checked on the name AWS will see (auto-names add 8 characters).
NAME_LIMITS = {LAMBDA: 64, ROLE: 64, QUEUE: 80, TOPIC: 256, LOG_GROUP: 512, ALARM: 255, CF_FUNCTION: 64,
               SCHEDULE: 64, TABLE: 255, POLICY: 128, ROLE_POLICY: 128, SECRET: 512}


@rule("names.physical-name-lengths", "physical names (given or auto-named) fit AWS's name length limits",
      "per-service API references (see INPUT_CONTRACTS sources)")
def _name_lengths(graph: Graph, result: CheckResult) -> None:
    for resource in graph.run.resources:
        limit = NAME_LIMITS.get(resource.type)
        if limit is None:
            continue
        result.resources += 1
        result.values += 1
        name = str(output(resource, "name") or "")
        if len(name) > limit:
            result.problems.append(f"{resource.name}: physical name {name!r} has {len(name)} characters, limit {limit}")


