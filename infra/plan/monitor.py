"""A mock monitor that records every RegisterResource with its parent, dependencies,
provider and options, and names resources with the engine's URNs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

STACK_TYPE = "pulumi:pulumi:Stack"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SIG_KEY = "4dabf18193072939515e22adb298388d"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
SECRET_PLACEHOLDER = "[secret]"
UNKNOWN_PLACEHOLDER = "[unknown]"


@dataclass(frozen=True)
class Recorded:
    """One registered resource as the engine would see it."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str
    depends_on: tuple[str, ...]
    protect: bool
    retain_on_delete: bool
    inputs: dict[str, Any]


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
        self.records[response.urn] = Recorded(
            urn=response.urn,
            type=request.type,
            name=request.name,
            custom=bool(request.custom),
            parent=request.parent,
            provider=provider_urn(request.provider),
            depends_on=tuple(sorted(dependencies)),
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            inputs=wire_value(inputs),
        )
        return response
