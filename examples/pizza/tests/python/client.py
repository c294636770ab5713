"""The official Kubernetes Python client against a running pizza server (kubeconfig path in argv[1]).

Run by tests/e2e/python_client.rs: discovery through the dynamic client, create, list, merge patch, an admission
refusal, reading another version through CustomObjectsApi, and a watch that sees a deletion.
"""
import json
import sys
import threading
import time

from kubernetes import client, config, dynamic, watch
from kubernetes.client import ApiClient
from kubernetes.client.rest import ApiException

GROUP = "restaurant.programming-kubernetes.info"

config.load_kube_config(sys.argv[1])
dyn = dynamic.DynamicClient(ApiClient())
toppings = dyn.resources.get(api_version=f"{GROUP}/v1beta1", kind="Topping")
pizzas = dyn.resources.get(api_version=f"{GROUP}/v1beta1", kind="Pizza")
assert toppings.namespaced is False and pizzas.namespaced is True

for name, cost in [("tomato", 0.1), ("mozzarella", 1)]:
    toppings.create(body={"apiVersion": f"{GROUP}/v1beta1", "kind": "Topping",
                          "metadata": {"name": name}, "spec": {"cost": cost}})

def pizza(name, *toppings):
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "Pizza", "metadata": {"name": name},
            "spec": {"toppings": [{"name": t, "quantity": 1} for t in toppings]}}

created = pizzas.create(namespace="default", body=pizza("margherita", "tomato", "mozzarella"))
assert int(created.metadata.resourceVersion) > 0, created

listed = pizzas.get(namespace="default")
assert [p.metadata.name for p in listed.items] == ["margherita"], listed
assert listed.kind == "PizzaList", listed.kind

patched = pizzas.patch(namespace="default", name="margherita", body={"metadata": {"labels": {"size": "large"}}},
                       content_type="application/merge-patch+json")
assert patched.metadata.labels["size"] == "large", patched.metadata.labels

try:
    pizzas.create(namespace="default", body=pizza("hawaii", "pineapple"))
    raise AssertionError("a pizza with an unknown topping was created")
except ApiException as e:
    status = json.loads(e.body)
    assert e.status == 403 and status["reason"] == "Forbidden", (e.status, e.body)
    assert status["message"] == f'pizzas.{GROUP} "hawaii" is forbidden: unknown topping: pineapple', status

objects = client.CustomObjectsApi()
old = objects.get_namespaced_custom_object(GROUP, "v1alpha1", "default", "pizzas", "margherita")
assert old["apiVersion"] == f"{GROUP}/v1alpha1" and old["spec"]["toppings"] == ["tomato", "mozzarella"], old

try:
    objects.get_namespaced_custom_object(GROUP, "v1beta1", "default", "pizzas", "nope")
    raise AssertionError("a missing pizza was found")
except ApiException as e:
    status = json.loads(e.body)
    assert e.status == 404 and status["message"] == f'pizzas.{GROUP} "nope" not found', (e.status, e.body)

def delete_soon():
    time.sleep(0.5)
    pizzas.delete(namespace="default", name="margherita")

threading.Thread(target=delete_soon).start()
seen = []
w = watch.Watch()
for event in w.stream(objects.list_namespaced_custom_object, GROUP, "v1beta1", "default", "pizzas",
                      timeout_seconds=20):
    seen.append((event["type"], event["object"]["metadata"]["name"]))
    if event["type"] == "DELETED":
        w.stop()
assert seen == [("ADDED", "margherita"), ("DELETED", "margherita")], seen
print("python client: ok")
