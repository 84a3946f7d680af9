"""crd_schema.py: the API server's structural-schema checks and defaults, for a CRD's YAML.

Design: a kube-apiserver would take an examples/ manifest (or the JobSet that Trainer
builds) through three steps, and this module does the same three, read from the CRD files
kept in tests/examples/crds/ (README.md there names their upstream commits):
1. defaulting from the schema's `default`s (`apply_defaults`), as the apiserver's
   structural defaulting does on every create: a missing property of an object that is
   present gets its default, then the walk goes on into it (the defaulted value included);
2. validation of the OpenAPI v3 subset that CRDs may use (`validate`): type, format int32/
   int64, properties, required, additionalProperties, items, enum, pattern, min/maxLength,
   min/maxItems, minProperties, minimum/maximum, x-kubernetes-int-or-string and the list
   types `set` and `map` (unique keys);
3. CEL rules (x-kubernetes-validations). A rule that compares with `oldSelf` only runs on
   an update, so it is skipped (these are creations). Every other rule must be one that
   `CEL` below implements by hand; a rule it does not know is an error, never a pass, so a
   new CRD cannot make this validator silently weaker.
An unknown field is an error, as `kubectl apply` (strict field validation, the default
since Kubernetes 1.27) makes it; a null value counts as absent, as the apiserver drops it.
No pip package: Debian 12's python3 with python3-yaml runs it (a jsonschema library would
not know the x-kubernetes-* keywords, nor reject unknown fields, which CRDs never forbid).
"""
import copy
import glob
import os
import re

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CRD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crds")
INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _has(obj, key):
    return isinstance(obj, dict) and obj.get(key) is not None


# The CRDs' non-transition CEL rules (texts exactly as the CRD files hold them), in Python.
# Each returns True when the value passes.
CEL = {
    # jobset api/jobset/v1alpha2/jobset_types.go JobSetSpec (also embedded in Trainer's runtime CRDs)
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "self.replicatedJobs.exists(x, has(x.dependsOn)))":
        lambda s: not (_has(s, "startupPolicy") and s["startupPolicy"].get("startupPolicyOrder") == "InOrder"
                       and any(_has(j, "dependsOn") for j in s.get("replicatedJobs", []))),
    "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)":
        lambda s: all(not (t.get("metadata") or {}).get("namespace") for t in s.get("templates", [])),
    # trainer pkg/apis/trainer/v1alpha1/trainingruntime_types.go MLPolicy, FluxMLPolicySource, TorchEnvInjection
    "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1":
        lambda s: sum(_has(s, k) for k in ("torch", "mpi", "jax", "xgboost", "flux")) <= 1,
    "self >= 1": lambda s: s >= 1,
    "!self.exists(c, c == 'node')": lambda s: "node" not in s,
    # trainer pkg/apis/trainer/v1alpha1/trainjob_types.go TrainJob, Initializer, TrainJobSpec, TrainerStatus
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')":
        lambda s: bool(DNS1035.search(s.get("metadata", {}).get("name", ""))),
    "size(self.metadata.name) <= 63": lambda s: len(s.get("metadata", {}).get("name", "")) <= 63,
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')":
        lambda s: s == "" or bool(re.search(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$", s)),
    "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']":
        lambda s: s in ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"),
    "has(self.lastUpdatedTime)": lambda s: _has(s, "lastUpdatedTime"),
}


class Schemas:
    """The CRDs of a folder, by (apiVersion, kind)."""

    def __init__(self, folder=CRD_DIR):
        self.crds = {}
        for path in sorted(glob.glob(os.path.join(folder, "*.yaml"))):
            with open(path) as stream:
                crds = [d for d in yaml.load_all(stream, Loader=LOADER) if d]
            for crd in crds:
                if crd.get("kind") != "CustomResourceDefinition":
                    continue
                group, names = crd["spec"]["group"], crd["spec"]["names"]
                for version in crd["spec"]["versions"]:
                    key = (f"{group}/{version['name']}", names["kind"])
                    self.crds[key] = (crd["spec"]["scope"], version["schema"]["openAPIV3Schema"])

    def schema(self, obj):
        key = (obj.get("apiVersion"), obj.get("kind"))
        if key not in self.crds:
            raise KeyError(f"no CRD for {key[0]} {key[1]} in {CRD_DIR} (have {sorted(self.crds)})")
        return self.crds[key]

    def apply_defaults(self, obj):
        """Fills in the schema's defaults, in place (apiextensions-apiserver
        pkg/apiserver/schema/defaulting/algorithm.go `Default`)."""
        _default(obj, self.schema(obj)[1])
        return obj

    def validate(self, obj):
        """Every reason the apiserver would refuse obj on create, as 'path: message' lines."""
        scope, schema = self.schema(obj)
        errors = []
        meta = obj.get("metadata") or {}
        # The schema says only `metadata: {type: object}`; the apiserver checks ObjectMeta itself.
        if not DNS1123_SUBDOMAIN.search(meta.get("name", "")) or len(meta.get("name", "")) > 253:
            errors.append(f"metadata.name: {meta.get('name')!r} is not a DNS-1123 subdomain")
        if scope == "Cluster" and meta.get("namespace"):
            errors.append(f"metadata.namespace: {obj['kind']} is cluster-scoped; remove the namespace")
        for key in ("labels", "annotations"):
            for k, v in (meta.get(key) or {}).items():
                if not isinstance(v, str):
                    errors.append(f"metadata.{key}.{k}: {v!r} must be a string")
        _check(obj, schema, "", errors, top=True)
        return errors


def _default(value, schema):
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, prop in props.items():
            if "default" in prop and value.get(key) is None:
                value[key] = copy.deepcopy(prop["default"])
        for key, item in value.items():
            if key in props:
                _default(item, props[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                _default(item, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(item, schema["items"])


def _type_ok(value, schema):
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    kind = schema.get("type")
    return {
        "object": lambda: isinstance(value, dict),
        "array": lambda: isinstance(value, list),
        "string": lambda: isinstance(value, str),
        "boolean": lambda: isinstance(value, bool),
        "integer": lambda: isinstance(value, int) and not isinstance(value, bool),
        "number": lambda: isinstance(value, (int, float)) and not isinstance(value, bool),
        None: lambda: True,
    }[kind]()


def _check(value, schema, path, errors, top=False):
    where = path or "(top)"
    if not _type_ok(value, schema):
        expected = "int or string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        errors.append(f"{where}: {value!r} is a {type(value).__name__}; the schema wants {expected}")
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) > schema.get("maxLength", len(value)) or len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: length {len(value)} is outside [{schema.get('minLength', 0)}, "
                          f"{schema.get('maxLength', 'inf')}]")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = INT_RANGE.get(schema.get("format"), (None, None))
        low = schema.get("minimum", low)
        high = schema.get("maximum", high)
        if (low is not None and value < low) or (high is not None and value > high):
            errors.append(f"{where}: {value} is outside [{low}, {high}]")
    if isinstance(value, dict):
        _check_object(value, schema, path, errors, top)
    if isinstance(value, list):
        _check_list(value, schema, path, errors)
    for rule in schema.get("x-kubernetes-validations", []):
        text = rule["rule"]
        if "oldSelf" in text:
            continue  # a transition rule: updates only
        if text not in CEL:
            errors.append(f"{where}: CEL rule {text!r} is not implemented in crd_schema.CEL; add it")
        elif not CEL[text](value):
            errors.append(f"{where}: {rule.get('message', text)}")


def _check_object(value, schema, path, errors, top):
    present = {k for k, v in value.items() if v is not None}
    for key in schema.get("required", []):
        if key not in present:
            errors.append(f"{path + '.' if path else ''}{key}: required")
    if len(present) < schema.get("minProperties", 0):
        errors.append(f"{path or '(top)'}: needs at least {schema['minProperties']} fields")
    props, extra = schema.get("properties"), schema.get("additionalProperties")
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if item is None:
            continue
        if props is not None and key in props:
            if not (top and key == "metadata"):
                _check(item, props[key], child, errors)
        elif isinstance(extra, dict):
            _check(item, extra, child, errors)
        else:  # pruned by the apiserver, which strict field validation reports
            errors.append(f"{child}: unknown field (the schema has {sorted(props or [])})")


def _check_list(value, schema, path, errors):
    if len(value) > schema.get("maxItems", len(value)) or len(value) < schema.get("minItems", 0):
        errors.append(f"{path}: {len(value)} items, outside [{schema.get('minItems', 0)}, "
                      f"{schema.get('maxItems', 'inf')}]")
    items = schema.get("items") or {}
    for i, item in enumerate(value):
        if item is None:
            errors.append(f"{path}[{i}]: null item")
        else:
            _check(item, items, f"{path}[{i}]", errors)
    kind = schema.get("x-kubernetes-list-type")
    if kind == "set":
        seen = [yaml.safe_dump(v) for v in value]
        if len(set(seen)) != len(seen):
            errors.append(f"{path}: a set with duplicates")
    elif kind == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        tuples = [tuple((v or {}).get(k) for k in keys) for v in value]
        for dup in sorted({t for t in tuples if tuples.count(t) > 1}, key=str):
            errors.append(f"{path}: two items with {dict(zip(keys, dup))} (a map list keyed by {keys})")
