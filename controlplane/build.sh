#!/usr/bin/env bash
# Builds the pinned control plane the tests run (versions.env) into a per-user cache keyed by the pins, so
# `make clean` and a fresh clone keep it: etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
# the module in controlplane/kubernetes/; KubeRay's operator and kwok each in its own published module (go
# install pkg@version: their go.mod have no replace lines), with the CRDs and stages their modules ship.
# Builds only what is missing, a line per binary and the time taken.
# Usage: controlplane/build.sh            build what is missing
#        controlplane/build.sh --dirs     print NAME=DIR per component, build nothing
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
. "$here/versions.env"
command -v go >/dev/null || { echo "controlplane/build.sh: go is not on PATH: install Go 1.26 (go.dev/dl)" >&2; exit 2; }
goversion="$(go env GOVERSION)"
root="${GRPO_GKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/grpo-gke}/controlplane"
k8s_hash="$(cat "$here/kubernetes/go.mod" "$here/kubernetes/go.sum" | sha256sum | cut -c1-12)"
kubernetes="$root/kubernetes-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-$k8s_hash-$goversion"
kuberay="$root/kuberay-$KUBERAY_VERSION-$goversion"
kwok="$root/kwok-$KWOK_VERSION-$goversion"
if [ "${1:-}" = "--dirs" ]; then printf 'kubernetes=%s\nkuberay=%s\nkwok=%s\n' "$kubernetes" "$kuberay" "$kwok"; exit 0; fi
start=$SECONDS
build() {  # build DIR NAME COMMAND...: runs COMMAND (which writes $tmp/NAME) unless DIR/bin/NAME exists
  local dir="$1" name="$2"; shift 2
  if [ -x "$dir/bin/$name" ]; then echo "controlplane: $name present"; return; fi
  local t0=$SECONDS
  echo "controlplane: building $name ..."
  mkdir -p "$dir/bin"
  tmp="$(mktemp -d "$dir/.build.XXXXXX")"
  "$@"
  mv "$tmp/$name" "$dir/bin/$name" && rmdir "$tmp"
  echo "controlplane: built $name in $((SECONDS - t0)) s"
}
# Niced, so more jobs than cores take only the CPU others leave idle (a shared 2-core machine builds faster so).
export GOFLAGS="-trimpath -buildvcs=false -p=${GRPO_GKE_BUILD_JOBS:-6}"
k8s() { (cd "$here/kubernetes" && nice -n 19 go build -o "$tmp/$1" "$2"); }
build "$kubernetes" etcd k8s etcd go.etcd.io/etcd/server/v3
build "$kubernetes" kube-apiserver k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build "$kubernetes" kube-scheduler k8s kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build "$kubernetes" kube-controller-manager k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
gobin() { (cd "$tmp" && GOBIN="$tmp" nice -n 19 go install "$1"); }
build "$kuberay" ray-operator gobin "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
build "$kwok" kwok gobin "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
module_dir() { (cd "$root" && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'); }
# KubeRay's CRDs as its operator's module ships them (ray-operator/config/crd/bases).
if [ ! -d "$kuberay/crd" ]; then
  mkdir -p "$kuberay/.crd" && cp "$(module_dir "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION")"/config/crd/bases/*.yaml "$kuberay/.crd/"
  chmod -R u+w "$kuberay/.crd" && mv "$kuberay/.crd" "$kuberay/crd"
fi
# kwok's own stages: nodes made Ready and kept alive through their Lease, pods run and deleted (kustomize/stage).
if [ ! -d "$kwok/stages" ]; then
  src="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")/kustomize/stage"
  mkdir -p "$kwok/.stages" && cp "$src"/node/fast/node-initialize.yaml "$src"/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml "$src"/pod/fast/pod-*.yaml "$kwok/.stages/"
  chmod -R u+w "$kwok/.stages" && mv "$kwok/.stages" "$kwok/stages"
fi
echo "controlplane: ready in $((SECONDS - start)) s"
