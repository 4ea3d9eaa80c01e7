"""The names of ``pulumi_aws.cloudwatch`` the program uses (../__init__.pyi says why)."""

from pulumi_aws.cloudwatch._inputs import MetricAlarmMetricQueryArgs as MetricAlarmMetricQueryArgs
from pulumi_aws.cloudwatch._inputs import (
    MetricAlarmMetricQueryMetricArgs as MetricAlarmMetricQueryMetricArgs,
)
from pulumi_aws.cloudwatch.event_rule import EventRule as EventRule
from pulumi_aws.cloudwatch.event_target import EventTarget as EventTarget
from pulumi_aws.cloudwatch.log_group import LogGroup as LogGroup
from pulumi_aws.cloudwatch.metric_alarm import MetricAlarm as MetricAlarm
