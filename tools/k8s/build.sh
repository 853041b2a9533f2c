#!/usr/bin/env bash
# Builds the real Kubernetes control plane the tests run (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, helm, Kueue, KAI-scheduler) from their Go modules, pinned by the
# go.mod/go.sum files beside this script, into a cache folder keyed by the versions: nothing is
# rebuilt when the binaries for these versions are already there. Prints the folder holding the
# binaries.
#
#   tools/k8s/build.sh            build what is missing, print the bin folder
#   tools/k8s/build.sh --print    print the bin folder only (exit 1 when something is missing)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache_root="${K8S_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/campus-gpu-hub/k8s-tools}"
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}_kueue-${KUEUE_VERSION}_kai-${KAI_VERSION}_r${BUILD_REVISION}"
bin="$cache_root/$key/bin"
kai_components=(scheduler binder podgrouper podgroupcontroller queuecontroller admission)
tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm kueue "${kai_components[@]/#/kai-}")
kueue_manifests="$cache_root/$key/kueue-manifests.yaml"
kai_manifests="$cache_root/$key/kai-manifests.yaml"

missing=()
for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || missing+=("$t"); done
[[ -s "$kueue_manifests" ]] || missing+=(kueue-manifests)
[[ -s "$kai_manifests" ]] || missing+=(kai-manifests)
if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  [[ ${#missing[@]} -eq 0 ]]
  exit
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "Building the Kubernetes control plane needs Go 1.24 or newer (https://go.dev/doc/install)." >&2; exit 1; }
mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath" GOTOOLCHAIN=local
started=$SECONDS
log() { echo "k8s-tools: $*" >&2; }

build_date=$(date -u -d "@${SOURCE_DATE:-0}" +%Y-%m-%dT%H:%M:%SZ)
major=${KUBERNETES_VERSION#v}; minor=${major#*.}; minor=${minor%%.*}; major=${major%%.*}
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  kube_ldflags+=" -X $pkg.gitCommit=$KUBERNETES_COMMIT -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

build() {  # build MODULE_DIR OUTPUT PACKAGE LDFLAGS
  local dir=$1 out=$2 pkg=$3 ldflags=$4
  [[ -x "$bin/$out" ]] && return 0
  log "building $out ($pkg)"
  (cd "$here/$dir" && go build -ldflags "-s -w $ldflags" -o "$bin/$out.tmp" "$pkg")
  mv "$bin/$out.tmp" "$bin/$out"
}

for t in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build kubernetes "$t" "k8s.io/kubernetes/cmd/$t" "$kube_ldflags"
done
build etcd etcd go.etcd.io/etcd/server/v3 \
  "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
# helm assumes the Kubernetes release of the client libraries it was built with (its
# Makefile passes them; left out, `helm template` takes the cluster for a 1.20).
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $pkg.k8sVersionMajor=$HELM_KUBERNETES_MAJOR -X $pkg.k8sVersionMinor=$HELM_KUBERNETES_MINOR"
done
build helm helm helm.sh/helm/v3/cmd/helm "$helm_ldflags"
build kueue kueue sigs.k8s.io/kueue/cmd/kueue \
  "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
# Kueue's own installation manifests (CRDs, RBAC, webhooks), rendered from its module's
# config/default with the kustomize that kubectl embeds; the tests point the webhooks at
# the controller on loopback.
if [[ ! -s "$kueue_manifests" ]]; then
  log "rendering Kueue's manifests"
  kueue_dir=$(cd "$here/kueue" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  "$bin/kubectl" kustomize "$kueue_dir/config/default" > "$kueue_manifests.tmp"
  mv "$kueue_manifests.tmp" "$kueue_manifests"
fi
# KAI-scheduler's components, each a binary of its module's cmd/ (what its operator deploys
# as images); the tests run them as local processes.
kai_ldflags=""
for v in "gitVersion=$KAI_VERSION" "gitCommit=$KAI_COMMIT" gitTreeState=clean "buildDate=$build_date"; do
  kai_ldflags+=" -X github.com/NVIDIA/KAI-scheduler/pkg/scheduler/version.$v"
done
for c in "${kai_components[@]}"; do
  build kai "kai-$c" "github.com/NVIDIA/KAI-scheduler/cmd/$c" "$kai_ldflags"
done
# KAI's installation manifests: its Helm chart (in the module) rendered with GPU sharing on,
# CRDs included; the tests install what the chart makes and play its operator.
if [[ ! -s "$kai_manifests" ]]; then
  log "rendering KAI-scheduler's chart"
  kai_dir=$(cd "$here/kai" && go mod download -json "github.com/NVIDIA/KAI-scheduler@$KAI_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  "$bin/helm" template kai-scheduler "$kai_dir/deployments/kai-scheduler" --namespace kai-scheduler \
    --include-crds --set global.gpuSharing=true --set global.registry=ghcr.io/nvidia/kai-scheduler \
    --set global.tag="$KAI_VERSION" > "$kai_manifests.tmp"
  mv "$kai_manifests.tmp" "$kai_manifests"
fi
log "built in $((SECONDS - started)) s"
echo "$bin"
