"""Run the real Pulumi program under the SDK's mock engine and record every registration.

The recording monitor sees each ``RegisterResource`` request exactly as the engine would: type,
name, parent, provider, dependencies, the resource options that decide what a replacement or a
delete does (``protect``, ``retainOnDelete``, ``deleteBeforeReplace``, ``replaceOnChanges``,
``ignoreChanges``) and the inputs under their engine (camelCase) names, which are what a
CrossGuard policy receives.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import heapq
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import resource_pb2, source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from synth.stackfile import StackFile

UNKNOWN: Final = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""The engine's marker for a value not known until deployment (kept as-is in records)."""
SECRET_MARK: Final = "[secret]"
"""What a secret input becomes in the records."""
RANDOM_BYTES_TYPE: Final = "random:index/randomBytes:RandomBytes"


def mock_random_bytes(name: str, length: int) -> bytes:
    """What the mocks give a ``RandomBytes`` of this name: the same bytes on every synthesis.

    The real provider draws them once and Pulumi keeps them in the state, so every ``up``
    after the first sees one value; so does every synthesis here (what is derived from them,
    a node set's SSH host key, would otherwise be unknown or churn in ``synth diff``).

    Args:
        name: the resource's name.
        length: its ``length`` (bytes).
    """
    stream = b""
    counter = 0
    while len(stream) < length:
        stream += hashlib.sha256(f"{RANDOM_BYTES_TYPE}/{name}/{counter}".encode()).digest()
        counter += 1
    return stream[:length]


_SIG: Final = "4dabf18193072939515e22adb298388d"
_SECRET_SIG: Final = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_REF_SIG: Final = "5cf8f73096256a8f31e491e813e4eb8e"
_OUTPUT_SIG: Final = "d0e6a833031e9bbcd3f4e8bde6ca49a4"


@dataclass(frozen=True)
class ResourceRecord:
    """One registered resource, in the shape written to ``resources.json``."""

    type: str
    name: str
    urn: str
    parent: str | None
    provider: str | None
    providers: dict[str, str]
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    protect: bool
    custom: bool
    inputs: dict[str, Any]
    retain_on_delete: bool = False
    """The engine leaves the cloud resource in place when it deletes (or replaces) this one."""
    delete_before_replace: bool | None = None
    """``None`` when the program left it unset (the provider's diff decides the order)."""
    replace_on_changes: list[str] = field(default_factory=list)
    """Input paths whose change replaces the resource whatever the provider says."""
    ignore_changes: list[str] = field(default_factory=list)
    """Input paths whose changes the engine ignores on update."""

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> ResourceRecord:
        """Read back one object of ``resources.json`` (possibly edited by a reviewer)."""
        return cls(
            type=entry["type"],
            name=entry["name"],
            urn=entry["urn"],
            parent=entry.get("parent"),
            provider=entry.get("provider"),
            providers=dict(entry.get("providers") or {}),
            dependencies=list(entry.get("dependencies") or []),
            property_dependencies=dict(entry.get("propertyDependencies") or {}),
            protect=bool(entry.get("protect", False)),
            custom=bool(entry.get("custom", True)),
            inputs=dict(entry.get("inputs") or {}),
            # Files written before these options were recorded lack them: the SDK's defaults.
            retain_on_delete=bool(entry.get("retainOnDelete", False)),
            delete_before_replace=(
                None
                if entry.get("deleteBeforeReplace") is None
                else bool(entry["deleteBeforeReplace"])
            ),
            replace_on_changes=list(entry.get("replaceOnChanges") or []),
            ignore_changes=list(entry.get("ignoreChanges") or []),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this record.

        Beyond the engine's fields, ``providers`` (package -> provider URN, what a component
        passes to its children), ``propertyDependencies`` (input name -> URNs it came from) and
        ``custom`` (false for components) are kept. ``deleteBeforeReplace`` is ``null`` where
        the program left it unset, as the engine's ``deleteBeforeReplaceDefined`` says.
        """
        return {
            "type": self.type,
            "name": self.name,
            "urn": self.urn,
            "parent": self.parent,
            "provider": self.provider,
            "providers": self.providers,
            "dependencies": self.dependencies,
            "propertyDependencies": self.property_dependencies,
            "protect": self.protect,
            "retainOnDelete": self.retain_on_delete,
            "deleteBeforeReplace": self.delete_before_replace,
            "replaceOnChanges": self.replace_on_changes,
            "ignoreChanges": self.ignore_changes,
            "custom": self.custom,
            "inputs": self.inputs,
        }


@dataclass
class SynthRun:
    """What one synthesis produced."""

    stack: str
    records: list[ResourceRecord] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)


def plain_value(value: Any) -> Any:
    """Turn a value decoded from the wire into plain JSON.

    Map keys come out in name order. Secrets become :data:`SECRET_MARK` (a secret map or list
    keeps its keys and shape, every value in it masked, as ``stringData`` of a Secret does),
    resource references their URN, and integral floats (every number crosses the wire as a
    double) integers again.
    """
    if isinstance(value, dict):
        signature = value.get(_SIG)
        if signature == _SECRET_SIG:
            return _masked(plain_value(value.get("value")))
        if signature == _RESOURCE_REF_SIG:
            return value.get("urn")
        if signature == _OUTPUT_SIG:
            if value.get("secret"):
                return _masked(plain_value(value.get("value")))
            return plain_value(value["value"]) if "value" in value else UNKNOWN
        # Maps cross the wire unordered; name order keeps the written files stable.
        return {key: plain_value(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [plain_value(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _masked(value: Any) -> Any:
    """A secret's shape with every value replaced by :data:`SECRET_MARK`."""
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return SECRET_MARK


def _provider_urn(reference: str) -> str | None:
    # A provider reference is "<urn>::<id>".
    return reference.rsplit("::", 1)[0] if reference else None


ROOT_STACK_TYPE: Final = "pulumi:pulumi:Stack"
"""The type of the stack's root resource, which qualifies no URN."""


class RecordingMonitor(mocks.MockMonitor):
    """A mock monitor that records registrations and declines resource references.

    Declining the ``resourceReferences`` feature keeps remote components (pulumi-eks) from
    rehydrating resources on another thread, which makes mocked runs fail or hang.
    """

    def __init__(self, mock_engine: mocks.Mocks) -> None:
        super().__init__(mock_engine)
        self.records: list[ResourceRecord] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """Record the request, then let the stock mock monitor answer it."""
        if request.type != ROOT_STACK_TYPE:
            raw_inputs = json_format.MessageToDict(request.object, preserving_proto_field_name=True)
            self.records.append(
                ResourceRecord(
                    type=request.type,
                    name=request.name,
                    urn=self.make_urn(request.parent, request.type, request.name),
                    parent=request.parent or None,
                    provider=_provider_urn(request.provider),
                    providers={
                        package: urn
                        for package, reference in sorted(request.providers.items())
                        if (urn := _provider_urn(reference))
                    },
                    dependencies=sorted(set(request.dependencies)),
                    property_dependencies={
                        key: sorted(set(value.urns))
                        for key, value in sorted(request.propertyDependencies.items())
                        if value.urns
                    },
                    protect=bool(request.protect),
                    custom=bool(request.custom),
                    inputs=plain_value(raw_inputs),
                    retain_on_delete=bool(request.retainOnDelete),
                    delete_before_replace=(
                        bool(request.deleteBeforeReplace)
                        if request.deleteBeforeReplaceDefined
                        else None
                    ),
                    replace_on_changes=sorted(request.replaceOnChanges),
                    ignore_changes=sorted(request.ignoreChanges),
                )
            )
        return super().RegisterResource(request)

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives: the type qualified by the types of all component ancestors.

        The stock mock keeps only the parent's own type and counts the root stack as one, so
        nested resources got URNs no ``pulumi up --target`` or ``state unprotect`` matches. The
        engine qualifies with the parent's whole qualified type, the root stack excluded
        (pulumi/pulumi pkg/resource/deploy, the step generator's URN of a registration).
        """
        if parent:
            qualified = parent.split("::")[2]
            if qualified != ROOT_STACK_TYPE:
                type_ = f"{qualified}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_}::{name}"

    def SupportsFeature(self, request: Any) -> Any:  # noqa: N802
        """Answer as the stock monitor does, but without resource references."""
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)

    def GetDeploymentInfo(self, request: Any) -> Any:  # noqa: N802
        """List the stock monitor's features minus resource references."""
        info = super().GetDeploymentInfo(request)
        features = [
            feature
            for feature in info.supportedFeatures
            if feature != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)


def mock_digest(typ: str, name: str) -> str:
    """The hash every mock output of a resource derives from: its type and resource name."""
    return hashlib.sha256(f"{typ}/{name}".encode()).hexdigest()


def mock_id(typ: str, name: str) -> str:
    """The id the mocks give a custom resource (``sg-…``, ``subnet-…``, else ``<name>-…``).

    Args:
        typ: the resource's type token.
        name: the resource's name.
    """
    return PlatformMocks._ID_PREFIXES.get(typ, f"{name}-") + mock_digest(typ, name)[:17]


def mock_cluster_security_groups(name: str) -> tuple[str, str]:
    """(clusterSecurityGroupId, nodeSecurityGroupId) the mocks give an ``eks:index:Cluster``.

    Args:
        name: the cluster component's resource name.
    """
    digest = mock_digest(EKS_CLUSTER_TYPE, name)
    return f"sg-{digest[:17]}", f"sg-{digest[17:34]}"


EKS_CLUSTER_TYPE: Final = "eks:index:Cluster"


class PlatformMocks(mocks.Mocks):
    """Deterministic stand-ins for what AWS and pulumi-eks would compute.

    Every computed output the program reads is returned (ids, ARNs, names, kubeconfig), since an
    output the mock leaves out silently drops every input built from it.
    """

    _ID_PREFIXES: Final = {
        "aws:ec2/vpc:Vpc": "vpc-",
        "aws:ec2/subnet:Subnet": "subnet-",
        "aws:ec2/internetGateway:InternetGateway": "igw-",
        "aws:ec2/natGateway:NatGateway": "nat-",
        "aws:ec2/eip:Eip": "eipalloc-",
        "aws:ec2/routeTable:RouteTable": "rtb-",
        "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc-",
        "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce-",
        "aws:ec2/flowLog:FlowLog": "fl-",
        "aws:ec2/securityGroup:SecurityGroup": "sg-",
        "aws:ec2/launchTemplate:LaunchTemplate": "lt-",
        "aws:ec2/placementGroup:PlacementGroup": "pg-",
        "aws:fsx/lustreFileSystem:LustreFileSystem": "fs-",
        "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra-",
    }

    def __init__(self, region: str, account_id: str) -> None:
        self.region = region
        self.account_id = account_id

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        """Refuse every data source call: the program must plan without asking AWS."""
        raise RuntimeError(
            f"the program called {args.token}; it must not call data sources (the stack states "
            "what it needs, so planning works offline)"
        )

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Echo the inputs and add the computed outputs the real provider would return."""
        digest = mock_digest(args.typ, args.name)
        outputs = dict(args.inputs)
        if args.typ == EKS_CLUSTER_TYPE:
            outputs.update(self._cluster_outputs(args.inputs.get("name") or args.name, digest))
            return None, outputs
        if not args.custom:
            return None, outputs
        resource_id = mock_id(args.typ, args.name)
        outputs.setdefault("name", f"{args.name}-{digest[:7]}")
        outputs["id"] = resource_id
        if args.typ.startswith("aws:"):
            outputs.update(self._aws_outputs(args.typ, outputs, resource_id, digest))
        if args.typ == RANDOM_BYTES_TYPE:
            data = mock_random_bytes(args.name, int(args.inputs["length"]))
            outputs.update({"base64": base64.b64encode(data).decode(), "hex": data.hex()})
        return resource_id, outputs

    def _aws_outputs(
        self, typ: str, outputs: dict[str, Any], resource_id: str, digest: str
    ) -> dict[str, Any]:
        module = typ.split(":")[1].split("/", maxsplit=1)[0]
        region, account = self.region, self.account_id
        name = outputs["name"]
        if module == "iam":
            kind = typ.split(":")[2].lower()
            return {"arn": f"arn:aws:iam::{account}:{kind}/{name}", "uniqueId": digest[:21]}
        if typ == "aws:kms/key:Key":
            key_id = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
            return {"keyId": key_id, "arn": f"arn:aws:kms:{region}:{account}:key/{key_id}"}
        if typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            return {
                "arn": f"arn:aws:fsx:{region}:{account}:file-system/{resource_id}",
                "dnsName": f"{resource_id}.fsx.{region}.amazonaws.com",
                "mountName": digest[:8],
            }
        if typ == "aws:s3/bucket:Bucket":
            bucket = outputs.get("bucket", name)
            return {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}"}
        if typ == "aws:sqs/queue:Queue":
            return {
                "arn": f"arn:aws:sqs:{region}:{account}:{name}",
                "url": f"https://sqs.{region}.amazonaws.com/{account}/{name}",
            }
        if typ == "aws:cloudwatch/logGroup:LogGroup":
            return {"arn": f"arn:aws:logs:{region}:{account}:log-group:{name}"}
        if typ == "aws:ec2/launchTemplate:LaunchTemplate":
            return {
                "latestVersion": 1,
                "arn": f"arn:aws:ec2:{region}:{account}:launch-template/{resource_id}",
            }
        service = {"cloudwatch": "events"}.get(module, module)
        kind = typ.split(":")[2][0].lower() + typ.split(":")[2][1:]
        return {"arn": f"arn:aws:{service}:{region}:{account}:{kind}/{resource_id}"}

    def _cluster_outputs(self, cluster_name: str, digest: str) -> dict[str, Any]:
        issuer = f"https://oidc.eks.{self.region}.amazonaws.com/id/{digest[:32].upper()}"
        server = f"https://{digest[:32].upper()}.gr7.{self.region}.eks.amazonaws.com"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": server}}],
            "contexts": [{"name": "aws", "context": {"cluster": cluster_name, "user": "aws"}}],
            "current-context": "aws",
            "users": [{"name": "aws", "user": {}}],
        }
        return {
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "oidcIssuer": issuer.removeprefix("https://"),
            "oidcProviderUrl": issuer,
            "oidcProviderArn": (
                f"arn:aws:iam::{self.account_id}:oidc-provider/{issuer.removeprefix('https://')}"
            ),
            # mock_cluster_security_groups, from the same digest
            "clusterSecurityGroupId": f"sg-{digest[:17]}",
            "nodeSecurityGroupId": f"sg-{digest[17:34]}",
        }


def synthesize(
    stack_file: StackFile,
    program: Callable[[], Any],
    *,
    region: str,
    account_id: str,
) -> SynthRun:
    """Run ``program`` under mocks with the stack's config and return what it registered.

    Each run gets a fresh context, so several stacks can be synthesized in one process.

    Args:
        stack_file: the stack's config (secure values already replaced).
        program: the Pulumi program (``components.platform.deploy``).
        region: region the mocks build ARNs in.
        account_id: account the mocks build ARNs in.

    """
    return contextvars.Context().run(_synthesize, stack_file, program, region, account_id)


@contextmanager
def _without_source_positions() -> Iterator[None]:
    """Registrations carry no source position while the program runs.

    The SDK walks the whole call stack of every registration, reading each frame's source
    line, to tell the engine where the resource was declared (pulumi/runtime/resource.py,
    ``_get_stack_trace``): a sixth of a synthesis, for positions only the engine's diagnostics
    show and no record keeps. An SDK without the function fails here, not silently slower.
    """
    traced = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = traced


def _synthesize(
    stack_file: StackFile, program: Callable[[], Any], region: str, account_id: str
) -> SynthRun:
    monitor = RecordingMonitor(PlatformMocks(region=region, account_id=account_id))
    pulumi.runtime.set_mocks(
        monitor.mocks,
        project=stack_file.project,
        stack=stack_file.stack,
        preview=False,
        monitor=monitor,
    )
    pulumi.runtime.set_all_config(stack_file.engine_config(), stack_file.secret_keys)
    run = SynthRun(stack=stack_file.stack)
    with _without_source_positions():
        _sync_await(run_pulumi_func(program))
    run.records = dependency_order(monitor.records)
    return run


def dependency_order(records: list[ResourceRecord]) -> list[ResourceRecord]:
    """Records sorted so that parents, providers and dependencies come first.

    The SDK registers resources from several threads, so arrival order varies between runs;
    this order does not: among resources whose prerequisites are all placed, the smallest URN
    goes next.
    """
    by_urn = {record.urn: record for record in records}
    waiting_on = {
        record.urn: {
            urn
            for urn in (record.parent, record.provider, *record.dependencies)
            if urn in by_urn and urn != record.urn
        }
        for record in records
    }
    dependents: dict[str, list[str]] = {urn: [] for urn in by_urn}
    for urn, prerequisites in waiting_on.items():
        for prerequisite in prerequisites:
            dependents[prerequisite].append(urn)
    ready = [urn for urn, prerequisites in waiting_on.items() if not prerequisites]
    heapq.heapify(ready)
    ordered: list[ResourceRecord] = []
    while ready:
        urn = heapq.heappop(ready)
        ordered.append(by_urn[urn])
        for dependent in dependents[urn]:
            waiting_on[dependent].discard(urn)
            if not waiting_on[dependent]:
                heapq.heappush(ready, dependent)
    if len(ordered) != len(records):
        cycle = sorted(urn for urn, left in waiting_on.items() if left)
        raise ValueError(f"dependency cycle among {cycle}")
    return ordered
