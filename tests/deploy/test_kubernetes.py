"""deploy/k8s, checked without a cluster (docs/deployment.md, "Kubernetes").

Each overlay is rendered by `kubectl kustomize` (the kustomize built into the machines' kubectl),
as `kubectl apply -k` renders it; so is the production overlay with the CloudNativePG component
switched on the way its kustomization.yaml says. Every core object is validated against the
Kubernetes 1.31 schemas that `kubernetes-validate` (PyPI) bundles, strictly (an unknown field
fails); custom resources are checked for their shape. Then the manifests are held to the code:
environment variables, probe paths, commands, the way in, and the rules every pod keeps.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.test import Client

from exchange.api.serializers import MAX_WAIT_SECONDS
from tests.deploy.test_nginx import TEMPLATE_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.31.0"
# Custom resources: kubernetes-validate has no schema for them, so their shape is checked here.
CUSTOM_GROUPS = {"postgresql.cnpg.io"}
RENDERS = ("dev", "production", "production+cloudnative-pg")
# The compose file's services that run the platform's image, by the manifests' workloads.
COMPOSE_SERVICE_OF = {
    "platform-api": "backend",
    "platform-worker": "worker",
    "platform-beat": "beat",
    "platform-migrate": "migrate",
    "platform-webhooks": "webhooks",
}
DATA_CLIENTS = {"api", "worker", "beat", "migrate", "webhooks"}
OWN_COMPONENTS = DATA_CLIENTS | {"nginx"}
LIVENESS = "/api/actuator/health/liveness"
READINESS = "/api/actuator/health/readiness"
WORKLOADS = {"Deployment", "StatefulSet", "Job"}

Manifest = dict[str, Any]


def kubectl() -> str:
    found = shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl is missing: the machines' image has it (kustomize 5.5 inside)")
    return found


def kustomize(directory: Path) -> list[Manifest]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def with_cloudnative_pg(workdir: Path) -> Path:
    """The production overlay as an operator switches the component on: a copy of it with the
    commented `components:` lines uncommented, its relative paths pointing back into deploy/k8s."""
    overlay = K8S / "overlays" / "production"
    copy = workdir / "production"
    shutil.copytree(overlay, copy)
    text = (copy / "kustomization.yaml").read_text()
    switched = text.replace("# components:\n#   - ", "components:\n  - ")
    assert switched != text, "the production overlay no longer shows how to add the component"
    back = os.path.relpath(overlay, copy)
    switched = switched.replace("../../", f"{back}/../../")
    (copy / "kustomization.yaml").write_text(switched)
    return copy


@functools.cache
def rendered(name: str) -> tuple[Manifest, ...]:
    if name == "production+cloudnative-pg":
        with tempfile.TemporaryDirectory(prefix="platform-k8s-") as workdir:
            return tuple(kustomize(with_cloudnative_pg(Path(workdir))))
    if name == "base":
        return tuple(kustomize(K8S / "base"))
    return tuple(kustomize(K8S / "overlays" / name))


def objects(name: str, kind: str) -> dict[str, Manifest]:
    return {item["metadata"]["name"]: item for item in rendered(name) if item["kind"] == kind}


def pod_templates(name: str) -> dict[str, Manifest]:
    """Every workload's pod spec, by the workload's name."""
    return {
        item["metadata"]["name"]: item["spec"]["template"]
        for item in rendered(name)
        if item["kind"] in WORKLOADS
    }


def containers(pod: Manifest) -> list[Manifest]:
    spec = pod["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def image_name(container: Manifest) -> str:
    """The image's repository name without registry and tag: overlays move images elsewhere."""
    return container["image"].rsplit("/", 1)[-1].split(":", 1)[0]


def platform_containers(name: str) -> dict[str, Manifest]:
    """The containers of the platform's own image (API, worker, beat, migrate), by workload."""
    found = {}
    for workload, pod in pod_templates(name).items():
        for container in containers(pod):
            if image_name(container) == "exchange-platform":
                found[workload] = container
    return found


def env_example_names() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def component(item: Manifest) -> str:
    labels = item["metadata"].get("labels", {})
    return str(labels.get("app.kubernetes.io/component", ""))


def selected(selector: Manifest, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels and matchExpressions' In) selects these labels."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def pods_selected(name: str, selector: Manifest) -> set[str]:
    return {
        workload
        for workload, pod in pod_templates(name).items()
        if selected(selector, pod["metadata"]["labels"])
    }


# --- rendering and the schemas ---------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_overlay_renders_the_platform(name: str) -> None:
    workloads = {(item["kind"], item["metadata"]["name"]) for item in rendered(name)}
    assert {
        ("Namespace", "exchange-platform"),
        ("ConfigMap", "platform-config"),
        ("Job", "platform-migrate"),
        ("Deployment", "platform-api"),
        ("Service", "platform-api"),
        ("HorizontalPodAutoscaler", "platform-api"),
        ("PodDisruptionBudget", "platform-api"),
        ("Deployment", "platform-worker"),
        ("Deployment", "platform-beat"),
        ("Deployment", "platform-nginx"),
        ("Service", "platform-nginx"),
        ("Ingress", "platform"),
        ("NetworkPolicy", "platform-default-deny"),
    } <= workloads
    # Everything lands in the platform's namespace.
    assert {
        item["metadata"].get("namespace") for item in rendered(name) if item["kind"] != "Namespace"
    } == {"exchange-platform"}


def test_dev_runs_the_data_services_and_production_takes_them_from_the_secret() -> None:
    dev = {(item["kind"], item["metadata"]["name"]) for item in rendered("dev")}
    assert {
        ("StatefulSet", "platform-postgresql"),
        ("StatefulSet", "platform-rabbitmq"),
        ("Deployment", "platform-redis"),
        ("Secret", "platform-secrets"),
    } <= dev
    production = rendered("production")
    assert not [item for item in production if item["kind"] in {"Secret", "StatefulSet"}]
    assert set(objects("production", "Deployment")) == {
        "platform-api",
        "platform-worker",
        "platform-beat",
        "platform-webhooks",
        "platform-nginx",
    }


@pytest.mark.parametrize("name", RENDERS)
def test_core_objects_validate_against_the_kubernetes_schemas(name: str) -> None:
    checked = 0
    for item in rendered(name):
        if item["apiVersion"].split("/")[0] in CUSTOM_GROUPS:
            continue
        try:
            kubernetes_validate.validate(item, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{item['kind']} {item['metadata']['name']}: {error.message}")
        checked += 1
    assert checked >= 15


def test_validation_refuses_a_misspelled_field() -> None:
    """The check has teeth: strict schemas refuse a field Kubernetes would silently drop."""
    api = dict(objects("production", "Deployment")["platform-api"])
    api["spec"] = {**api["spec"], "replica": 3}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(api, KUBERNETES_VERSION, strict=True)


def test_cloudnative_pg_cluster_has_its_shape() -> None:
    (cluster,) = [
        item for item in rendered("production+cloudnative-pg") if item["kind"] == "Cluster"
    ]
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    spec = cluster["spec"]
    assert spec["instances"] == 3
    assert re.fullmatch(r"\d+Gi", spec["storage"]["size"])
    assert spec["bootstrap"]["initdb"] == {"database": "platform", "owner": "platform"}
    assert spec["affinity"]["enablePodAntiAffinity"] is True
    # The platform's containers read DATABASE_URL from the Secret the operator writes for it.
    app_secret = f"{cluster['metadata']['name']}-app"
    for workload, container in platform_containers("production+cloudnative-pg").items():
        (database_url,) = [item for item in container["env"] if item["name"] == "DATABASE_URL"]
        assert database_url["valueFrom"]["secretKeyRef"] == {"name": app_secret, "key": "uri"}, (
            workload
        )
    # Its instances admit the platform's data clients.
    policy = objects("production+cloudnative-pg", "NetworkPolicy")["platform-db"]
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        "cnpg.io/cluster": cluster["metadata"]["name"]
    }


# --- the manifests held to the code ----------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_every_variable_set_on_the_platform_image_is_in_env_example(name: str) -> None:
    known = env_example_names()
    # The production overlay leaves the Secret out (it is the operator's): its names are the
    # base template's.
    sources = {**objects("base", "Secret"), **objects(name, "ConfigMap"), **objects(name, "Secret")}
    for workload, container in platform_containers(name).items():
        names = {item["name"] for item in container.get("env", [])}
        for source in container.get("envFrom", []):
            reference = source.get("configMapRef") or source["secretRef"]
            found = sources[reference["name"]]
            names |= set(found.get("data", {})) | set(found.get("stringData", {}))
        assert names - known == set(), workload
        assert {"DATABASE_URL", "SECRET_KEY", "JWT_SIGNING_KEY"} <= names, workload


@pytest.mark.parametrize("name", RENDERS)
def test_nginx_is_given_exactly_its_templates_variables(name: str) -> None:
    (nginx,) = pod_templates(name)["platform-nginx"]["spec"]["containers"]
    assert image_name(nginx) == "exchange-platform-frontend"
    assert {item["name"] for item in nginx["env"]} == set(TEMPLATE_VARIABLES)
    values = {item["name"]: item["value"] for item in nginx["env"]}
    assert values["BACKEND"] == "platform-api:8000"
    assert values["FORWARDED_PROTO"] == "$http_x_forwarded_proto"


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["dev", "production"])
def test_probes_ask_the_actuator_and_it_answers(name: str, client: Client) -> None:
    (api,) = pod_templates(name)["platform-api"]["spec"]["containers"]
    probes = {
        kind: api[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes["startupProbe"]["path"] == LIVENESS
    assert probes["livenessProbe"]["path"] == LIVENESS
    assert probes["readinessProbe"]["path"] == READINESS
    allowed = objects(name, "ConfigMap")["platform-config"]["data"]["ALLOWED_HOSTS"].split(",")
    (port,) = [port for port in api["ports"] if port["name"] == "http"]
    for probe in probes.values():
        assert probe["port"] == "http"
        headers = {item["name"]: item["value"] for item in probe["httpHeaders"]}
        assert headers["Host"] in allowed
        response = client.get(
            probe["path"],
            headers={"X-Forwarded-Proto": headers["X-Forwarded-Proto"]},
            HTTP_HOST=headers["Host"],
        )
        assert response.status_code == 200, (probe["path"], response.content)
        assert response.json()["status"] == "UP"
    env = {item["name"]: item["value"] for item in api["env"] if "value" in item}
    assert env["GUNICORN_BIND"] == f"0.0.0.0:{port['containerPort']}"


@pytest.mark.parametrize("name", RENDERS)
def test_commands_are_the_compose_files(name: str) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    found = platform_containers(name)
    assert set(found) == set(COMPOSE_SERVICE_OF)
    for workload, container in found.items():
        # args, not command: the image's entrypoint waits for the database first, as in compose.
        assert "command" not in container, workload
        assert container["args"] == compose[COMPOSE_SERVICE_OF[workload]]["command"], workload
    assert found["platform-api"]["args"] == ["deploy/serve"]


@pytest.mark.parametrize("name", RENDERS)
def test_every_pod_is_bounded_and_unprivileged(name: str) -> None:
    """The restricted Pod Security Standard the namespace enforces, resources on every container,
    and a read-only root file system for the platform's own (writable emptyDirs where it writes)."""
    namespace = objects(name, "Namespace")["exchange-platform"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for workload, pod in pod_templates(name).items():
        spec = pod["spec"]
        pod_security = spec.get("securityContext", {})
        assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}, workload
        assert spec["automountServiceAccountToken"] is False, workload
        own = component(pod) in OWN_COMPONENTS
        empty_dirs = {volume["name"] for volume in spec.get("volumes", []) if "emptyDir" in volume}
        for container in containers(pod):
            where = f"{workload}/{container['name']}"
            resources = container["resources"]
            assert set(resources["requests"]) == {"cpu", "memory"}, where
            assert set(resources["limits"]) == {"cpu", "memory"}, where
            security = container["securityContext"]
            assert security.get("runAsNonRoot", pod_security.get("runAsNonRoot")) is True, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where
            if own:
                assert security["readOnlyRootFilesystem"] is True, where
                mounted = {mount["name"] for mount in container.get("volumeMounts", [])}
                assert mounted <= empty_dirs, where


@pytest.mark.parametrize("name", RENDERS)
def test_nothing_routes_the_metrics_from_outside(name: str) -> None:
    """The only way in is nginx, which answers /actuator/metrics and /actuator/prometheus (and
    /api/actuator/metrics|prometheus) with 404 (tests/deploy/test_nginx.py), with its
    configuration from its image: nothing is mounted over /etc/nginx but the rendered conf.d."""
    for ingress in objects(name, "Ingress").values():
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"]["name"] == "platform-nginx"
    for service_name, service in objects(name, "Service").items():
        exposed = service["spec"].get("type", "ClusterIP") in {"LoadBalancer", "NodePort"}
        selects = pods_selected(name, {"matchLabels": service["spec"]["selector"]})
        if exposed or service_name == "platform-nginx":
            assert selects == {"platform-nginx"}, service_name
    nginx = pod_templates(name)["platform-nginx"]["spec"]
    (container,) = nginx["containers"]
    assert [mount["mountPath"] for mount in container["volumeMounts"]].count(
        "/etc/nginx/conf.d"
    ) == 1
    assert not [
        mount
        for mount in container["volumeMounts"]
        if mount["mountPath"].startswith("/etc/nginx") and mount["mountPath"] != "/etc/nginx/conf.d"
    ]
    assert not [volume for volume in nginx["volumes"] if "configMap" in volume]
    # The API admits nginx alone; its Service is inside the cluster.
    policy = objects(name, "NetworkPolicy")["platform-api"]["spec"]
    assert pods_selected(name, policy["podSelector"]) == {"platform-api"}
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert pods_selected(name, source["podSelector"]) == {"platform-nginx"}
    assert objects(name, "Service")["platform-api"]["spec"]["type"] == "ClusterIP"


@pytest.mark.parametrize("name", RENDERS)
def test_only_the_platform_reaches_the_data_services(name: str) -> None:
    policies = objects(name, "NetworkPolicy")
    default_deny = policies["platform-default-deny"]["spec"]
    assert default_deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    clients = pods_selected(name, {"matchLabels": {"exchange-platform/data-client": "true"}})
    assert {component(pod_templates(name)[workload]) for workload in clients} == DATA_CLIENTS
    # The data services in the cluster, and the policy that guards them (production alone
    # reaches services outside it).
    guard = {"dev": "platform-data-services", "production+cloudnative-pg": "platform-db"}
    data_policies = [policies[guard[name]]] if name in guard else []
    for policy in data_policies:
        for rule in policy["spec"]["ingress"]:
            for source in rule["from"]:
                if "namespaceSelector" in source:  # CloudNativePG's operator, on its status port
                    assert [port["port"] for port in rule["ports"]] == [8000]
                    continue
                reached_by = pods_selected(name, source["podSelector"])
                assert {component(pod_templates(name)[item]) for item in reached_by} <= (
                    DATA_CLIENTS
                ), reached_by
    if name == "dev":
        guarded = pods_selected(name, policies["platform-data-services"]["spec"]["podSelector"])
        assert guarded == {"platform-postgresql", "platform-rabbitmq", "platform-redis"}
    # nginx, the public edge, may talk to the API and DNS only.
    egress = policies["platform-nginx"]["spec"]["egress"]
    destinations = [rule["to"][0] for rule in egress]
    assert pods_selected(name, destinations[0]["podSelector"]) == {"platform-api"}
    assert {port["port"] for port in egress[1]["ports"]} == {53}


@pytest.mark.parametrize("name", RENDERS)
def test_rollouts_drain_long_polls_and_streams(name: str) -> None:
    config = objects(name, "ConfigMap")["platform-config"]["data"]
    graceful = int(config["GUNICORN_GRACEFUL_TIMEOUT"])
    longest_wait = MAX_WAIT_SECONDS
    assert graceful > longest_wait
    api = objects(name, "Deployment")["platform-api"]
    pod = api["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + graceful
    assert api["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert api["spec"]["replicas"] >= 2
    autoscaler = objects(name, "HorizontalPodAutoscaler")["platform-api"]["spec"]
    assert autoscaler["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "platform-api",
    }
    assert autoscaler["minReplicas"] >= 2
    budget = objects(name, "PodDisruptionBudget")["platform-api"]["spec"]
    assert pods_selected(name, budget["selector"]) == {"platform-api"}
    # nginx: its requests finish, then worker_shutdown_timeout closes what is left, in the grace.
    nginx = objects(name, "Deployment")["platform-nginx"]["spec"]["template"]["spec"]
    (proxy,) = nginx["containers"]
    shutdown = re.search(
        r"^worker_shutdown_timeout (\d+)s;", (ROOT / "deploy/nginx/nginx.conf").read_text(), re.M
    )
    assert shutdown
    proxy_pre_stop = int(proxy["lifecycle"]["preStop"]["exec"]["command"][1])
    assert nginx["terminationGracePeriodSeconds"] > proxy_pre_stop + int(shutdown.group(1))
    assert int(shutdown.group(1)) > longest_wait


@pytest.mark.parametrize("name", RENDERS)
def test_beat_runs_exactly_once(name: str) -> None:
    beat = objects(name, "Deployment")["platform-beat"]["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"] == {"type": "Recreate"}
    assert "platform-beat" not in {
        autoscaler["spec"]["scaleTargetRef"]["name"]
        for autoscaler in objects(name, "HorizontalPodAutoscaler").values()
    }


def test_the_secret_template_holds_placeholders_only() -> None:
    (template,) = objects("base", "Secret").values()
    values = template["stringData"]
    assert values
    assert all(re.fullmatch(r"<[^<>]+>", value) for value in values.values()), values
    # The dev overlay fills every one (throwaway values); production leaves the Secret out.
    dev = objects("dev", "Secret")["platform-secrets"]["stringData"]
    assert set(dev) == set(values)
    assert not [value for value in dev.values() if value.startswith("<")]
