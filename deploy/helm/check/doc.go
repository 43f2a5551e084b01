// Package check tests the Helm chart in ../taskgate with a helm binary
// (built from helm.sh/helm/v4 by scripts/test.sh; $HELM, else helm on
// PATH) and the Kubernetes API types: `helm lint` (also --strict), a
// render of every toggle of a values matrix, each rendered object decoded
// strictly into its k8s.io/api type (an unknown field fails), values the
// schema must reject, the binary starting with the rendered args, and
// deploy/kubernetes/*.yaml being exactly what the chart renders for
// ../kubernetes.values.yaml.
//
// It is a module of its own so that k8s.io/api and its dependencies stay
// out of taskgate's go.mod. Run it with `(cd deploy/helm/check && go test
// ./...)`.
//
// Files:
//   - render_test.go: running helm, splitting and strictly decoding its output
//   - crd_test.go: the two Prometheus Operator kinds, as local strict structs
//   - chart_test.go: lint, the values matrix and its assertions, the rejected values
//   - reject_test.go: values the chart must refuse, planted typos, the schema's flags
//   - manifests_test.go: deploy/kubernetes/*.yaml against the chart (-update rewrites them)
//   - run_test.go: the taskgate binary started with the args and env the chart renders
package check
