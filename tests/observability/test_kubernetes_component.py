"""deploy/k8s/components/prometheus-scrape, rendered over the production overlay as an operator
adds it, checked as the other renders are (tests/deploy/test_kubernetes.py): every object valid
against the Kubernetes schemas, the API pods and the webhook deliverers annotated for Prometheus's
`kubernetes-pods` job on ports they serve, the pod's address admitted as a host name (and the
API answering /actuator/prometheus to it), and the namespace `monitoring` let through to those
ports alone."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from django.test import Client

from tests.deploy.test_kubernetes import (
    K8S,
    KUBERNETES_VERSION,
    Manifest,
    kustomize,
    selected,
)

COMPONENT = K8S / "components" / "prometheus-scrape"
POD_IP = "10.42.0.17"
SCRAPED = {
    "platform-api": ("api", "8000", "/actuator/prometheus"),
    "platform-webhooks": ("webhooks", "9100", "/metrics"),
}


@functools.cache
def rendered() -> tuple[Manifest, ...]:
    overlay = K8S / "overlays" / "production"
    with tempfile.TemporaryDirectory(prefix="platform-k8s-") as workdir:
        copy = Path(workdir) / "production"
        shutil.copytree(overlay, copy)
        back = os.path.relpath(K8S, copy)
        text = (copy / "kustomization.yaml").read_text().replace("../../", f"{back}/")
        text += f"\ncomponents:\n  - {back}/components/prometheus-scrape\n"
        (copy / "kustomization.yaml").write_text(text)
        return tuple(kustomize(copy))


def named(kind: str) -> dict[str, Manifest]:
    return {item["metadata"]["name"]: item for item in rendered() if item["kind"] == kind}


def container(workload: str, name: str) -> dict[str, Any]:
    pod = named("Deployment")[workload]["spec"]["template"]["spec"]
    [found] = [c for c in pod["containers"] if c["name"] == name]
    return found


def test_the_component_renders_and_every_object_validates():
    for item in rendered():
        try:
            kubernetes_validate.validate(item, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{item['kind']} {item['metadata']['name']}: {error.message}")
    assert "platform-prometheus-scrape" in named("NetworkPolicy")


@pytest.mark.parametrize("workload", sorted(SCRAPED))
def test_the_pods_are_annotated_for_prometheus_on_a_port_they_serve(workload: str):
    name, port, path = SCRAPED[workload]
    template = named("Deployment")[workload]["spec"]["template"]

    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": port,
        "prometheus.io/path": path,
    }
    served = {str(p["containerPort"]) for p in container(workload, name)["ports"]}
    assert port in served


def test_the_api_admits_its_pod_address_and_exposes_the_endpoint():
    env = container("platform-api", "api")["env"]
    names = [variable["name"] for variable in env]

    # $(POD_IP) expands only to a variable defined before it.
    assert names.index("POD_IP") < names.index("ALLOWED_HOSTS")
    [pod_ip] = [variable for variable in env if variable["name"] == "POD_IP"]
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    [hosts] = [variable for variable in env if variable["name"] == "ALLOWED_HOSTS"]
    assert hosts["value"] == "$(ALLOWED_HOSTS),$(POD_IP)"
    config = named("ConfigMap")["platform-config"]["data"]
    assert config["ALLOWED_HOSTS"]
    assert "prometheus" in config["MANAGEMENT_ENDPOINTS_EXPOSURE"].split(",")


@pytest.mark.django_db
def test_the_api_answers_a_scrape_by_pod_address_with_the_expanded_hosts(
    client: Client, settings: Any
):
    config = named("ConfigMap")["platform-config"]["data"]
    # What the kubelet expands $(ALLOWED_HOSTS),$(POD_IP) to.
    settings.ALLOWED_HOSTS = f"{config['ALLOWED_HOSTS']},{POD_IP}".split(",")
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = config["MANAGEMENT_ENDPOINTS_EXPOSURE"].split(",")

    scraped = client.get("/actuator/prometheus", HTTP_HOST=f"{POD_IP}:8000")
    elsewhere = client.get("/actuator/prometheus", HTTP_HOST="10.42.0.99:8000")

    assert scraped.status_code == 200
    assert b"platform_database_up" in scraped.content
    assert elsewhere.status_code == 400


def test_only_the_monitoring_namespace_reaches_only_the_scraped_ports():
    policy = named("NetworkPolicy")["platform-prometheus-scrape"]["spec"]
    pods = {
        name: deployment["spec"]["template"]["metadata"]["labels"]
        for name, deployment in named("Deployment").items()
    }

    assert {name for name, labels in pods.items() if selected(policy["podSelector"], labels)} == {
        "platform-api",
        "platform-webhooks",
    }
    [rule] = policy["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert sorted(port["port"] for port in rule["ports"]) == [8000, 9100]
    # The component leaves the overlay's policies as they were: nginx alone reaches the API.
    overlay = kustomize(K8S / "overlays" / "production")
    before = {item["metadata"]["name"] for item in overlay if item["kind"] == "NetworkPolicy"}
    assert set(named("NetworkPolicy")) == before | {"platform-prometheus-scrape"}
