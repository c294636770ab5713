#!/usr/bin/env python3
"""Writes the seed corpora (fuzz/corpus/<target>/) from the repository's fixtures and a few hand-written inputs.

Run from anywhere: python3 fuzz/seeds.py. The output is committed; rerun after changing a target's input layout.
Layouts (byte 0 is a selector for most targets) are described on each target in fuzz/src/targets.rs.
"""

import glob
import hashlib
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
GROUP = "restaurant.programming-kubernetes.info"
MAX_PER_TARGET = 40


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if len(os.listdir(d)) >= MAX_PER_TARGET:
        return
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def envelope(api_version, kind, raw):
    return b"k8s\0" + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw) + ld(3, b"") + ld(4, b"")


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


# The recorded requests of the managed-fields golden tests: bodies, paths, content types.
recorded = []
for path in sorted(glob.glob(os.path.join(ROOT, "examples/pizza/tests/fixtures/managed_fields/*/*.json"))):
    if path.endswith(".normalized.json"):
        continue
    try:
        doc = json.load(open(path))
    except ValueError:
        continue
    if isinstance(doc, dict) and "request" in doc:
        recorded.append(doc["request"])

bodies_json = []
bodies_yaml = []
for r in recorded:
    body = r.get("body") or ""
    if not isinstance(body, str):
        body = json.dumps(body)
    if body.lstrip().startswith("{"):
        bodies_json.append(body)
    elif body:
        bodies_yaml.append(body)

artifacts = [read(p) for p in ["examples/pizza/artifacts/margherita.yaml", "examples/pizza/artifacts/oven.yaml",
                                "examples/pizza/artifacts/toppings.yaml"]]
pizza_b1 = json.dumps({"apiVersion": f"{GROUP}/v1beta1", "kind": "Pizza",
                       "metadata": {"name": "margherita", "labels": {"a": "b"}},
                       "spec": {"toppings": [{"name": "tomato", "quantity": 2}]}})
pizza_a1 = json.dumps({"apiVersion": f"{GROUP}/v1alpha1", "kind": "Pizza", "metadata": {"name": "m"},
                       "spec": {"toppings": ["tomato", "tomato", "salami"]}, "status": {"cost": 1.5}})
topping = json.dumps({"apiVersion": f"{GROUP}/v1beta1", "kind": "Topping", "metadata": {"name": "salami"},
                      "spec": {"cost": 0.5}})
oven = json.dumps({"apiVersion": f"{GROUP}/v1beta1", "kind": "Oven", "metadata": {"name": "main"},
                   "spec": {"replicas": 3}, "status": {"replicas": 1, "selector": "app=oven"}})
meta_pb = ld(1, "margherita") + ld(3, "default") + ld(11, ld(1, "app") + ld(2, "pizza"))
pizza_pb_a1 = envelope(f"{GROUP}/v1alpha1", "Pizza", ld(1, meta_pb) + ld(2, ld(1, "tomato") + ld(1, "salami")))
pizza_pb_b1 = envelope(f"{GROUP}/v1beta1", "Pizza",
                       ld(1, meta_pb) + ld(2, ld(1, ld(1, "tomato") + bytes([0x10, 2]))))
topping_pb = envelope(f"{GROUP}/v1alpha1", "Topping", ld(1, ld(1, "salami")) + ld(2, bytes([0x09]) + bytes(8)))

# decode: selector = format + 3*validation + 9*alpha + 18*kind
FORMAT = {"json": 0, "yaml": 1, "pb": 2}
for kind, alpha, fmt, body in [
    (0, 0, "json", pizza_b1), (0, 1, "json", pizza_a1), (1, 0, "json", topping), (2, 0, "json", oven),
    (0, 1, "yaml", artifacts[0]), (2, 0, "yaml", artifacts[1]), (1, 1, "yaml", artifacts[2]),
    (0, 1, "pb", pizza_pb_a1), (0, 0, "pb", pizza_pb_b1), (1, 1, "pb", topping_pb),
]:
    for validation in range(3):
        sel = FORMAT[fmt] + 3 * validation + 9 * alpha + 18 * kind
        write("decode", bytes([sel]) + (body if isinstance(body, bytes) else body.encode()))
for body in bodies_json[:6]:
    write("decode", bytes([0]) + body.encode())
for body in bodies_yaml[:6]:
    write("decode", bytes([1]) + body.encode())

# cbor: selector = validation + 3*alpha + 6*kind, then a CBOR body (written by the small encoder below: definite
# lengths, text strings, float64; some with tag 55799, some with byte strings as upstream's Go encoder writes them)
def cbor(value, tag=True, byte_strings=False):
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for ai, size in [(24, 1), (25, 2), (26, 4), (27, 8)]:
            if n < 1 << (8 * size):
                return bytes([major << 5 | ai]) + n.to_bytes(size, "big")

    def enc(v):
        if v is None:
            return b"\xf6"
        if v is True:
            return b"\xf5"
        if v is False:
            return b"\xf4"
        if isinstance(v, int):
            return head(0, v) if v >= 0 else head(1, -1 - v)
        if isinstance(v, float):
            return b"\xfb" + struct.pack(">d", v)
        if isinstance(v, str):
            b = v.encode()
            return head(2 if byte_strings else 3, len(b)) + b
        if isinstance(v, list):
            return head(4, len(v)) + b"".join(enc(x) for x in v)
        return head(5, len(v)) + b"".join(enc(k) + enc(x) for k, x in v.items())

    return (b"\xd9\xd9\xf7" if tag else b"") + enc(value)


for kind, alpha, body in [(0, 0, pizza_b1), (0, 1, pizza_a1), (1, 0, topping), (2, 0, oven)]:
    for validation in range(3):
        write("cbor", bytes([validation + 3 * alpha + 6 * kind]) + cbor(json.loads(body)))
    write("cbor", bytes([1 + 3 * alpha + 6 * kind]) + cbor(json.loads(body), tag=False, byte_strings=True))
unknown = json.loads(pizza_b1)
unknown["spec"]["crust"] = "thin"
write("cbor", bytes([0]) + cbor(unknown))
# duplicate keys, indefinite lengths, tags 22 and 1, a half float, NaN, nesting, truncation
write("cbor", b"\0\xd9\xd9\xf7\xa2\x64kind\x65Pizza\x64kind\x65Pizza")
write("cbor", b"\6\xbf\x64kind\x67Topping\x64spec\xbf\x64cost\xf9\x38\x00\xff\x68metadata\xa1\x64name\x7f\x61a\x61b\xff\xff")
write("cbor", b"\0\xa2\x61a\xd6\x42\x01\x02\x61b\xc1\x1a\x65\x00\x00\x00")
write("cbor", b"\0\xa1\x61x\xf9\x7e\x00")
write("cbor", b"\0" + b"\x81" * 200 + b"\x01")
write("cbor", bytes([12]) + cbor(json.loads(oven))[:-3])

# codec: any bytes
for body in [pizza_b1, pizza_a1, oven, pizza_pb_a1, pizza_pb_b1, topping_pb] + artifacts + bodies_yaml[:4]:
    write("codec", body)
write("codec", '{"name":"a","name":"b","labels":{"x":"y","x":"z"},"creationTimestamp":"2024-01-02T03:04:05Z"}')
write("codec", "a: 1\na: 2\nb: [1, 2.5, true, null, ~]\nc: {d: e}\n")
write("codec", '{"apiVersion":"v1","kind":"X","a":"\\ud800","b":1e400}')

# watch: JSON lines and protobuf frames
lines = "".join(json.dumps({"type": t, "object": json.loads(pizza_b1)}) + "\n"
                for t in ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"])
write("watch", lines)
write("watch", '{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410}}\n\n')
for t, obj in [("ADDED", pizza_pb_a1), ("MODIFIED", pizza_pb_b1), ("DELETED", topping_pb)]:
    event = ld(1, t) + ld(2, ld(1, obj))
    write("watch", event)
    write("watch", len(event).to_bytes(4, "big") + event + len(event).to_bytes(4, "big") + event)
write("watch", b"\xff\xff\xff\xff")

# selectors: 0 label, 1 field
for s in ["app=pizza", "app==pizza,tier!=3", "app in (pizza, pasta),!legacy", "tier notin (1,2), env",
          "x>1,y<10", "example.com/name=value_1", "!a,b", "", "app"]:
    write("selectors", b"\0" + s.encode())
for s in ["metadata.name=margherita", "metadata.namespace!=default,status.phase==Running", "a=b\\,c",
          "spec.nodeName=", "a\\=b=c\\\\d"]:
    write("selectors", b"\1" + s.encode())

# continue tokens
import base64
for rv, start in [(5, "margherita\u0000"), (-1, "default/x"), (10, "../escape"), (3, "")]:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    write("continue_token", base64.urlsafe_b64encode(token.encode()).decode().rstrip("="))
write("continue_token", "not a token")

# request_info: method selector + path
paths = [r["path"] for r in recorded]
for i, p in enumerate(paths[:12] + [
        "/api/v1/namespaces/default/pods/x/log", "/apis/a.b/v1/watch/namespaces/n/xs/y",
        "/apis/a.b/v1/xs?watch=true&fieldSelector=metadata.name%3Dx", "/healthz", "/apis/%2e%2e/v1/x",
        "/apis/a.b/v1/namespaces/n/xs/y/status?labelSelector=a%3Db"]):
    write("request_info", bytes([i % 6]) + p.encode())

# negotiate: accept \0 content-type
for accept, ct in [
        ("application/json", "application/json"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io, application/json", "application/yaml"),
        ("application/vnd.kubernetes.protobuf;q=0.9, */*;q=0.1", "application/vnd.kubernetes.protobuf"),
        ("application/json;stream=watch", "application/json; charset=utf-8"),
        ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "text/plain"),
        ("*/*", ""), ('application/yaml;q="0.5";pretty=1', "application/apply-patch+yaml")]:
    write("negotiate", f"{accept}\0{ct}")

# query: request selector + query string
for i, q in enumerate([
        "resourceVersion=0", "limit=1&continue=", "labelSelector=app%3Dpizza&fieldSelector=metadata.name%3Dmargherita",
        "gracePeriodSeconds=0&propagationPolicy=Foreground", "resourceVersion=1&resourceVersionMatch=NotOlderThan&limit=5",
        "dryRun=All&fieldManager=x&fieldValidation=Strict", "timeoutSeconds=3&allowWatchBookmarks=true",
        "resourceVersionMatch=Exact&resourceVersion=10", "pretty=true&sendInitialEvents=false", "orphanDependents=true"]):
    write("query", bytes([i % 6]) + q.encode())
    write("query", bytes([(i + 3) % 6]) + q.encode())

# patch: selector = type + 4*alpha + 8*status + 16*force + 32*validation
JSONP, MERGE, SMP, APPLY = range(4)
patches = [
    (JSONP, '[{"op":"replace","path":"/spec/toppings/0/quantity","value":3},{"op":"test","path":"/metadata/name","value":"margherita"}]'),
    (JSONP, '[{"op":"add","path":"/metadata/labels/x","value":"y"},{"op":"remove","path":"/metadata/annotations"},{"op":"move","from":"/metadata/labels","path":"/metadata/annotations"}]'),
    (JSONP, '[{"op":"copy","from":"/spec","path":"/status"}]'),
    (MERGE, '{"metadata":{"labels":{"app":null,"b":"c"}},"spec":{"toppings":[{"name":"ham"}]}}'),
    (MERGE, 'null'),
    (SMP, '{"spec":{"toppings":[{"name":"tomato","quantity":5},{"$patch":"delete","name":"mozzarella"}]}}'),
    (SMP, '{"metadata":{"$retainKeys":["labels"],"labels":{"$patch":"replace","z":"1"}},"$setElementOrder/spec":[]}'),
    (SMP, '{"spec":{"$setElementOrder/toppings":[{"name":"tomato"},{"name":"mozzarella"}]}}'),
]
for t, body in patches:
    write("patch", bytes([t]) + body.encode())
    write("patch", bytes([t + 4 + 32]) + body.encode())
for r in recorded:
    ct = r.get("contentType") or ""
    body = r.get("body") or ""
    if not isinstance(body, str):
        body = json.dumps(body)
    if "apply-patch" in ct:
        write("patch", bytes([APPLY + (16 if "force=true" in r["path"] else 0) + (4 if "v1alpha1" in r["path"] else 0)])
              + body.encode())
    elif "merge-patch" in ct:
        write("patch", bytes([MERGE]) + body.encode())

# request: method selector, path \0 content-type \0 accept \0 body
METHOD = {"GET": 0, "POST": 1, "PUT": 2, "PATCH": 3, "DELETE": 4}
for r in recorded:
    body = r.get("body") or ""
    if not isinstance(body, str):
        body = json.dumps(body)
    write("request", bytes([METHOD.get(r["method"], 0)]) +
          f"{r['path']}\0{r.get('contentType') or ''}\0application/json\0{body}".encode())
base = f"/apis/{GROUP}/v1beta1/namespaces/default/pizzas"
for m, p, ct, acc, body in [
        (0, base, "", "application/json;as=Table;v=v1;g=meta.k8s.io", ""),
        (0, base + "/margherita", "", "application/vnd.kubernetes.protobuf", ""),
        (1, base, "application/yaml", "application/yaml", artifacts[0].decode()),
        (4, base + "/margherita", "application/json", "", '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"preconditions":{"uid":"x"}}'),
        (2, base + "/margherita/status", "application/json", "", pizza_b1),
        (0, f"/apis/{GROUP}/v1beta1/namespaces/default/ovens/main/scale", "", "", "")]:
    write("request", bytes([m]) + f"{p}\0{ct}\0{acc}\0{body}".encode())

# cel: 0 plain, 1 mutation
for e in ["self.toppings.all(t, t.quantity > 0)", "object.metadata.name.startsWith('m') && size(object.spec.toppings) < params.max",
          "oldSelf == self || self.toppings.exists(t, t.name == 'salami')", "has(object.metadata.labels) ? object.metadata.labels.app : 'none'",
          "[1,2,3].map(x, x * 2).filter(y, y > 2).size() == 2", "'abc'.matches('^a.c$') && int('5') + 1 == 6",
          "duration('1h') > duration('30m') && timestamp('2024-01-01T00:00:00Z') < timestamp('2025-01-01T00:00:00Z')",
          "params.names.map(n, n + '!').join(',')", "{'a': 1}['a'] == 1u", "string(1.5) + string(b'x')"]:
    write("cel", b"\0" + e.encode())
for e in ["Object{spec: Object.spec{toppings: [Object.spec.toppings{name: 'ham', quantity: 1}]}}",
          "[JSONPatch{op: 'add', path: '/metadata/labels/x', value: 'y'}]"]:
    write("cel", b"\1" + e.encode())

# config: 0 audit policy, 1 tracing, 2 kubeconfig, 3 admission configuration
write("config", b"\0" + b"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
  resources:
  - group: ""
    resources: ["endpoints", "services"]
- level: RequestResponse
  resources:
  - group: restaurant.programming-kubernetes.info
    resources: ["pizzas/status"]
    resourceNames: ["margherita"]
- level: Metadata
  nonResourceURLs: ["/healthz*"]
""")
write("config", b"\0" + b'{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata"}]}')
write("config", b"\1" + b"apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: localhost:4317\nsamplingRatePerMillion: 1000000\n")
write("config", b"\1" + b'{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"TracingConfiguration","samplingRatePerMillion":-1}')
write("config", b"\2" + b"""apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: "AAAA"}
users:
- name: "*.svc"
  user: {token: abc}
- name: u
  user: {client-certificate-data: "AA==", client-key-data: "AA==", exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}
contexts:
- name: c
  context: {cluster: k, user: u, namespace: default}
""")
write("config", b"\3" + b"""apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: /nonexistent
- name: Other
  path: other.yaml
""")
