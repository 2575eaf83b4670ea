"""A mock monitor that records every RegisterResource with its parent, dependencies,
provider and options, and names resources with the engine's URNs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

STACK_TYPE = "pulumi:pulumi:Stack"
"""Type token of the root stack resource."""
SIG_KEY = rpc._special_sig_key
"""Key that marks a special value (secret, resource reference) in the wire form; the SDK's own constant."""
SECRET_SIG = rpc._special_secret_sig
"""SIG_KEY value of a secret."""
RESOURCE_SIG = rpc._special_resource_sig
"""SIG_KEY value of a resource reference."""
UNKNOWN = rpc.UNKNOWN
"""Wire value of an output not known during a preview."""
SECRET_PLACEHOLDER = "[secret]"
"""What a secret is written as in the recorded inputs and outputs."""
UNKNOWN_PLACEHOLDER = "[unknown]"
"""What an unknown value is written as."""


@dataclass(frozen=True)
class Recorded:
    """One registered resource as the engine would see it."""

    urn: str
    """Engine-form URN."""
    type: str
    """Type token."""
    name: str
    """Logical name."""
    custom: bool
    """A custom resource (False for a component)."""
    parent: str
    """URN of the parent, or empty."""
    provider: str
    """URN of the provider: the one given, else the engine's default provider of the package (empty
    for components and provider resources)."""
    depends_on: tuple[str, ...]
    """Sorted URNs it waits for: explicit depends_on plus property dependencies."""
    property_dependencies: dict[str, tuple[str, ...]]
    """Top-level input -> sorted URNs of the resources whose outputs it was built from (`propertyDependencies`)."""
    protect: bool
    """The protect option."""
    retain_on_delete: bool
    """The retainOnDelete option."""
    delete_before_replace: bool
    """The deleteBeforeReplace option: a replacement deletes the old resource before creating the new one."""
    replace_on_changes: tuple[str, ...]
    """Sorted input paths whose change replaces the resource (`replaceOnChanges`)."""
    ignore_changes: tuple[str, ...]
    """Sorted input paths whose change `pulumi up` ignores (`ignoreChanges`)."""
    custom_timeouts: dict[str, str]
    """The customTimeouts option: operation (create, update, delete) -> duration, only those set."""
    additional_secret_outputs: tuple[str, ...]
    """Sorted outputs the engine keeps secret besides the provider's own (`additionalSecretOutputs`)."""
    inputs: dict[str, Any]
    """Inputs in wire form: camelCase keys, ints as int, secrets as SECRET_PLACEHOLDER."""


def wire_value(value: Any) -> Any:
    """Turn a deserialized protobuf Struct value into stable JSON: secrets and unknowns as
    placeholders, resource references as their URN, integral numbers as integers."""
    if isinstance(value, dict):
        signature = value.get(SIG_KEY)
        if signature == SECRET_SIG:
            return SECRET_PLACEHOLDER
        if signature == RESOURCE_SIG:
            return value.get("urn", "")
        return {key: wire_value(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [wire_value(item) for item in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if value == UNKNOWN:
        return UNKNOWN_PLACEHOLDER
    return value


def provider_urn(reference: str) -> str:
    """The provider's URN from a provider reference `<urn>::<id>`."""
    return reference.rsplit("::", 1)[0] if reference else ""


PROVIDER_TYPE_PREFIX = "pulumi:providers:"
"""Type token prefix of provider resources: `pulumi:providers:<package>`."""


def default_provider_name(version: str) -> str:
    """The engine's name of a package's default provider: `default`, then `_` and each part of the
    version (major, minor, patch, pre-release and build identifiers): 10.2.0 -> `default_10_2_0`.

    pulumi/pulumi pkg/resource/deploy/providers, ProviderRequest.DefaultName (read 2026-12-01).
    """
    if not version:
        return "default"
    core, _, build = version.partition("+")
    core, _, pre = core.partition("-")
    parts = core.split(".") + (pre.split(".") if pre else []) + (build.split(".") if build else [])
    return "_".join(["default", *parts])


def default_provider_urn(stack: str, project: str, type_: str, version: str) -> str:
    """URN of the default provider the engine gives a custom resource registered without one."""
    package = type_.split(":", 1)[0]
    return f"urn:pulumi:{stack}::{project}::{PROVIDER_TYPE_PREFIX}{package}::{default_provider_name(version)}"


def custom_timeouts_of(request) -> dict[str, str]:
    """The request's customTimeouts as operation -> duration, leaving out the unset ones."""
    if not request.HasField("customTimeouts"):
        return {}
    timeouts = request.customTimeouts
    return {
        operation: getattr(timeouts, operation)
        for operation in ("create", "update", "delete")
        if getattr(timeouts, operation)
    }


class RecordingMonitor(MockMonitor):
    """MockMonitor that keeps a `Recorded` per registration and writes engine-form URNs."""

    def __init__(self, mocks, project: str, stack: str):
        super().__init__(mocks)
        self.project = project
        self.stack = stack
        self.records: dict[str, Recorded] = {}
        self.qualified_types: dict[str, str] = {}

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """`urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>`, as the engine names it."""
        qualified = type_
        parent_type = self.qualified_types.get(parent, "")
        if parent_type and parent_type != STACK_TYPE:
            qualified = f"{parent_type}${type_}"
        urn = f"urn:pulumi:{self.stack}::{self.project}::{qualified}::{name}"
        self.qualified_types[urn] = qualified
        return urn

    def provider_of(self, request) -> str:
        """The provider's URN: the one the request names, else the engine's default provider of the
        resource's package and version; empty for components and for provider resources themselves."""
        if request.provider:
            return provider_urn(request.provider)
        if not request.custom or request.type.startswith(PROVIDER_TYPE_PREFIX):
            return ""
        return default_provider_urn(self.stack, self.project, request.type, request.version)

    def RegisterResource(self, request):
        """Record the registration, then answer as the plain mock monitor does."""
        response = super().RegisterResource(request)
        if request.type == STACK_TYPE:
            return response
        inputs = json_format.MessageToDict(request.object, preserving_proto_field_name=True)
        dependencies = set(request.dependencies)
        for property_dependencies in request.propertyDependencies.values():
            dependencies.update(property_dependencies.urns)
        dependencies.discard("")
        property_dependencies = {
            key: tuple(sorted(urn for urn in urns.urns if urn))
            for key, urns in sorted(request.propertyDependencies.items())
            if any(urns.urns)
        }
        self.records[response.urn] = Recorded(
            urn=response.urn,
            type=request.type,
            name=request.name,
            custom=bool(request.custom),
            parent=request.parent,
            provider=self.provider_of(request),
            depends_on=tuple(sorted(dependencies)),
            property_dependencies=property_dependencies,
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            delete_before_replace=bool(request.deleteBeforeReplace),
            replace_on_changes=tuple(sorted(request.replaceOnChanges)),
            ignore_changes=tuple(sorted(request.ignoreChanges)),
            custom_timeouts=custom_timeouts_of(request),
            additional_secret_outputs=tuple(sorted(request.additionalSecretOutputs)),
            inputs=wire_value(inputs),
        )
        return response
