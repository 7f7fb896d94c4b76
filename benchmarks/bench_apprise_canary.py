"""Figure: server-side request forgery through Apprise, measured from outside (issue 21, item 1).

A canary listener on 127.0.0.1:443 (where Zulip's and Azure Communication Services' plugins connect; binding it
needs root) counts every connection. With `allow_private_targets = false`:

1. the JSON API of the real HTTP server is asked for the issue's subscriptions (before the fix: 201 for
   `zulip://bot@127.0.0.1/TOKEN` and `acs://sender@example.com/KEY/evil-rebind.test`);
2. the same URLs, and a name that resolves public when checked and 127.0.0.1 when Apprise connects (DNS
   rebinding: the resolver hook of tests/support/canary.py), are put straight into the store, as subscriptions
   made before the fix would be, and the real dispatcher delivers `--events` events to them;
3. control: the same zulip delivery with `allow_private_targets = true` reaches the canary (it is not blind).

Printed: the API's statuses, connections the canary counted (before: 68), Apprise deliveries to loopback
(before: 3), and what became of each subscription.

Run (as root): python -m benchmarks run apprise_canary   (size: events per dispatch, default 10)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from feeds.webhooks import subscribe
from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from feeds.webhooks.safety import Resolver
from storage.db import create_db_engine, migrate
from storage.front import Storage
from tests.support.canary import PUBLIC, Canary, Rebinding, canary
from tests.support.served import serve
from tests.support.webhooks import LINKS, emit

TOKEN = "a" * 32
KEY = "a2V5a2V5a2V5a2V5"  # base64, as Azure's access keys are
ZULIP = f"zulip://bot@127.0.0.1/{TOKEN}"
ACS = f"acs://sender@example.com/{KEY}/evil-rebind.test"
REBINDING = "json://evil-rebind-2.test:443/hook"  # its own name: each is asked first at the check
BEFORE = "before issue 21's fix"
BENCHMARK = Benchmark(
    name="apprise_canary",
    about="Server-side request forgery through Apprise, counted by a canary listener on 127.0.0.1:443",
    tags=("slow", "webhooks", "security"),
    size="events per dispatch (default 10)",
    small=2,
    requires=("root",),
    figures=(
        Figure("API answers accepting a private target", "answers", baseline=2, baseline_at=f"{BEFORE} (201, 201)",
               note="of 3: zulip, acs, rebinding"),
        Figure("canary connections with private targets refused", "connections", baseline=68, baseline_at=BEFORE),
        Figure("Apprise deliveries that reached loopback", "deliveries", baseline=3, baseline_at=BEFORE),
        Figure("control (private targets allowed): canary connections", "connections", direction="higher",
               note="at least 1: the zeros above are refusals, not a blind canary"),
    ),
)


def dispatch(store: Storage, allow_private: bool, resolve: Resolver, events: int) -> None:
    """`events` events, delivered by the real dispatcher until nothing more is due."""
    emit(store, events)
    dispatcher = Dispatcher(store.outbox, DeliveryOptions(allow_private_targets=allow_private, timeout_s=5.0,
                                                          connect_timeout_s=2.0),
                            secret_for=lambda sub: None, links=LINKS, resolve=resolve)
    try:
        dispatcher.run_once()
    finally:
        dispatcher.close()


def fresh_store(folder: Path, name: str) -> Storage:
    engine = create_db_engine(f"sqlite:///{folder / name}")
    migrate(engine)
    return Storage(engine)


def api_statuses(store: Storage, listener: Canary) -> dict[str, int]:
    """What the API answers each URL with, private targets refused (a rebinding name cannot be handed to the
    server's resolver: offline it does not resolve at all, which is refused too)."""
    statuses = {}
    with serve(store, api_token="api-token", allow_private_targets=False) as served, served.client() as client:
        for url in (ZULIP, ACS, REBINDING):
            answer = client.post("/api/v1/subscriptions", json={"url": url, "format": "apprise"},
                                 headers={"Authorization": "Bearer api-token"})
            statuses[url] = answer.status_code
            detail(f"  API {answer.status_code} for {url}: {answer.json().get('detail', '')[:160]}")
    return statuses


def measure(size: int | None = None) -> dict[str, float]:
    events = size or 10
    detail(f"bench_apprise_canary: canary on 127.0.0.1:443, {events} events per dispatch")
    with tempfile.TemporaryDirectory(prefix="hubwatch-canary-") as tmp, canary(443) as listener:
        folder = Path(tmp)
        statuses = api_statuses(fresh_store(folder, "api.db"), listener)
        after_api = listener.settled()

        store = fresh_store(folder, "dispatch.db")
        made = [store.subscriptions.add_subscription(url, "apprise", min_severity="info") for url in (ZULIP, ACS)]
        made.append(subscribe(store.subscriptions, REBINDING, "apprise", allow_private=False, min_severity="info",
                              resolve=Rebinding(first=[PUBLIC], then=[PUBLIC])))
        dispatch(store, False, Rebinding(first=[PUBLIC], then=["127.0.0.1"]), events)
        guarded = listener.settled() - after_api
        deliveries = store.outbox.list_deliveries()
        delivered = sum(item.delivery.status == "delivered" for item in deliveries)
        detail(f"  dispatcher: {len(deliveries)} deliveries, {delivered} delivered, statuses "
              f"{sorted({item.delivery.status for item in deliveries})}")
        for sub in made:
            after = store.subscriptions.get_subscription(sub.id)
            detail(f"  {sub.url}: enabled={after.enabled}; {(after.disabled_reason or '')[:200]}")
        store.engine.dispose()

        control = fresh_store(folder, "control.db")
        control.subscriptions.add_subscription(ZULIP, "apprise", min_severity="info")
        dispatch(control, True, Rebinding(first=[PUBLIC], then=["127.0.0.1"]), 1)
        seen_by_control = listener.settled() - after_api - guarded
        control.engine.dispose()

    detail(f"API statuses: {', '.join(f'{s}' for s in statuses.values())} for zulip, acs, rebinding")
    return {"API answers accepting a private target": sum(200 <= code < 300 for code in statuses.values()),
            "canary connections with private targets refused": after_api + guarded,
            "Apprise deliveries that reached loopback": delivered,
            "control (private targets allowed): canary connections": seen_by_control}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
