#!/usr/bin/env bash
# Check the deployment files without a cluster (part of scripts/test.sh; seconds):
# - every Kubernetes manifest in deploy/kubernetes validates, strictly (unknown fields
#   refused), against the API schemas of the oldest and the newest Kubernetes that
#   kubernetes-validate ships (1.25 and 1.37; upstream supports the last three minors);
# - kustomization.yaml lists every manifest;
# - the replicas and the balancer start with the same command in Kubernetes as in
#   deploy/compose/compose.yaml, and both use the one haproxy.cfg, which HAProxy accepts.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${XDG_CACHE_HOME:-$HOME/.cache}/rsandbox/deploy-venv"
[ -x "$venv/bin/kubernetes-validate" ] || scripts/install-deps.sh
oldest=1.25.0 newest=1.37.0
manifests=$(ls deploy/kubernetes/*.yaml | grep -v kustomization.yaml)
for version in "$oldest" "$newest"; do
  # shellcheck disable=SC2086
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" $manifests
  echo "deploy-check: $(echo "$manifests" | wc -l) manifests valid for Kubernetes $version"
done
RSANDBOX_REPLICAS=rsandbox haproxy -c -q -f deploy/kubernetes/haproxy.cfg
echo "deploy-check: haproxy.cfg accepted by $(haproxy -v | head -1 | cut -d' ' -f1-3)"
"$venv/bin/python" - <<'PY'
import glob, os, sys, yaml

def documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]

kube = {}
for path in glob.glob("deploy/kubernetes/*.yaml"):
    for doc in documents(path):
        kube[(doc.get("kind"), doc.get("metadata", {}).get("name"))] = doc
kustomization = kube.pop(("Kustomization", None))
listed = set(kustomization["resources"])
present = {os.path.basename(p) for p in glob.glob("deploy/kubernetes/*.yaml")} - {"kustomization.yaml"}
assert listed == present, f"kustomization.yaml lists {sorted(listed)}, the directory has {sorted(present)}"
assert kustomization["configMapGenerator"][0]["files"] == ["haproxy.cfg"]

compose = documents("deploy/compose/compose.yaml")[0]["services"]
def container(deployment, name):
    spec = kube[("Deployment", deployment)]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == name)
pairs = [(container("rsandbox", "rsandbox"), compose["rsandbox"]),
         (container("rsandbox-balancer", "haproxy"), compose["balancer"])]
for pod, service in pairs:
    assert pod["command"] == service["entrypoint"], f"{pod['command']} != {service['entrypoint']}"
    assert pod.get("args") is None and service.get("command") is None
assert "../kubernetes/haproxy.cfg:/etc/haproxy/haproxy.cfg:ro" in compose["balancer"]["volumes"]
# The security settings the README promises, in both.
for name in ("rsandbox", "rsandbox-balancer"):
    spec = kube[("Deployment", name)]["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for c in spec["containers"] + spec.get("initContainers", []):
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
for service in compose.values():
    assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"]
assert compose["rsandbox"]["networks"] == ["replicas"]
print("deploy-check: compose and Kubernetes start the same commands, with the same security settings")
PY
