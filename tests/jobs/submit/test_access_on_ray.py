"""Ray's own Jobs client, reaching a real local Ray head through a stand-in of the API server's service proxy, sends
each request with the token a FreshBearer holds at that moment: a follow that outlives its first token goes on."""

from __future__ import annotations

from incluster import job_client
from incluster.endpoint import Endpoint
from incluster.google_token import Credential, FreshBearer
from tests.support.clock import Clock
from tests.support.service_proxy_stand_in import ProxyStandIn, service_proxy_stand_in


def test_the_jobs_client_sends_the_token_renewed_past_the_first_ones_expiry(ray_head):
    clock = Clock(1_800_000_000.0)
    issued: list[float] = []

    def fetch() -> Credential:
        issued.append(clock())
        return Credential(f"ya29.t{len(issued)}", clock() + 3600)

    headers = FreshBearer(fetch, clock)
    with service_proxy_stand_in(ProxyStandIn(ray_head, {})) as api:
        client = job_client.connect(Endpoint(api.dashboard_url, headers))
        client.list_jobs()
        first = len(api.authorizations)
        clock.sleep(3600)
        client.list_jobs()
    assert set(api.authorizations[:first]) == {"Bearer ya29.t1"}
    assert set(api.authorizations[first:]) == {"Bearer ya29.t2"} and len(issued) == 2
