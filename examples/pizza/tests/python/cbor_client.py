"""CBOR against a running pizza server with Python's cbor2, a CBOR implementation that is not ours (kubeconfig path
in argv[1]).

Run by tests/e2e/cbor.rs. The Kubernetes Python client only loads the kubeconfig and makes the TLS connection pool;
bodies are written by cbor2 (text strings, and once byte strings as upstream's Go encoder writes them) and every
answer is read by cbor2: objects, lists, a Table, an error Status and a watch as a CBOR sequence.
"""
import io
import json
import sys
import threading
import time
from collections.abc import Mapping

import cbor2
from kubernetes import client, config

GROUP = "restaurant.programming-kubernetes.info"
TOPPINGS = f"/apis/{GROUP}/v1alpha1/toppings"
SELF_DESCRIBED = b"\xd9\xd9\xf7"

config.load_kube_config(sys.argv[1])
api = client.ApiClient()
cfg = api.configuration
pool = api.rest_client.pool_manager
auth = {s["key"]: s["value"] for s in cfg.auth_settings().values() if s["in"] == "header" and s["value"]}


def request(method, path, body=None, content_type=None, accept="application/cbor", stream=False):
    headers = dict(auth, Accept=accept)
    if content_type:
        headers["Content-Type"] = content_type
    return pool.request(method, cfg.host + path, body=body, headers=headers, preload_content=not stream)


def plain(value):
    """cbor2's immutable maps and lists as plain dicts and lists, to compare with JSON."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def decode(response):
    assert response.headers["Content-Type"] == "application/cbor", response.headers
    assert response.data.startswith(SELF_DESCRIBED), response.data[:8]
    return plain(cbor2.loads(response.data))


def topping(name, cost):
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Topping", "metadata": {"name": name}, "spec": {"cost": cost}}


# Create with a cbor2 body (in the self-described tag), answered in CBOR.
r = request("POST", TOPPINGS, cbor2.dumps(cbor2.CBORTag(55799, topping("salami", 0.25))), "application/cbor")
assert r.status == 201, (r.status, r.data)
created = decode(r)
assert created["kind"] == "Topping" and created["metadata"]["name"] == "salami", created
assert created["spec"]["cost"] == 0.25, created

# Strings and keys as byte strings, as upstream's Go encoder writes them, and no tag.
as_bytes = {b"apiVersion": f"{GROUP}/v1alpha1".encode(), b"kind": b"Topping",
            b"metadata": {b"name": b"tomato"}, b"spec": {b"cost": 0.5}}
r = request("POST", TOPPINGS, cbor2.dumps(as_bytes), "application/cbor")
assert r.status == 201, (r.status, r.data)
assert decode(r)["metadata"]["name"] == "tomato"

# GET and LIST in CBOR are the JSON answers.
for path in [f"{TOPPINGS}/salami", f"/apis/{GROUP}/v1beta1/toppings/salami", TOPPINGS]:
    in_cbor = decode(request("GET", path))
    in_json = json.loads(request("GET", path, accept="application/json").data)
    assert in_cbor == in_json, (in_cbor, in_json)
listed = decode(request("GET", TOPPINGS))
assert listed["kind"] == "ToppingList", listed
assert [i["metadata"]["name"] for i in listed["items"]] == ["salami", "tomato"], listed

# Update with a CBOR body.
salami = decode(request("GET", f"{TOPPINGS}/salami"))
salami["spec"]["cost"] = 0.375
r = request("PUT", f"{TOPPINGS}/salami", cbor2.dumps(salami), "application/cbor")
assert r.status == 200, (r.status, r.data)
assert decode(r)["spec"]["cost"] == 0.375

# A Table.
table = decode(request("GET", TOPPINGS, accept="application/cbor;as=Table;g=meta.k8s.io;v=v1"))
assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1", table
assert [row["cells"][0] for row in table["rows"]] == ["salami", "tomato"], table

# Errors are CBOR Status objects.
r = request("GET", f"{TOPPINGS}/nope")
assert r.status == 404, r.status
status = decode(r)
assert status["kind"] == "Status" and status["reason"] == "NotFound", status
assert status["message"] == f'toppings.{GROUP} "nope" not found', status
r = request("POST", TOPPINGS, b"\xa1\x61", "application/cbor")
status = decode(r)
assert r.status == 400 and status["reason"] == "BadRequest", (r.status, status)
assert status["message"].startswith("unable to determine group/version/kind: cbor: "), status

# Server-side apply with a CBOR configuration.
r = request("PATCH", f"{TOPPINGS}/ham?fieldManager=cbor2", cbor2.dumps(topping("ham", 1.5)),
            "application/apply-patch+cbor")
assert r.status == 201, (r.status, r.data)
assert decode(r)["metadata"]["managedFields"][0]["manager"] == "cbor2"

# A watch: the initial events, then one made while it runs, as a CBOR sequence of WatchEvents.
watch = request("GET", f"{TOPPINGS}?watch=1&resourceVersion=0&timeoutSeconds=3", stream=True)
assert watch.status == 200 and watch.headers["Content-Type"] == "application/cbor-seq", watch.headers


def create_later():
    time.sleep(0.5)
    request("POST", TOPPINGS, cbor2.dumps(topping("olive", 0.1)), "application/cbor")


threading.Thread(target=create_later).start()
data = watch.read()  # the server ends the watch after timeoutSeconds
events = []
decoder = cbor2.CBORDecoder(io.BytesIO(data))
while decoder.fp.tell() < len(data):
    events.append(plain(decoder.decode()))
seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
assert sorted(seen[:3]) == [("ADDED", "ham"), ("ADDED", "salami"), ("ADDED", "tomato")], seen
assert seen[3:] == [("ADDED", "olive")], seen
assert all(e["object"]["kind"] == "Topping" for e in events), events

print("cbor2 client: ok")
