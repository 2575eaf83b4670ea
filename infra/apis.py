"""The project services (APIs) the stack needs, enabled once and never disabled on destroy."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.facts.gcp import ARTIFACT_REGISTRY_SERVICE, BASE_SERVICES, CONTAINER_FILESYSTEM_SERVICE, LUSTRE_SERVICES


def required_services(storage_type: str, image_source: str) -> tuple[str, ...]:
    """The APIs a stack with this storage type and image source (`workload.imageSource` resolved) needs, sorted."""
    services = set(BASE_SERVICES)
    if storage_type == "lustre":
        services |= set(LUSTRE_SERVICES)
    if image_source == "registry":
        services |= {ARTIFACT_REGISTRY_SERVICE, CONTAINER_FILESYSTEM_SERVICE}
    return tuple(sorted(services))


def project_number(project: str, apis: dict[str, pulumi.Resource], parent: pulumi.Resource) -> pulumi.Output[str]:
    """The project's number, looked up once Cloud Resource Manager's API is enabled (`projects.get` is its call)."""
    lookup = gcp.organizations.get_project_output(
        project_id=project,
        opts=pulumi.InvokeOutputOptions(parent=parent, depends_on=[apis["cloudresourcemanager.googleapis.com"]]),
    )
    return lookup.number


def service_resource_name(service: str) -> str:
    """Logical name of the Service resource of an API: `container.googleapis.com` -> `container`."""
    return service.split(".", 1)[0]


@dataclass(frozen=True)
class ApisArgs:
    """Inputs of the Apis component."""

    project: str
    """Project whose services are enabled."""
    services: tuple[str, ...]
    """API names such as `container.googleapis.com`."""


class Apis(pulumi.ComponentResource):
    """One `gcp.projects.Service` per API; each resource that calls an API waits for that one only."""

    services: dict[str, gcp.projects.Service]
    """The Service resources by API name."""

    def __init__(self, name: str, args: ApisArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:Apis", name, None, opts)
        self.services = {
            service: gcp.projects.Service(
                service_resource_name(service),
                gcp.projects.ServiceArgs(
                    project=args.project,
                    service=service,
                    disable_on_destroy=False,
                    disable_dependent_services=False,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for service in args.services
        }
        self.register_outputs({})

    def service(self, api: str) -> gcp.projects.Service:
        """The Service of `api` (e.g. `container.googleapis.com`)."""
        return self.services[api]
