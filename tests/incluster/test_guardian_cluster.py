"""The in-cluster guardian's API server credentials: the pod's projected service account token, which the kubelet
rotates, is read again as client-go reads it (incluster/guardian/cluster.py TOKEN_FILE_PERIOD_SECONDS), by every
holder of the endpoint: the Lease and the scale-to-zero hook keep theirs for the pod's life."""

from __future__ import annotations

from incluster.endpoint import Endpoint
from incluster.guardian import cluster
from incluster.guardian.cluster import IN_CLUSTER_API, api_endpoint
from incluster.guardian.command import cluster_hooks
from incluster.guardian.settings import settings_from
from incluster.lease import Lease
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of


class Clock:
    """A wall clock moved by the test."""

    def __init__(self) -> None:
        self.now = 1796126400.0


def test_the_token_file_is_read_again_every_50_s_and_a_failed_read_keeps_the_last_token(tmp_path):
    from incluster.guardian.cluster import service_account_headers

    token, clock = tmp_path / "token", Clock()
    token.write_text("first-token\n")
    headers = service_account_headers(token, lambda: clock.now)
    assert dict(headers) == {"Authorization": "Bearer first-token"}
    token.write_text("rotated-token\n")  # the kubelet rotates the projected token
    clock.now += 49.0
    assert dict(headers) == {"Authorization": "Bearer first-token"}  # client-go's period less its leeway: 50 s
    clock.now += 1.5
    assert dict(headers) == {"Authorization": "Bearer rotated-token"}
    token.write_text("")  # caught between the kubelet's writes: empty, then gone
    clock.now += 51.0
    assert dict(headers) == {"Authorization": "Bearer rotated-token"}
    token.unlink()
    clock.now += 51.0
    assert headers.get("Authorization") == "Bearer rotated-token"
    token.write_text("third-token")
    clock.now += 51.0
    assert dict(headers.items()) == {"Authorization": "Bearer third-token"}


def test_the_lease_and_the_scale_to_zero_of_an_in_cluster_guardian_send_the_rotated_token(tmp_path, monkeypatch):
    from incluster import scaling

    monkeypatch.setattr(cluster, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.setattr(cluster, "TOKEN_FILE_PERIOD_SECONDS", 0.0)  # read again at each use: no wait in the test
    monkeypatch.setattr(cluster, "TOKEN_FILE_LEEWAY_SECONDS", 0.0)
    (tmp_path / "token").write_text("pod-token-1\n")
    in_cluster = Endpoint(address="http://grpo-head-svc:8265")
    api = api_endpoint(in_cluster)
    assert api is not None and api.address == IN_CLUSTER_API
    lease = Lease(api, "in-cluster guardian grpo-guardian-7d9c5-x2x9k")
    sent: list[dict[str, str]] = []
    monkeypatch.setattr(scaling, "scale_to", lambda api, replicas, report=None: sent.append(dict(api.headers)))
    settings = settings_from(guardian_settings(config_of("dev")), "test")
    hooks = cluster_hooks(settings, in_cluster, print, print)
    assert hooks.scale_to_zero is not None
    hooks.scale_to_zero(settings)
    assert dict(lease.api.headers) == {"Authorization": "Bearer pod-token-1"}  # what each Lease request sends
    (tmp_path / "token").write_text("pod-token-2\n")  # the kubelet rotated it
    hooks.scale_to_zero(settings)
    assert dict(lease.api.headers) == {"Authorization": "Bearer pod-token-2"}
    assert sent == [{"Authorization": "Bearer pod-token-1"}, {"Authorization": "Bearer pod-token-2"}]
