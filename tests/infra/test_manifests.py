"""The Kubernetes manifests, checked offline: every document of the base and of the rendered overlay
against the Kubernetes schemas (strictly) and KEDA's, every `codeloop` command line in them against
the CLI, and the deployment's promises (least privilege, gVisor for untrusted code, secrets only
where used, scaling on the right consumers) read off the rendered objects."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.messages import LLM_ROLES
from bus.server import find_nats_server
from bus.subjects import RoleAddress
from codeloop.wiring.roles import SERVED_BY_DEFAULT
from infra.checks import manifests
from infra.checks.kustomize import Resource, build
from tests.infra.conftest import ROOT

K8S = ROOT / manifests.K8S_ROOT
UNTRUSTED = {"coder", "verifier"}
TASKS = "codeloop-tasks"
WORKSPACES = "codeloop-workspaces"
SEARCHING = {"planner", "retriever", "workspaces"}
"""The pods that run the search server: the planner's first look, retrieval, and the workspace
service, which serves the coder's search tool over its workspace (the coder embeds nothing)."""


@pytest.fixture(scope="module")
def production() -> list[Resource]:
    return build(K8S / "overlays" / "production")


def _by(resources: list[Resource], kind: str) -> dict[str, dict[str, Any]]:
    return {r.name: r.doc for r in resources if r.kind == kind}


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels and In/NotIn/Exists expressions) picks these labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        value = labels.get(key)
        ok = {
            "In": value in expression.get("values", []),
            "NotIn": value not in expression.get("values", []),
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


def _same_namespace_peer(peer: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a policy peer names pods of the policy's own namespace with these labels (an
    `ipBlock` peer names addresses outside the cluster, a `namespaceSelector` other namespaces)."""
    return "podSelector" in peer and "namespaceSelector" not in peer and _selects(peer["podSelector"], labels)


def _pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    return doc["spec"]["template"]["metadata"]["labels"]


def test_every_manifest_validates_and_every_codeloop_line_parses() -> None:
    """The acceptance check itself: base and overlay render, validate and parse in the CLI, and no
    YAML file under infra/k8s is left out of a kustomization."""
    assert sorted(p.parent.name for p in K8S.rglob("kustomization.yaml")) == [
        "base",
        "production",
        "swebench",
    ]
    assert manifests.check_tree(K8S) == []
    rendered = build(K8S / "base")
    assert {r.kind for r in rendered} >= {
        "Deployment",
        "StatefulSet",
        "ScaledObject",
        "NetworkPolicy",
        "RuntimeClass",
    }
    lines = [
        line
        for r in rendered
        for c in manifests.containers(r.doc)
        for line in manifests.codeloop_command_lines(c)
    ]
    # One `codeloop serve` per role and the tasks server, none skipped by the walk.
    what = [line[2] if line[:2] == ["serve", "--role"] else " ".join(line[:2]) for line in lines]
    assert sorted(what) == sorted([*SERVED_BY_DEFAULT, "mcp tasks", "serve --workspaces"])


def test_a_typo_in_a_manifest_fails_the_check_naming_file_container_and_flag(tmp_path: Path) -> None:
    """A misspelt flag, an unknown subcommand in an `sh -c` line, a misspelt field and a KEDA
    trigger without its consumer each fail; the same manifest without them passes."""
    good = build(K8S / "base")
    deployment = next(r.doc for r in good if r.kind == "Deployment" and r.name == "codeloop-coder")
    scaled = next(r.doc for r in good if r.kind == "ScaledObject" and r.name == "codeloop-coder")
    path = tmp_path / "coder.yaml"
    path.write_text(yaml.safe_dump_all([deployment, scaled]))
    assert manifests.check(path) == []

    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    args[args.index("--health-port")] = "--health-prot"
    path.write_text(yaml.safe_dump_all([deployment]))
    problems = manifests.check(path)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: Deployment/codeloop-coder container coder: codeloop serve: ")
    assert "--health-prot" in problems[0]

    hook = {"name": "warm", "image": "codeloop", "command": ["sh", "-c", "set -e; exec codeloop idnex /tmp"]}
    deployment["spec"]["template"]["spec"]["initContainers"] = [hook]
    container["livenesProbe"] = container.pop("livenessProbe")
    del scaled["spec"]["triggers"][0]["metadata"]["consumer"]
    path.write_text(yaml.safe_dump_all([deployment, scaled]))
    text = "\n".join(manifests.check(path))
    assert "container warm: codeloop: no such command 'idnex'" in text
    assert "livenesProbe" in text and "(Kubernetes 1.30)" in text and "(Kubernetes 1.37)" in text
    assert "ScaledObject/codeloop-coder: 'consumer' is a required property" in text


def test_the_overlay_renders_image_patches_namespace_and_labels(production: list[Resource]) -> None:
    """What the production overlay changes arrives in the rendered objects, and only there."""
    deployments = _by(production, "Deployment")
    for doc in deployments.values():
        for container in manifests.containers(doc):
            assert container["image"] == "registry.example.com/codeloop/codeloop:0.1.0"
    workspaces = deployments[WORKSPACES]["spec"]["template"]["spec"]
    assert workspaces["containers"][0]["resources"]["limits"] == {"cpu": "8", "memory": "16Gi"}
    assert workspaces["containers"][0]["args"][:2] == [
        "serve",
        "--workspaces",
    ]  # merged by name, not replaced
    assert {v["name"]: v["emptyDir"]["sizeLimit"] for v in workspaces["volumes"]}["home"] == "64Gi"
    nats = _by(production, "StatefulSet")["codeloop-nats"]
    assert nats["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "100Gi"
    scaled = _by(production, "ScaledObject")
    assert scaled["codeloop-coder"]["spec"]["maxReplicaCount"] == 32
    assert scaled["codeloop-orchestrator"]["spec"]["minReplicaCount"] == 2
    for resource in production:
        namespace = resource.doc["metadata"].get("namespace")
        assert namespace == (None if resource.kind in ("Namespace", "RuntimeClass") else "codeloop"), (
            resource.where()
        )
        assert resource.doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kustomize"
    base_coder = _by(build(K8S / "base"), "Deployment")["codeloop-coder"]
    assert base_coder["spec"]["template"]["spec"]["containers"][0]["image"] == "codeloop"


def test_each_role_runs_least_privileged_and_scales_on_its_own_consumer(production: list[Resource]) -> None:
    """One Deployment per role serve runs by default, each: no API token, restricted security
    context, limits, probes on the health endpoint it serves, streams at 3 replicas; gVisor and the
    process sandbox for the roles that run code; the model key only where a model is called."""
    deployments = _by(production, "Deployment")
    scaled = _by(production, "ScaledObject")
    assert set(deployments) == {f"codeloop-{role}" for role in SERVED_BY_DEFAULT} | {TASKS, WORKSPACES}
    assert _by(production, "RuntimeClass")["gvisor"]["handler"] == "runsc"
    nats_service = _by(production, "Service")["codeloop-nats"]
    for role in SERVED_BY_DEFAULT:
        pod = deployments[f"codeloop-{role}"]["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        for each in manifests.containers(deployments[f"codeloop-{role}"]):
            context = each["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {
                "drop": ["ALL"]
            }
            assert context["readOnlyRootFilesystem"] is True
            assert set(each["resources"]["limits"]) == {"cpu", "memory"}
        args = container["args"]
        assert args[:3] == ["serve", "--role", role] and "--no-mcp" in args
        assert _flag(args, "--replicas") == "3"
        assert (
            _flag(args, "--nats")
            == f"nats://{nats_service['metadata']['name']}:{nats_service['spec']['ports'][0]['port']}"
        )
        assert _flag(args, "--health-host") == "0.0.0.0"
        port = {p["name"]: p["containerPort"] for p in container["ports"]}["health"]
        assert int(_flag(args, "--health-port")) == port
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        env = {e["name"]: e for e in container["env"]}
        assert "value" not in env["CODELOOP_NATS_PASSWORD"]  # from the Secret, never in the manifest
        if role in UNTRUSTED:
            assert pod["runtimeClassName"] == "gvisor"
            assert env["CODELOOP_SANDBOX"]["value"] == "process"
        else:
            assert "runtimeClassName" not in pod and "CODELOOP_SANDBOX" not in env
        model_keys = [
            s for s in container.get("envFrom", []) if s["secretRef"]["name"] == "codeloop-model-keys"
        ]
        assert bool(model_keys) == (role in LLM_ROLES), role
        labels = deployments[f"codeloop-{role}"]["spec"]["template"]["metadata"]["labels"]
        assert (labels.get("codeloop.dev/model-egress") == "true") == (role in LLM_ROLES)

        address = RoleAddress.orchestrator() if role == "orchestrator" else RoleAddress.worker(role)
        spec = scaled[f"codeloop-{role}"]["spec"]
        assert spec["scaleTargetRef"]["name"] == f"codeloop-{role}"
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "nats-jetstream"
        assert (trigger["metadata"]["stream"], trigger["metadata"]["consumer"]) == (
            address.stream,
            address.durable,
        )
        assert trigger["metadata"]["natsServerMonitoringEndpoint"].startswith(
            "codeloop-nats-headless.codeloop.svc"
        )
        assert spec["minReplicaCount"] >= 1  # the first worker creates the durable the scaler reads


def _secrets(doc: dict[str, Any]) -> set[str]:
    """The names of the Secrets a workload's pod reads: env, envFrom and volumes."""
    pod = doc["spec"]["template"]["spec"]
    names = {v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
    for container in manifests.containers(doc):
        names |= {s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s}
        names |= {
            e["valueFrom"]["secretKeyRef"]["name"]
            for e in container.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})
        }
    return names


def test_the_tasks_server_serves_clients_from_read_only_repos_with_no_model_key(
    production: list[Resource],
) -> None:
    """The tasks Deployment runs `mcp tasks` on the cluster's NATS over HTTP with its token file,
    least privileged like the roles; it reads only the NATS and token Secrets (no model key, and
    no other pod reads its tokens), leaves credentials to the workers, mounts the repositories
    read-only at its root, is probed on its health port, and is reachable on 8080 through its
    Service and its NetworkPolicy, with no egress beyond NATS and DNS."""
    deployments = _by(production, "Deployment")
    doc = deployments[TASKS]
    pod = doc["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:2] == ["mcp", "tasks"] and "--worker-credentials" in args
    assert (_flag(args, "--transport"), _flag(args, "--host"), _flag(args, "--nats")) == (
        "http",
        "0.0.0.0",
        "nats://codeloop-nats:4222",
    )
    assert _flag(args, "--scopes") == "read,write,execute"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(_flag(args, "--port")) == ports["http"] == 8080
    assert int(_flag(args, "--health-port")) == ports["health"] == 8081
    assert _flag(args, "--health-host") == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}

    assert pod["automountServiceAccountToken"] is False and "runtimeClassName" not in pod
    assert pod["securityContext"]["runAsNonRoot"] is True
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert "codeloop.dev/model-egress" not in doc["spec"]["template"]["metadata"]["labels"]

    assert _secrets(doc) == {"codeloop-nats", "codeloop-tasks-tokens"}
    for name, other in deployments.items():
        if name != TASKS:
            assert "codeloop-tasks-tokens" not in _secrets(other), name
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    tokens = Path(_flag(args, "--token-file"))
    token_mount = mounts[str(tokens.parent)]
    assert token_mount["readOnly"] is True
    assert volumes[token_mount["name"]]["secret"]["items"] == [{"key": "tokens", "path": tokens.name}]
    repos = mounts[_flag(args, "--root")]
    assert repos["readOnly"] is True
    claim = volumes[repos["name"]]["persistentVolumeClaim"]
    assert claim["readOnly"] is True
    assert claim["claimName"] in _by(production, "PersistentVolumeClaim")

    labels = doc["spec"]["template"]["metadata"]["labels"]
    service = _by(production, "Service")[TASKS]["spec"]
    assert service["selector"].items() <= labels.items()
    assert service["ports"] == [{"name": "http", "port": 8080, "targetPort": "http"}]
    policies = _by(production, "NetworkPolicy")
    (ingress,) = policies["codeloop-tasks-clients"]["spec"]["ingress"]
    assert policies["codeloop-tasks-clients"]["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8080}]
    # Its egress: only the codeloop-wide policy (NATS, DNS) selects it, not the model-egress one.
    assert _egress_policies(policies, labels) == ["codeloop-to-nats"]


def _egress_policies(policies: dict[str, dict[str, Any]], labels: dict[str, str]) -> list[str]:
    """The egress policies that select a pod beside the namespace's default deny."""
    return [
        name
        for name, policy in policies.items()
        if "Egress" in policy["spec"]["policyTypes"]
        and policy["spec"]["podSelector"] != {}
        and _selects(policy["spec"]["podSelector"], labels)
    ]


def test_the_workspace_service_runs_the_tasks_code_under_gvisor_with_no_model_key_and_nats_only(
    production: list[Resource],
) -> None:
    """The one pod that runs the task's code: `serve --workspaces` on the cluster's NATS, listening
    on 8700 behind its Service at the URL it hands out, under gVisor with the process sandbox, no
    model key anywhere in its pod spec, least privileged, one replica replaced with Recreate (a
    workspace lives in one instance); egress to NATS and DNS only, ingress on 8700 only from the
    coder and verifier, whose command lines work through it and whose egress reaches it."""
    deployments = _by(production, "Deployment")
    doc = deployments[WORKSPACES]
    pod = doc["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:2] == ["serve", "--workspaces"] and "--role" not in args
    assert (_flag(args, "--nats"), _flag(args, "--replicas"), _flag(args, "--workspace-host")) == (
        "nats://codeloop-nats:4222",
        "3",
        "0.0.0.0",
    )
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(_flag(args, "--workspace-port")) == ports["workspaces"] == 8700
    assert int(_flag(args, "--health-port")) == ports["health"] == 8081
    assert _flag(args, "--health-host") == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    service = _by(production, "Service")[WORKSPACES]
    assert _flag(args, "--workspace-url") == f"http://{service['metadata']['name']}:8700"
    assert service["spec"]["ports"] == [{"name": "workspaces", "port": 8700, "targetPort": "workspaces"}]
    labels = _pod_labels(doc)
    assert service["spec"]["selector"].items() <= labels.items()
    # Exactly one Service's worth of pods: no other Deployment answers on that selector.
    assert [
        n
        for n, d in deployments.items()
        if _selects({"matchLabels": service["spec"]["selector"]}, _pod_labels(d))
    ] == [WORKSPACES]
    assert doc["spec"]["replicas"] == 1 and doc["spec"]["strategy"] == {"type": "Recreate"}
    assert WORKSPACES not in _by(production, "ScaledObject")

    assert pod["runtimeClassName"] == "gvisor"
    assert {e["name"]: e.get("value") for e in container["env"]}["CODELOOP_SANDBOX"] == "process"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for each in manifests.containers(doc):
        context = each["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert set(each["resources"]["limits"]) == {"cpu", "memory"}
    # No model key in any form: only the NATS Secret, no provider-looking variable, no model egress.
    assert _secrets(doc) == {"codeloop-nats"}
    spec_text = yaml.safe_dump(pod)
    assert "codeloop-model-keys" not in spec_text
    for each in manifests.containers(doc):
        for name in [e["name"] for e in each.get("env", [])]:
            assert not name.endswith(("_API_KEY", "_API_TOKEN", "_SECRET_ACCESS_KEY", "_SESSION_TOKEN")), name
    assert "codeloop.dev/model-egress" not in labels

    policies = _by(production, "NetworkPolicy")
    assert _egress_policies(policies, labels) == ["codeloop-to-nats"]
    ingress = [
        rule
        for policy in policies.values()
        if "Ingress" in policy["spec"]["policyTypes"] and _selects(policy["spec"]["podSelector"], labels)
        for rule in policy["spec"].get("ingress", [])
    ]
    on_8700 = [rule for rule in ingress if {"protocol": "TCP", "port": 8700} in rule.get("ports", [])]
    (clients,) = on_8700
    # The namespace-wide rule admits only Prometheus's namespace to the metrics port.
    assert all(r is clients or r["ports"] == [{"protocol": "TCP", "port": 9090}] for r in ingress)
    assert clients["ports"] == [{"protocol": "TCP", "port": 8700}]
    admitted = {
        name
        for name, other in deployments.items()
        if any(_same_namespace_peer(peer, _pod_labels(other)) for peer in clients["from"])
    }
    assert admitted == {"codeloop-coder", "codeloop-verifier"}
    assert all("namespaceSelector" not in peer and "ipBlock" not in peer for peer in clients["from"])

    for role in ("coder", "verifier"):
        other = deployments[f"codeloop-{role}"]
        (worker,) = other["spec"]["template"]["spec"]["containers"]
        assert "--workspace-service" in worker["args"], role
        reach = [
            rule
            for name in _egress_policies(policies, _pod_labels(other))
            for rule in policies[name]["spec"]["egress"]
            if any(_same_namespace_peer(peer, labels) for peer in rule["to"])
        ]
        assert [r["ports"] for r in reach] == [[{"protocol": "TCP", "port": 8700}]], role
    for name, other in deployments.items():
        if name not in {"codeloop-coder", "codeloop-verifier"}:
            (each,) = other["spec"]["template"]["spec"]["containers"]
            assert "--workspace-service" not in each["args"], name


def test_nats_is_a_three_node_jetstream_cluster_nats_server_accepts(
    production: list[Resource], tmp_path: Path
) -> None:
    """The StatefulSet, its headless Service and the routes agree, JetStream stores on the PVC, and
    the real nats-server parses the ConfigMap's config; NATS and codeloop reach only each other."""
    nats = _by(production, "StatefulSet")["codeloop-nats"]
    assert nats["spec"]["replicas"] == 3 and nats["spec"]["serviceName"] == "codeloop-nats-headless"
    assert _by(production, "Service")["codeloop-nats-headless"]["spec"]["clusterIP"] == "None"
    (claim,) = nats["spec"]["volumeClaimTemplates"]
    mounts = {
        m["name"]: m["mountPath"] for m in nats["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    }
    assert mounts[claim["metadata"]["name"]] == "/data"
    config = _by(production, "ConfigMap")["codeloop-nats-config"]["data"]["nats.conf"]
    for n in range(3):
        assert f"nats://codeloop-nats-{n}.codeloop-nats-headless:6222" in config
    assert "store_dir: /data" in config
    (tmp_path / "nats.conf").write_text(config)
    env = {
        "PATH": os.environ["PATH"],
        "SERVER_NAME": "codeloop-nats-0",
        "CODELOOP_NATS_USER": "u",
        "CODELOOP_NATS_PASSWORD": "p",
    }
    checked = subprocess.run(
        [str(find_nats_server()), "-c", str(tmp_path / "nats.conf"), "-t"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert "is valid" in checked.stdout + checked.stderr

    policies = _by(production, "NetworkPolicy")
    assert policies["default-deny"]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    to_nats = policies["codeloop-to-nats"]["spec"]["egress"]
    assert to_nats[0]["ports"] == [{"protocol": "TCP", "port": 4222}]
    assert {p["port"] for p in to_nats[1]["ports"]} == {53}


def test_the_pods_fit_the_image_they_run(production: list[Resource]) -> None:
    """The pods run as the image's user, and their writable volumes cover what codeloop writes
    under a read-only root: CODELOOP_HOME (under HOME) always, the embedding cache where a role
    searches, seeded from the image's converted model."""
    from infra.checks.containerfile import CONTAINERFILE, parse

    instructions = parse((ROOT / CONTAINERFILE).read_text())
    uid = [i for i in instructions if i.keyword == "USER"][-1].value.split(":")[0]
    env = dict(word.split("=", 1) for i in instructions if i.keyword == "ENV" for word in i.words())
    assert Path(env["CODELOOP_HOME"]).is_relative_to(env["HOME"])
    for name, doc in _by(production, "Deployment").items():
        pod = doc["spec"]["template"]["spec"]
        assert str(pod["securityContext"]["runAsUser"]) == uid, name
        (container,) = pod["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert env["HOME"] in mounts and "/tmp" in mounts, name
        volumes = {v["name"]: v for v in pod["volumes"]}
        writable = [m["name"] for m in container["volumeMounts"] if not m.get("readOnly")]
        assert all("emptyDir" in volumes[n] for n in writable), name
        role = name.removeprefix("codeloop-")
        if role in SEARCHING:
            cache = mounts[env["CODELOOP_CACHE_DIR"]]
            (seed,) = pod["initContainers"]
            assert seed["command"] == ["cp", "-a", f"{env['CODELOOP_CACHE_DIR']}/.", "/seed/"]
            assert {m["name"]: m["mountPath"] for m in seed["volumeMounts"]} == {cache: "/seed"}
        else:
            assert env["CODELOOP_CACHE_DIR"] not in mounts and "initContainers" not in pod, name


def test_the_renderer_refuses_what_it_would_not_apply(tmp_path: Path) -> None:
    """A kustomization field outside the supported subset, or a patch that matches nothing, is a
    problem naming the file, never a silently different rendering."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(K8S / "base", overlay)
    (overlay / "kustomization.yaml").write_text(f"resources: [{base}]\nnamePrefix: staging-\n")
    assert manifests.check(overlay) == [
        f"{overlay / 'kustomization.yaml'}: fields this renderer does not apply: namePrefix"
    ]
    (overlay / "kustomization.yaml").write_text(
        f"resources: [{base}]\npatches:\n- target: {{kind: Deployment, name: codeloop-reviewer}}\n"
        "  patch: '[{op: replace, path: /spec/paused, value: true}]'\n"
    )
    (problem,) = manifests.check(overlay)
    assert "matches no resource" in problem and "codeloop-reviewer" in problem
