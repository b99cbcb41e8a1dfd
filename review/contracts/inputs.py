"""Input contracts: each constrained pulumi-aws input mapped, by an explicit table, to the API
member it becomes, and checked against that member's constraint."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from devkit.mock_program import ProgramRun
from review.contracts.constraints import (
    ALARM_API,
    CFF_MAX_CODE_BYTES,
    CFF_QUOTAS,
    CLOUDFRONT_QUOTAS,
    CLOUDFRONT_TIMEOUTS,
    DYNAMODB_NAMES,
    IAM_QUOTAS,
    LAMBDA_CREATE,
    LOGS_RETENTION,
    RETENTION_DAYS,
    SCALABLE_TARGET,
    SCHEDULE_TYPES,
    SNS_PROTOCOLS,
    SNS_SUBSCRIBE,
    SNS_TOPIC,
    SQS_ATTRIBUTES,
    SQS_QUEUE_NAME,
    TARGET_TRACKING,
    ApiMember,
    CheckResult,
    Constraint,
    _valid_alarm_period,
    _valid_schedule_expression,
    documented,
    merge,
)
from review.contracts.resource_types import (
    ALARM,
    ALIAS,
    CACHE_POLICY,
    CF_FUNCTION,
    DISTRIBUTION,
    ECR_LIFECYCLE,
    ECR_POLICY,
    ECR_REPOSITORY,
    ESM,
    INVOKE_CONFIG,
    LAMBDA,
    LOG_GROUP,
    ORIGIN_REQUEST_POLICY,
    PERMISSION,
    POLICY,
    PROVISIONED_CONFIG,
    QUEUE,
    ROLE,
    ROLE_POLICY,
    SCALING_POLICY,
    SCALING_TARGET,
    SCHEDULE,
    STATE_MACHINE,
    SUBSCRIPTION,
    TABLE,
    TOPIC,
    URL,
)
from review.resources import get_path

# --- the table: pulumi-aws input -> API member -----------------------------------------


@dataclass(frozen=True)
class InputContract:
    resource_type: str
    path: str  # pulumi-aws wire names; "a[].b" for every item of list a, "x(json).y" inside a JSON string
    api: ApiMember | None = None
    documented: Constraint | None = None
    # The program may leave it unset (AWS's default applies): then the check reports
    # "not set" instead of failing for lack of values.
    optional: bool = False
    # pulumi-aws sentinels that mean "unset" (e.g. -1 reserved concurrency).
    unset_values: tuple[Any, ...] = ()

    @property
    def id(self) -> str:
        # "aws:lambda/function:Function" + "timeout" -> "lambda/function.timeout"
        return f"{self.resource_type.split(':')[1]}.{self.path}"

    @functools.cached_property
    def constraint(self) -> Constraint:
        model = self.api.constraint() if self.api else None
        constraint = merge(model, self.documented)
        if not constraint.constrains():
            raise ValueError(f"{self.id}: neither the model nor a documented limit constrains it")
        return constraint


def _api(resource_type: str, path: str, service: str, shape: str, member: str, **kw: Any) -> InputContract:
    return InputContract(resource_type, path, ApiMember(service, shape, member), **kw)


def _doc(resource_type: str, path: str, constraint: Constraint, **kw: Any) -> InputContract:
    return InputContract(resource_type, path, None, constraint, **kw)


# 1-60 s is what CloudFront accepts without a quota increase (up to 180 s with one); the
# stack config does not assume one, so neither do the contracts.
_CF_TIMEOUT = "1..60 s without a quota increase"
# The API's range (botocore's CustomOriginConfig.OriginReadTimeout); above 60 the account's quota
# must have been raised, which review.preflight checks (a contract cannot see the account).
_CF_READ_TIMEOUT = "1..120 s, above 60 after a 'Response timeout per origin' quota increase"
_DISTRIBUTION_BEHAVIOURS = ("defaultCacheBehavior", "orderedCacheBehaviors[]")

INPUT_CONTRACTS: tuple[InputContract, ...] = (
    # Lambda functions
    _api(LAMBDA, "runtime", "lambda", "CreateFunctionRequest", "Runtime"),
    _api(LAMBDA, "architectures", "lambda", "CreateFunctionRequest", "Architectures"),
    _api(LAMBDA, "memorySize", "lambda", "CreateFunctionRequest", "MemorySize"),
    _api(LAMBDA, "timeout", "lambda", "CreateFunctionRequest", "Timeout"),
    _api(LAMBDA, "handler", "lambda", "CreateFunctionRequest", "Handler"),
    _api(LAMBDA, "description", "lambda", "CreateFunctionRequest", "Description", optional=True),
    _api(LAMBDA, "name", "lambda", "CreateFunctionRequest", "FunctionName",
         documented=documented(LAMBDA_CREATE + " (a bare function name: at most 64 characters)", max_length=64)),
    _api(LAMBDA, "layers", "lambda", "CreateFunctionRequest", "Layers", optional=True),
    _api(LAMBDA, "reservedConcurrentExecutions", "lambda", "PutFunctionConcurrencyRequest",
         "ReservedConcurrentExecutions", optional=True, unset_values=(-1,)),
    _api(LAMBDA, "loggingConfig.logFormat", "lambda", "LoggingConfig", "LogFormat", optional=True),
    _api(LAMBDA, "loggingConfig.applicationLogLevel", "lambda", "LoggingConfig", "ApplicationLogLevel", optional=True),
    _api(LAMBDA, "loggingConfig.systemLogLevel", "lambda", "LoggingConfig", "SystemLogLevel", optional=True),
    _api(LAMBDA, "ephemeralStorage.size", "lambda", "EphemeralStorage", "Size", optional=True),
    _api(LAMBDA, "tracingConfig.mode", "lambda", "TracingConfig", "Mode", optional=True),
    _api(LAMBDA, "snapStart.applyOn", "lambda", "SnapStart", "ApplyOn", optional=True),
    _api(LAMBDA, "packageType", "lambda", "CreateFunctionRequest", "PackageType", optional=True),
    # Container images (originPackageType image)
    _api(ECR_REPOSITORY, "name", "ecr", "CreateRepositoryRequest", "repositoryName"),
    _api(ECR_REPOSITORY, "imageTagMutability", "ecr", "CreateRepositoryRequest", "imageTagMutability", optional=True),
    _api(ECR_REPOSITORY, "imageTagMutabilityExclusionFilters[].filter", "ecr", "ImageTagMutabilityExclusionFilter",
         "filter", optional=True),
    _api(ECR_REPOSITORY, "imageTagMutabilityExclusionFilters[].filterType", "ecr", "ImageTagMutabilityExclusionFilter",
         "filterType", optional=True),
    _api(ECR_LIFECYCLE, "policy", "ecr", "PutLifecyclePolicyRequest", "lifecyclePolicyText"),
    _api(ECR_POLICY, "policy", "ecr", "SetRepositoryPolicyRequest", "policyText"),
    _api(ALIAS, "name", "lambda", "CreateAliasRequest", "Name"),
    # Function URLs and permissions
    _api(URL, "authorizationType", "lambda", "CreateFunctionUrlConfigRequest", "AuthType"),
    _api(URL, "invokeMode", "lambda", "CreateFunctionUrlConfigRequest", "InvokeMode"),
    _api(URL, "qualifier", "lambda", "CreateFunctionUrlConfigRequest", "Qualifier", optional=True),
    _api(URL, "cors.maxAge", "lambda", "Cors", "MaxAge", optional=True),
    _api(URL, "cors.allowMethods", "lambda", "Cors", "AllowMethods", optional=True),
    _api(URL, "cors.allowHeaders", "lambda", "Cors", "AllowHeaders", optional=True),
    _api(URL, "cors.exposeHeaders", "lambda", "Cors", "ExposeHeaders", optional=True),
    _api(URL, "cors.allowOrigins", "lambda", "Cors", "AllowOrigins", optional=True),
    _api(PERMISSION, "action", "lambda", "AddPermissionRequest", "Action"),
    _api(PERMISSION, "principal", "lambda", "AddPermissionRequest", "Principal"),
    _api(PERMISSION, "functionUrlAuthType", "lambda", "AddPermissionRequest", "FunctionUrlAuthType", optional=True),
    # Concurrency
    _api(PROVISIONED_CONFIG, "provisionedConcurrentExecutions", "lambda", "PutProvisionedConcurrencyConfigRequest",
         "ProvisionedConcurrentExecutions"),
    _api(PROVISIONED_CONFIG, "qualifier", "lambda", "PutProvisionedConcurrencyConfigRequest", "Qualifier"),
    # Asynchronous invocation
    _api(INVOKE_CONFIG, "maximumEventAgeInSeconds", "lambda", "PutFunctionEventInvokeConfigRequest",
         "MaximumEventAgeInSeconds"),
    _api(INVOKE_CONFIG, "maximumRetryAttempts", "lambda", "PutFunctionEventInvokeConfigRequest",
         "MaximumRetryAttempts"),
    _api(INVOKE_CONFIG, "destinationConfig.onSuccess.destination", "lambda", "OnSuccess", "Destination",
         optional=True),
    _api(INVOKE_CONFIG, "destinationConfig.onFailure.destination", "lambda", "OnFailure", "Destination",
         optional=True),
    # Event source mappings
    _api(ESM, "batchSize", "lambda", "CreateEventSourceMappingRequest", "BatchSize"),
    _api(ESM, "maximumBatchingWindowInSeconds", "lambda", "CreateEventSourceMappingRequest",
         "MaximumBatchingWindowInSeconds", optional=True),
    _api(ESM, "functionResponseTypes", "lambda", "CreateEventSourceMappingRequest", "FunctionResponseTypes"),
    _api(ESM, "scalingConfig.maximumConcurrency", "lambda", "ScalingConfig", "MaximumConcurrency", optional=True),
    _api(ESM, "eventSourceArn", "lambda", "CreateEventSourceMappingRequest", "EventSourceArn"),
    # CloudFront Functions
    _api(CF_FUNCTION, "runtime", "cloudfront", "FunctionConfig", "Runtime"),
    _api(CF_FUNCTION, "name", "cloudfront", "CreateFunctionRequest", "Name", optional=True),
    _doc(CF_FUNCTION, "code", documented(CFF_QUOTAS + " (maximum function size 10 KB)", kind="string",
                                         min_length=1, max_bytes=CFF_MAX_CODE_BYTES)),
    # CloudFront distribution
    _api(DISTRIBUTION, "priceClass", "cloudfront", "DistributionConfig", "PriceClass"),
    _api(DISTRIBUTION, "httpVersion", "cloudfront", "DistributionConfig", "HttpVersion"),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originProtocolPolicy", "cloudfront", "CustomOriginConfig",
         "OriginProtocolPolicy"),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originSslProtocols", "cloudfront", "OriginSslProtocols", "Items"),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originReadTimeout", "cloudfront", "CustomOriginConfig",
         "OriginReadTimeout", documented=documented(f"{CLOUDFRONT_TIMEOUTS} ({_CF_READ_TIMEOUT})", minimum=1,
                                                    maximum=120)),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originKeepaliveTimeout", "cloudfront", "CustomOriginConfig",
         "OriginKeepaliveTimeout",
         documented=documented(f"{CLOUDFRONT_TIMEOUTS} ({_CF_TIMEOUT})", minimum=1, maximum=60)),
    _api(DISTRIBUTION, "origins[].connectionAttempts", "cloudfront", "Origin", "ConnectionAttempts",
         documented=documented(CLOUDFRONT_QUOTAS + " (connection attempts per origin 1-3)", minimum=1, maximum=3),
         optional=True),
    _api(DISTRIBUTION, "origins[].connectionTimeout", "cloudfront", "Origin", "ConnectionTimeout",
         documented=documented(CLOUDFRONT_QUOTAS + " (connection timeout per origin 1-10 s)", minimum=1, maximum=10),
         optional=True),
    _api(DISTRIBUTION, "defaultCacheBehavior.viewerProtocolPolicy", "cloudfront", "DefaultCacheBehavior",
         "ViewerProtocolPolicy"),
    _api(DISTRIBUTION, "orderedCacheBehaviors[].viewerProtocolPolicy", "cloudfront", "CacheBehavior",
         "ViewerProtocolPolicy", optional=True),
    *(
        contract
        for behaviour in _DISTRIBUTION_BEHAVIOURS
        for contract in (
            _api(DISTRIBUTION, f"{behaviour}.allowedMethods", "cloudfront", "AllowedMethods", "Items",
                 optional=behaviour != "defaultCacheBehavior"),
            _api(DISTRIBUTION, f"{behaviour}.cachedMethods", "cloudfront", "CachedMethods", "Items",
                 optional=behaviour != "defaultCacheBehavior"),
            _api(DISTRIBUTION, f"{behaviour}.functionAssociations[].eventType", "cloudfront", "FunctionAssociation",
                 "EventType", optional=behaviour != "defaultCacheBehavior"),
            _api(DISTRIBUTION, f"{behaviour}.lambdaFunctionAssociations[].eventType", "cloudfront",
                 "LambdaFunctionAssociation", "EventType", optional=behaviour != "defaultCacheBehavior"),
        )
    ),
    _api(DISTRIBUTION, "viewerCertificate.minimumProtocolVersion", "cloudfront", "ViewerCertificate",
         "MinimumProtocolVersion", optional=True),
    _api(DISTRIBUTION, "viewerCertificate.sslSupportMethod", "cloudfront", "ViewerCertificate", "SSLSupportMethod",
         optional=True),
    _doc(DISTRIBUTION, "aliases", documented(CLOUDFRONT_QUOTAS + " (alternate domain names per distribution: 100)",
                                             kind="list", max_length=100), optional=True),
    _api(ORIGIN_REQUEST_POLICY, "headersConfig.headerBehavior", "cloudfront", "OriginRequestPolicyHeadersConfig",
         "HeaderBehavior"),
    _api(ORIGIN_REQUEST_POLICY, "cookiesConfig.cookieBehavior", "cloudfront", "OriginRequestPolicyCookiesConfig",
         "CookieBehavior"),
    _api(ORIGIN_REQUEST_POLICY, "queryStringsConfig.queryStringBehavior", "cloudfront",
         "OriginRequestPolicyQueryStringsConfig", "QueryStringBehavior"),
    _api(CACHE_POLICY, "parametersInCacheKeyAndForwardedToOrigin.headersConfig.headerBehavior", "cloudfront",
         "CachePolicyHeadersConfig", "HeaderBehavior", optional=True),
    # CloudWatch
    _api(ALARM, "comparisonOperator", "cloudwatch", "PutMetricAlarmInput", "ComparisonOperator"),
    _api(ALARM, "statistic", "cloudwatch", "PutMetricAlarmInput", "Statistic", optional=True),
    _api(ALARM, "period", "cloudwatch", "PutMetricAlarmInput", "Period",
         documented=Constraint(source=ALARM_API, rule=("periods are 10, 20, 30 or a multiple of 60 seconds",
                                                       _valid_alarm_period)), optional=True),
    _api(ALARM, "evaluationPeriods", "cloudwatch", "PutMetricAlarmInput", "EvaluationPeriods"),
    _api(ALARM, "datapointsToAlarm", "cloudwatch", "PutMetricAlarmInput", "DatapointsToAlarm", optional=True),
    _api(ALARM, "treatMissingData", "cloudwatch", "PutMetricAlarmInput", "TreatMissingData",
         documented=documented(ALARM_API, enum=("breaching", "notBreaching", "ignore", "missing")), optional=True),
    _api(ALARM, "namespace", "cloudwatch", "PutMetricAlarmInput", "Namespace", optional=True),
    _api(ALARM, "metricName", "cloudwatch", "PutMetricAlarmInput", "MetricName", optional=True),
    _api(ALARM, "name", "cloudwatch", "PutMetricAlarmInput", "AlarmName", optional=True),
    _api(ALARM, "alarmDescription", "cloudwatch", "PutMetricAlarmInput", "AlarmDescription", optional=True),
    _api(ALARM, "alarmActions", "cloudwatch", "PutMetricAlarmInput", "AlarmActions", optional=True),
    _api(ALARM, "okActions", "cloudwatch", "PutMetricAlarmInput", "OKActions", optional=True),
    _api(ALARM, "unit", "cloudwatch", "PutMetricAlarmInput", "Unit", optional=True),
    _api(LOG_GROUP, "retentionInDays", "logs", "PutRetentionPolicyRequest", "retentionInDays",
         documented=documented(LOGS_RETENTION, enum=RETENTION_DAYS)),
    _api(LOG_GROUP, "name", "logs", "CreateLogGroupRequest", "logGroupName", optional=True),
    _api(LOG_GROUP, "logGroupClass", "logs", "CreateLogGroupRequest", "logGroupClass", optional=True),
    # SNS
    _doc(TOPIC, "name", documented(SNS_TOPIC + " (1-256 letters, digits, - and _)", kind="string", min_length=1,
                                   max_length=256, pattern=r"[A-Za-z0-9_-]+(\.fifo)?"), optional=True),
    _api(SUBSCRIPTION, "protocol", "sns", "SubscribeInput", "Protocol",
         documented=documented(SNS_SUBSCRIBE, enum=SNS_PROTOCOLS)),
    # Application Auto Scaling
    _api(SCALING_TARGET, "scalableDimension", "application-autoscaling", "RegisterScalableTargetRequest",
         "ScalableDimension"),
    _api(SCALING_TARGET, "serviceNamespace", "application-autoscaling", "RegisterScalableTargetRequest",
         "ServiceNamespace"),
    _api(SCALING_TARGET, "minCapacity", "application-autoscaling", "RegisterScalableTargetRequest", "MinCapacity",
         documented=documented(SCALABLE_TARGET + " (capacities are integers, at least 0)", minimum=0)),
    _api(SCALING_TARGET, "maxCapacity", "application-autoscaling", "RegisterScalableTargetRequest", "MaxCapacity",
         documented=documented(SCALABLE_TARGET + " (capacities are integers, at least 0)", minimum=0)),
    _api(SCALING_TARGET, "resourceId", "application-autoscaling", "RegisterScalableTargetRequest", "ResourceId"),
    _api(SCALING_POLICY, "policyType", "application-autoscaling", "PutScalingPolicyRequest", "PolicyType"),
    _api(SCALING_POLICY, "scalableDimension", "application-autoscaling", "PutScalingPolicyRequest",
         "ScalableDimension"),
    _api(SCALING_POLICY, "serviceNamespace", "application-autoscaling", "PutScalingPolicyRequest", "ServiceNamespace"),
    _api(SCALING_POLICY, "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType",
         "application-autoscaling", "PredefinedMetricSpecification", "PredefinedMetricType"),
    _api(SCALING_POLICY, "targetTrackingScalingPolicyConfiguration.scaleInCooldown", "application-autoscaling",
         "TargetTrackingScalingPolicyConfiguration", "ScaleInCooldown", optional=True,
         documented=documented(TARGET_TRACKING + " (cooldowns are whole seconds, at least 0)", minimum=0)),
    _api(SCALING_POLICY, "targetTrackingScalingPolicyConfiguration.scaleOutCooldown", "application-autoscaling",
         "TargetTrackingScalingPolicyConfiguration", "ScaleOutCooldown", optional=True,
         documented=documented(TARGET_TRACKING + " (cooldowns are whole seconds, at least 0)", minimum=0)),
    # EventBridge Scheduler
    _api(SCHEDULE, "state", "scheduler", "CreateScheduleInput", "State", optional=True),
    _api(SCHEDULE, "flexibleTimeWindow.mode", "scheduler", "FlexibleTimeWindow", "Mode"),
    _api(SCHEDULE, "flexibleTimeWindow.maximumWindowInMinutes", "scheduler", "FlexibleTimeWindow",
         "MaximumWindowInMinutes", optional=True),
    _api(SCHEDULE, "scheduleExpression", "scheduler", "CreateScheduleInput", "ScheduleExpression",
         documented=Constraint(source=SCHEDULE_TYPES, rule=(
             "must be rate(N unit) (singular unit for 1, at least 1 minute), cron(6 fields) or at(...)",
             _valid_schedule_expression))),
    _api(SCHEDULE, "name", "scheduler", "CreateScheduleInput", "Name", optional=True),
    _api(SCHEDULE, "groupName", "scheduler", "CreateScheduleInput", "GroupName", optional=True),
    _api(SCHEDULE, "target.retryPolicy.maximumRetryAttempts", "scheduler", "RetryPolicy", "MaximumRetryAttempts",
         optional=True),
    _api(SCHEDULE, "target.retryPolicy.maximumEventAgeInSeconds", "scheduler", "RetryPolicy",
         "MaximumEventAgeInSeconds", optional=True),
    _api(SCHEDULE, "target.input", "scheduler", "Target", "Input", optional=True),
    # Step Functions (the probe rounds workflow)
    _api(STATE_MACHINE, "name", "stepfunctions", "CreateStateMachineInput", "name", optional=True),
    _api(STATE_MACHINE, "definition", "stepfunctions", "CreateStateMachineInput", "definition"),
    _api(STATE_MACHINE, "type", "stepfunctions", "CreateStateMachineInput", "type", optional=True),
    _api(STATE_MACHINE, "loggingConfiguration.level", "stepfunctions", "LoggingConfiguration", "level",
         optional=True),
    # SQS: every attribute is a string in the model; the limits are documented.
    _doc(QUEUE, "visibilityTimeoutSeconds", documented(SQS_ATTRIBUTES + " (VisibilityTimeout 0-43200 s)",
                                                       kind="integer", minimum=0, maximum=43200)),
    _doc(QUEUE, "messageRetentionSeconds", documented(SQS_ATTRIBUTES + " (MessageRetentionPeriod 60-1209600 s)",
                                                      kind="integer", minimum=60, maximum=1209600), optional=True),
    _doc(QUEUE, "delaySeconds", documented(SQS_ATTRIBUTES + " (DelaySeconds 0-900 s)", kind="integer", minimum=0,
                                           maximum=900), optional=True),
    _doc(QUEUE, "maxMessageSize", documented(SQS_ATTRIBUTES + " (MaximumMessageSize 1024-1048576 bytes)",
                                             kind="integer", minimum=1024, maximum=1048576), optional=True),
    _doc(QUEUE, "receiveWaitTimeSeconds", documented(SQS_ATTRIBUTES + " (ReceiveMessageWaitTimeSeconds 0-20 s)",
                                                     kind="integer", minimum=0, maximum=20), optional=True),
    _doc(QUEUE, "kmsDataKeyReusePeriodSeconds", documented(SQS_ATTRIBUTES + " (KmsDataKeyReusePeriodSeconds 60-86400)",
                                                           kind="integer", minimum=60, maximum=86400), optional=True),
    _doc(QUEUE, "redrivePolicy(json).maxReceiveCount", documented(SQS_ATTRIBUTES + " (maxReceiveCount 1-1000)",
                                                                  kind="integer", minimum=1, maximum=1000),
         optional=True),
    _doc(QUEUE, "name", documented(SQS_QUEUE_NAME + " (up to 80 letters, digits, - and _; .fifo for FIFO)",
                                   kind="string", min_length=1, max_length=80, pattern=r"[A-Za-z0-9_-]+(\.fifo)?"),
         optional=True),
    # DynamoDB
    _api(TABLE, "billingMode", "dynamodb", "CreateTableInput", "BillingMode", optional=True),
    _api(TABLE, "attributes[].type", "dynamodb", "AttributeDefinition", "AttributeType"),
    _api(TABLE, "hashKey", "dynamodb", "KeySchemaElement", "AttributeName"),
    _api(TABLE, "rangeKey", "dynamodb", "KeySchemaElement", "AttributeName", optional=True),
    _api(TABLE, "streamViewType", "dynamodb", "StreamSpecification", "StreamViewType", optional=True),
    _api(TABLE, "ttl.attributeName", "dynamodb", "TimeToLiveSpecification", "AttributeName", optional=True),
    _doc(TABLE, "name", documented(DYNAMODB_NAMES + " (3-255 characters: a-z, A-Z, 0-9, _ - .)", kind="string",
                                   min_length=3, max_length=255, pattern=r"[a-zA-Z0-9_.-]+"), optional=True),
    # IAM
    _api(ROLE, "name", "iam", "CreateRoleRequest", "RoleName", optional=True),
    _api(ROLE, "assumeRolePolicy", "iam", "CreateRoleRequest", "AssumeRolePolicyDocument",
         documented=documented(IAM_QUOTAS + " (role trust policy length 2048 characters)", max_length=2048)),
    _api(ROLE_POLICY, "policy", "iam", "PutRolePolicyRequest", "PolicyDocument",
         documented=documented(IAM_QUOTAS + " (inline role policies: 10240 characters in total)", max_length=10240)),
    _api(ROLE_POLICY, "name", "iam", "PutRolePolicyRequest", "PolicyName", optional=True),
    _api(POLICY, "policy", "iam", "CreatePolicyRequest", "PolicyDocument",
         documented=documented(IAM_QUOTAS + " (managed policy size 6144 characters)", max_length=6144)),
)


def check_input(contract: InputContract, run: ProgramRun) -> CheckResult:
    constraint = contract.constraint
    resources = run.of_type(contract.resource_type)
    result = CheckResult(contract.id, "input", constraint.describe(), constraint.source, resources=len(resources))
    for resource in sorted(resources, key=lambda r: r.name):
        for where, value in _values_at(resource.inputs, contract.path):
            if value in contract.unset_values and not isinstance(value, bool):
                continue
            result.values += 1
            result.problems += [f"{resource.name}: {where} {p}" for p in constraint.problems(value)]
    return result


def _values_at(inputs: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """``get_path`` plus ``x(json).y``: descend into a JSON document held in a string."""
    head, sep, rest = path.partition("(json).")
    found = get_path(inputs, head)
    if not sep:
        return found
    out: list[tuple[str, Any]] = []
    for where, text in found:
        try:
            document = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            out.append((where, text))  # not JSON: the constraint reports the type
            continue
        if isinstance(document, dict):
            out += [(f"{where}(json).{w}", v) for w, v in get_path(document, rest)]
    return out

