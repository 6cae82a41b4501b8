#!/usr/bin/env bash
# Checks the manifests against the Kubernetes API's schemas, offline:
#   contrib/kubernetes/validate.sh [MANIFEST.yaml...]   (default: every *.yaml here)
#
# Built-in kinds (Namespace, Secret, DaemonSet, Service, Job) are checked
# with kubernetes-validate (PyPI), which ships the OpenAPI schemas of every
# Kubernetes release it supports, in strict mode: an unknown field, e.g. a
# misspelt `hostNetwrk`, fails. The ServiceMonitor is a custom resource of
# the Prometheus Operator: it is checked against the schema of that CRD as
# @kubernetes-models/prometheus-operator (npm) compiles it (a CRD schema
# allows unknown fields, so only types, required fields and enums are
# checked there). A kind that neither knows fails: nothing is skipped.
#
# Needs (what .ci/run installs):
#   python3 -m pip install kubernetes-validate==1.37.0
#   npm install -g @kubernetes-models/prometheus-operator@6.0.0
# Exit codes: 0 all valid, 1 a manifest is invalid, 3 a validator is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
missing() {
  echo "validate.sh: $1 is not installed; install it with: $2" >&2
  exit 3
}

python=python3
command -v "$python" >/dev/null 2>&1 || missing python3 "apt-get install python3"
"$python" -c 'import kubernetes_validate' 2>/dev/null \
  || missing "kubernetes-validate (PyPI)" "$python -m pip install kubernetes-validate==1.37.0"
command -v node >/dev/null 2>&1 || missing node "apt-get install nodejs npm"
command -v npm >/dev/null 2>&1 || missing npm "apt-get install npm"
crd_models="$(npm root -g)/@kubernetes-models/prometheus-operator"
[ -f "$crd_models/monitoring.coreos.com/v1/ServiceMonitor.js" ] \
  || missing "@kubernetes-models/prometheus-operator (npm)" "npm install -g @kubernetes-models/prometheus-operator@6.0.0"

if [ $# -eq 0 ]; then
  set -- "$here"/*.yaml
fi

exec "$python" - "$crd_models" "$@" <<'PYTHON'
import json
import os
import subprocess
import sys

import kubernetes_validate
import yaml

crd_models, files = sys.argv[1], sys.argv[2:]
kubernetes_version = kubernetes_validate.latest_version()

# Custom resources: (apiVersion, kind) -> the module of crd_models whose
# exported class of that kind validates against the CRD's schema.
CUSTOM = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com/v1/ServiceMonitor.js",
}
# Reads one document as JSON on stdin; prints why it is invalid and exits 1.
VALIDATE_CUSTOM = """
const [, module, kind] = process.argv;
const model = (await import(module))[kind];
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
try {
  new model(JSON.parse(Buffer.concat(chunks))).validate();
} catch (e) {
  console.log(e.message);
  process.exit(1);
}
"""


def check(doc):
    """None when `doc` is valid, else why not; and what it was checked against."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CUSTOM:
        against = "the %s CRD schema" % key[0]
        run = subprocess.run(
            ["node", "--input-type=module", "-e", VALIDATE_CUSTOM,
             os.path.join(crd_models, CUSTOM[key]), key[1]],
            input=json.dumps(doc), capture_output=True, text=True)
        if run.returncode != 0:
            return (run.stdout + run.stderr).strip() or "node failed", against
        return None, against
    against = "Kubernetes %s, strict" % kubernetes_version
    try:
        kubernetes_validate.validate(doc, kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as e:
        return e.message + " (and validate.sh knows no CRD schema for it)", against
    except kubernetes_validate.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        return "%s: %s" % (where, e.message), against
    return None, against


invalid = checked = 0
for path in files:
    name = os.path.basename(path)
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as e:
        print("INVALID %s: %s" % (name, e))
        invalid += 1
        continue
    for doc in docs:
        what = "%s %s/%s" % (name, doc.get("kind"), (doc.get("metadata") or {}).get("name"))
        why, against = check(doc)
        checked += 1
        if why is None:
            print("valid   %s (%s)" % (what, against))
        else:
            print("INVALID %s (%s): %s" % (what, against, why))
            invalid += 1

print("%d of %d documents in %d files invalid" % (invalid, checked, len(files)))
sys.exit(1 if invalid else 0)
PYTHON
