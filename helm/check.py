#!/usr/bin/env python3
"""Renders helm/toolgate with Helm v4 (embedded by the helm-python-sdk package, no binary),
lints it, and validates every rendered manifest against the Kubernetes 1.33 schema
(kubernetes-validate, offline). Run from the repository root:

    python3 helm/check.py

Exits non-zero on any lint error, render error or invalid manifest.
"""
import glob
import os
import subprocess
import sys
import tempfile

import helm_python as helm
import kubernetes_validate
import yaml

CHART = "helm/toolgate"
K8S = "1.33"
# Kinds whose schemas ship with their operators, not with Kubernetes.
CRD_KINDS = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")}

VALUE_SETS = {
    "default": {},
    "cert-manager": {"certManager": {"enabled": True}},
    "cert-manager-issuer": {"certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
    "standalone": {"standalone": {"enabled": True}, "otlp": {"endpoint": "http://otel-collector.observability:4317"}},
    "standalone-shared": {"standalone": {"enabled": True, "replicas": 3, "reviewPort": 8090, "env": [
        {"name": "TOOLGATE_REDIS_URL", "valueFrom": {"secretKeyRef": {"name": "toolgate-redis", "key": "url"}}},
        {"name": "TOOLGATE_DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "toolgate-db", "key": "url"}}},
    ]}},
    "no-native-sidecars": {"sidecar": {"nativeSidecar": False, "mode": "shadow", "policyConfigMap": "team-policy"}, "webhook": {"failurePolicy": "Ignore"}},
    "custom-pack": {"policy": {"pack": "policy_pack: team\nversion: \"1\"\nsync_rules:\n  - { id: secrets }\n", "validate": False}},
}


def check_config_map(doc) -> list:
    """Runs the packs and the injector config a ConfigMap carries through toolgate itself, so
    the chart cannot ship settings the binary refuses."""
    binary = os.environ.get("TOOLGATE_BIN", "target/debug/toolgate")
    if not os.path.exists(binary):
        return [f"{binary} not found: build it first (cargo build) or set TOOLGATE_BIN"]
    problems = []
    with tempfile.TemporaryDirectory() as d:
        for key, text in (doc.get("data") or {}).items():
            f = os.path.join(d, key)
            with open(f, "w") as out:
                out.write(text)
            if key == "policy.yaml":
                cmd = [binary, "validate", f]
            elif key == "injector.yaml":
                cmd = [binary, "webhook", "--check-config", "--config", f]
            else:
                continue
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                problems.append(f"{key}: {' '.join(cmd[1:2])} failed: {run.stderr.strip() or run.stdout.strip()}")
    return problems


def main() -> int:
    helm.disable_logging()
    failures = []
    chart = helm.Chart.load(CHART)
    for name, values in VALUE_SETS.items():
        lint = helm.lint(CHART, values=values, namespace="toolgate-system", kube_version=K8S)
        # Severity 1 is informational (a missing icon); errors are listed apart.
        if lint.get("errors"):
            failures.append(f"{name}: lint: {lint['errors']}")
        failures.extend(
            f"{name}: lint: {m['path']}: {m['error']}" for m in lint.get("messages", []) if m.get("severity", 0) > 1
        )
        rendered = chart.render(values, name="toolgate", namespace="toolgate-system", is_install=True)
        kinds = []
        for path, text in sorted(rendered.items()):
            if path.endswith("NOTES.txt"):
                continue
            for doc in yaml.safe_load_all(text):
                if not doc:
                    continue
                kind = (doc.get("apiVersion"), doc.get("kind"))
                if kind == ("v1", "ConfigMap"):
                    failures.extend(f"{name}: {path}: {p}" for p in check_config_map(doc))
                kinds.append(kind[1])
                if kind in CRD_KINDS:
                    continue
                try:
                    kubernetes_validate.validate(doc, K8S, strict=True)
                except Exception as e:  # one report per bad manifest
                    failures.append(f"{name}: {path}: {kind[1]} {doc.get('metadata', {}).get('name')}: {e}")
        print(f"{name}: {len(kinds)} manifests ({', '.join(sorted(set(kinds)))})")
    # The plain manifests in deploy/k8s: the same schema and the same toolgate checks.
    for path in sorted(glob.glob("deploy/k8s/*.yaml")):
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            try:
                kubernetes_validate.validate(doc, K8S, strict=True)
            except Exception as e:
                failures.append(f"{path}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}: {e}")
            if (doc.get("apiVersion"), doc.get("kind")) == ("v1", "ConfigMap"):
                failures.extend(f"{path}: {p}" for p in check_config_map(doc))
        print(f"{path}: {len(docs)} manifests")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
